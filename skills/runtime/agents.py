"""What each agent Baton installs into needs, as data: its hook events and their `baton hook`
names, the tools that edit files and where their arguments name the file, how its hook
payloads spell their fields, how a hook's answer is shaped, and the files an install puts
in a worktree. The installers, the hook adapter (baton.skills.frontends.hooks) and the
native continuation a resume offers read these rows; a new agent is a row, its installer's
file format and its tests.

Imported by every hook: no imports, plain tuples (a fresh process pays for each class).
"""

from __future__ import annotations

from typing import NamedTuple

# An agent's hook event -> (`baton hook` name, tool matcher or None, timeout in seconds). The
# timeouts only bound a hung hook; each hook's own budget is far below them (bench/hooks.py).
Hooks = dict[str, tuple[str, str | None, int]]
PATCH = ""  # an edit tool whose `command` argument is a patch naming its files (Codex's apply_patch)
# Before an argument's name: it holds a shell command, whose words name the files it would
# write (baton.skills.runtime.command_words.written_paths). Checked before it runs; what it
# changed is recorded at the end of the turn, from the worktree.
SHELL = "$"


class Agent(NamedTuple):
    name: str  # as `baton install NAME` takes it
    hooks: Hooks
    edit_tools: dict[str, str]  # tool -> the argument naming the file it changes (PATCH, SHELL: see above)
    fields: dict[str, str]  # the payload's field -> Claude Code's name for it (the hooks read those)
    flat: bool  # answers at the top level ({"additionalContext"}), not in hookSpecificOutput
    asks: bool  # takes `ask` from the check before an edit (else the holder is named in the context)
    transcript: str  # how the agent's transcript file is named (the start of its name), "" for any
    resume: tuple[str, ...]  # the agent's own command that continues one of its sessions by id
    worktree_files: tuple[str, ...]  # what a project install writes ({skill}: each skill), not the agent's work


CLAUDE_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}
CLAUDE_HOOKS: Hooks = {
    "SessionStart": ("session-start", None, 10),
    "PreToolUse": ("pre-tool-use", "Edit|MultiEdit|Write|NotebookEdit", 5),
    "PostToolUse": ("post-tool-use", "Edit|MultiEdit|Write|NotebookEdit", 5),
    "UserPromptSubmit": ("user-prompt-submit", None, 5),
    "Stop": ("stop", None, 30),
    "SessionEnd": ("session-end", None, 10),
}

AGENTS = {
    "claude": Agent("claude", CLAUDE_HOOKS, CLAUDE_TOOLS, {}, flat=False, asks=True, transcript="",
                    resume=("claude", "--resume"),
                    worktree_files=(".claude/settings.json", ".claude/settings.local.json",
                                    ".claude/skills/{skill}/SKILL.md")),
    # Codex runs Claude Code's hooks with its payloads; its patch tool edits files.
    "codex": Agent("codex", {**CLAUDE_HOOKS, "PreToolUse": ("pre-tool-use", "apply_patch", 5),
                             "PostToolUse": ("post-tool-use", "apply_patch", 5),
                             "SessionEnd": ("session-end", None, 3)},  # Codex clamps a SessionEnd hook to 3 s
                   {"apply_patch": PATCH}, {}, flat=False, asks=False, transcript="rollout-",
                   resume=("codex", "resume"), worktree_files=(".codex/config.toml", ".codex/hooks.json")),
    # Copilot CLI 1.0 (its own hooks format): no matchers, so the tool hooks see every tool.
    "copilot": Agent("copilot", {"sessionStart": ("session-start", None, 10),
                                 "userPromptSubmitted": ("user-prompt-submit", None, 5),
                                 "preToolUse": ("pre-tool-use", None, 5), "postToolUse": ("post-tool-use", None, 5),
                                 "agentStop": ("stop", None, 30), "sessionEnd": ("session-end", None, 10)},
                     {"edit": "path", "create": "path", "bash": SHELL + "command"},
                     {"sessionId": "session_id", "toolName": "tool_name", "toolArgs": "tool_input",
                      "transcriptPath": "transcript_path"},
                     flat=True, asks=True, transcript="events.jsonl", resume=("copilot", "--resume"),
                     worktree_files=(".github/hooks/baton.json", ".github/skills/{skill}/SKILL.md")),
}
EDIT_TOOLS = {tool: argument for agent in AGENTS.values() for tool, argument in agent.edit_tools.items()}
HOOK_NAMES = tuple(dict.fromkeys(hook for agent in AGENTS.values() for hook, _, _ in agent.hooks.values()))


def of_payload(event: dict) -> Agent:
    """The agent that sent a hook payload: Copilot spells its fields in camel case, Codex
    names its patch tool or its transcript; Claude Code otherwise."""
    if "sessionId" in event and "session_id" not in event:
        return AGENTS["copilot"]
    transcript = event.get("transcript_path")
    if event.get("tool_name") in AGENTS["codex"].edit_tools or (
            isinstance(transcript, str) and transcript.rsplit("/", 1)[-1].startswith(AGENTS["codex"].transcript)):
        return AGENTS["codex"]
    return AGENTS["claude"]
