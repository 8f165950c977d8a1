"""The files Baton writes into a worktree, which are never a ticket's work: a touch swept
at the end of a turn leaves them out, and so does a stage's proof."""

from __future__ import annotations

from pathlib import Path

AGENT_SKILLS = Path(__file__).resolve().parent.parent / "agent_skills"  # the skills Baton ships, one folder each

# As path prefixes relative to the worktree root (a folder's ends in /): the binding and the
# run, the handoffs, and what `baton install claude` or `baton install codex` writes.
BATONS_OWN = (".baton/", "docs/handoffs/", ".claude/settings.json", ".claude/settings.local.json",
              ".codex/config.toml", ".codex/hooks.json",
              *(f".claude/skills/{path.parent.name}/SKILL.md" for path in sorted(AGENT_SKILLS.glob("*/SKILL.md"))))
