"""The files Baton writes into a worktree, which are never a ticket's work: a touch swept
at the end of a turn leaves them out, and so does a stage's proof."""

from __future__ import annotations

from pathlib import Path

from baton.skills.runtime.agents import AGENTS

AGENT_SKILLS = Path(__file__).resolve().parent.parent / "agent_skills"  # the skills Baton ships, one folder each

# As path prefixes relative to the worktree root (a folder's ends in /): the binding and the
# run, the handoffs, and what `baton install AGENT` writes into a project.
BATONS_OWN = (".baton/", "docs/handoffs/",
              *dict.fromkeys(path.format(skill=skill.parent.name) for agent in AGENTS.values()
                             for path in agent.worktree_files for skill in sorted(AGENT_SKILLS.glob("*/SKILL.md"))))
