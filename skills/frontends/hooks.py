"""The agents' hooks: `baton hook EVENT`, run by Claude Code, Codex or Copilot CLI with the
event's JSON payload on standard input (Claude Code's format, which Codex shares:
https://code.claude.com/docs/en/hooks; Copilot's fields and answers are read from its row
of baton.skills.runtime.agents, so everything below speaks Claude Code's names). What each
hook does, and how it tells its trouble, is in docs/agents.md (Claude Code).

A hook never breaks the agent: only pre-tool-use stops an edit (on another ticket's
exclusive lease); whatever goes wrong is one line on standard error and exit status 0, and
when Baton cannot record, the user is told once per agent session in `systemMessage`.
post-tool-use is the 100 ms path: imports stay lazy, as in baton.skills.services.touch.
A hook's unit of work delivers nothing first: stop and session-end deliver as a step of their own.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import closing, suppress
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

from baton.errors import BatonError, StoreUnavailable
from baton.files import WorktreeLocator
from baton.masking import mask
from baton.shown_text import one_line
from baton.skills.core.binding import place_of, read_binding, resolve_task
from baton.skills.frontends.invocation import of_process, warn
from baton.skills.runtime.agent_sessions import AgentSessions, Beat, forget_trouble, trouble_first_told
from baton.skills.runtime.agents import EDIT_TOOLS, PATCH, SHELL, Agent, of_payload

if TYPE_CHECKING:
    from baton.skills.core.binding import ActiveTask, Place
    from baton.skills.frontends.invocation import Invocation
    from baton.skills.runtime.stores import Stores

# A patch tool's tool_input.command holds the patch, whose headers name the files.
PATCH_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
SESSION_START_STORE_TIMEOUT = 0.5  # seconds of servers: keeps a session start within 1 s when one hangs


# A NamedTuple, not a dataclass: every fresh hook defines it, and a frozen dataclass's
# generated methods cost a fresh process about 1 ms a class (Python 3.11).
class Payload(NamedTuple):
    event: dict
    session_id: str
    cwd: Path
    agent_pid: int  # the process that ran the hook: the agent (the invocation's, not this process's parent)
    agent: Agent  # the agent's row: who sent the payload


class Output:
    """What a hook writes for Claude Code: one JSON object on stdout.

    say() writes at once, before anything is recorded as told, so what fails to reach the
    agent is told again later. cannot_record() notes that Baton failed to record; the user
    is told in `systemMessage` (the field Claude Code shows the user), in this hook's one
    output, once per agent session. A trouble found after the hook has spoken waits for
    the session's next hook."""

    def __init__(self, stdout: TextIO, event: str) -> None:
        self.stdout = stdout
        self.event = event
        self.session_id = ""
        self.flat = False  # the agent takes its answers' fields at the top level (Agent.flat)
        self.spoken = False
        self.trouble: str | None = None

    def say(self, output: dict) -> None:
        told = self._told_trouble()
        try:
            # ASCII JSON (escapes for the rest): no stdout encoding can refuse it.
            self.stdout.write(json.dumps({**output, **told}) + "\n")
            self.stdout.flush()
        except Exception:
            if told:  # not told after all
                forget_trouble(self.session_id)
            raise
        self.spoken = True

    def context(self, event: str, text: str) -> dict:
        """The answer that gives the model text as additional context."""
        if self.flat:
            return {"additionalContext": text}
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}

    def cannot_record(self, reason: str) -> None:
        """One line on stderr (Claude Code's debug log), and the user is to be told."""
        reason = one_line(mask(reason))
        print(f"baton: hook {self.event}: {reason}", file=sys.stderr)
        self.trouble = self.trouble or reason

    def once(self, message: dict) -> dict:
        """message, if this agent session has not been told of Baton's trouble yet (it is now
        marked told); else nothing: one line of trouble per session, whichever hook says it."""
        if not self.session_id:
            return message
        return message if trouble_first_told(self.session_id) else {}

    def finish(self) -> None:
        if not self.spoken and (told := self._told_trouble()):
            self.say(told)

    def _told_trouble(self) -> dict:
        """The systemMessage for the trouble, if there is one and this session was not told."""
        if self.trouble is None or not self.session_id:  # without a session id, once is not possible
            return {}
        return self.once({"systemMessage": f"Baton is not recording this session: {self.trouble}. The agent works on "
                                           "without it; `baton doctor` shows what is wrong."})


def run_hook(event: str, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
             invocation: Invocation | None = None) -> int:
    """Run one hook of invocation (else of this process); stdin and stdout, when given, stand
    for the invocation's. Always exit status 0."""
    invocation = invocation or of_process()
    stdin, out = stdin or invocation.stdin, Output(stdout or invocation.stdout, event)
    try:
        if event not in HANDLERS:
            raise ValueError(f"unknown hook {event!r}: use one of {', '.join(HANDLERS)}")
        payload = read_payload(stdin.read(), invocation.agent_pid)
        out.session_id, out.flat = payload.session_id, payload.agent.flat
        HANDLERS[event](payload, out)
    except Exception as exc:  # noqa: BLE001 -- the agent must never be broken by Baton: report, do not raise
        out.cannot_record(_failure(exc))
    # stdout may be gone: what went wrong is on stderr already, and nothing reaches the agent
    with suppress(Exception):
        out.finish()
    if event == "session-end" and out.session_id:
        forget_trouble(out.session_id)
    return 0


def read_payload(text: str, agent_pid: int) -> Payload:
    event = json.loads(text) if text.strip() else None
    if not isinstance(event, dict):
        raise ValueError("the hook's standard input is not a JSON object")
    agent = of_payload(event)
    event = {agent.fields.get(key, key): value for key, value in event.items()}
    session_id, cwd = event.get("session_id"), event.get("cwd")
    return Payload(event, session_id if isinstance(session_id, str) else "",
                   Path(cwd) if isinstance(cwd, str) and cwd else Path.cwd(), agent_pid, agent)


def edited_paths(event: dict, cwd: Path | None = None) -> list[str]:
    """The files a file-editing tool call changed, from its tool_input (or tool_response):
    Claude Code's Edit and Write name one, Codex's apply_patch names each in its patch; with
    cwd (before the call), also the files a shell tool's command would write, run in cwd."""
    tool = event.get("tool_name")
    given_input, given_response = event.get("tool_input"), event.get("tool_response")
    tool_input = given_input if isinstance(given_input, dict) else {}
    field = EDIT_TOOLS.get(tool) if isinstance(tool, str) else None
    if field and field.startswith(SHELL):
        from baton.skills.runtime.command_words import written_paths

        command = tool_input.get(field[len(SHELL):])
        return written_paths(command, str(cwd)) if cwd is not None and isinstance(command, str) else []
    if field == PATCH:
        patch = tool_input.get("command")
        lines = patch.splitlines() if isinstance(patch, str) else []
        paths = [line[len(header):].strip() for line in lines for header in PATCH_HEADERS if line.startswith(header)]
        return list(dict.fromkeys(path for path in paths if path))
    if field is None:
        return []
    response = given_response if isinstance(given_response, dict) else {}
    path = tool_input.get(field) or response.get("filePath")
    return [path] if isinstance(path, str) and path else []


def pre_tool_use(payload: Payload, out: Output) -> None:
    """The check before an edit (or a shell command that writes files); fails open: whatever
    goes wrong allows the edit, told to the user once per agent session (Output.once,
    Output.cannot_record), on stderr each time."""
    paths = edited_paths(payload.event, payload.cwd)
    if not paths:
        return
    try:
        place, locator, task = locate(payload.cwd)
        if task is None:
            return
        from baton.skills.services.pre_edit import check_paths
        from baton.skills.services.unit import unit_of_work

        with unit_of_work(project=place.repo) as stores:
            verdict = check_paths(stores, task.task_id, paths, payload.cwd, locator)
    except Exception as exc:  # noqa: BLE001 -- an edit is never blocked because Baton cannot answer
        out.cannot_record(_failure(exc))
        return
    output = pre_tool_use_output(verdict.decision, verdict.reason, verdict.context, patch=not payload.agent.asks,
                                 flat=payload.agent.flat)
    if verdict.warnings:
        output |= out.once(unchecked("; ".join(verdict.warnings)))
    if output:
        out.say(output)


def pre_tool_use_output(decision: str, reason: str | None, context: str | None, *, patch: bool,
                        flat: bool = False) -> dict:
    """Claude Code's PreToolUse answer ({} for none): a decision only to ask or deny (an
    `allow` would skip the user's own permission rules), the overlaps as additionalContext.
    An agent that takes no `ask` (patch: Codex) has the holder named in the context, and
    the edit goes on; flat: the fields at the top level (Copilot)."""
    if patch and decision == "ask":
        decision, context = "allow", "\n\n".join(filter(None, [reason, context]))
    answer: dict = {"hookEventName": "PreToolUse"}
    if decision != "allow":
        answer |= {"permissionDecision": decision, "permissionDecisionReason": reason or ""}
    if context:
        answer["additionalContext"] = context
    if len(answer) == 1:
        return {}
    return {key: value for key, value in answer.items() if key != "hookEventName"} if flat \
        else {"hookSpecificOutput": answer}


def unchecked(reason: str) -> dict:
    """The one line the user sees (and stderr holds) when the edit goes ahead unchecked."""
    line = f"Baton could not check this edit against other tickets ({one_line(mask(reason))}); it goes ahead."
    print(f"baton: hook pre-tool-use: {line}", file=sys.stderr)
    return {"systemMessage": line}


def post_tool_use(payload: Payload, out: Output) -> None:
    paths = edited_paths(payload.event)
    if not paths:
        return
    place, locator, task = locate(payload.cwd)
    if task is None:
        return
    from baton.skills.services.touch import touch
    from baton.skills.services.unit import unit_of_work

    with unit_of_work(project=place.repo) as stores:
        report = touch(stores, task, paths, payload.cwd, locator, skip_refused=True)
        warn(report.warnings)
        with agent_sessions(stores) as sessions:
            heartbeat(sessions, payload, task, place)
            if not report.new_conflicts:
                return
            from baton import clock
            from baton.skills.frontends.briefing import conflicts_told

            out.say(out.context("PostToolUse",
                                conflicts_told(task.task_id, report.new_conflicts, report.conflict_paths,
                                                      report.forks)))
            sessions.told(payload.session_id, [str(c.signal_id) for c in report.new_conflicts], clock.now())


def session_start(payload: Payload, out: Output) -> None:
    place, _, task = locate(payload.cwd)
    if task is None:
        return
    from baton import clock
    from baton.skills.frontends.briefing import session_context
    from baton.skills.services.resume import resume_session
    from baton.skills.services.unit import unit_of_work

    with unit_of_work(store_timeout=SESSION_START_STORE_TIMEOUT, project=place.repo) as stores:
        watermark = stores.signals.watermark()
        # A handoff's probes may run for seconds: at session start it is named, not re-verified.
        result = resume_session(stores, task.task_id, place, bind_task=False, verify_handoff=False,
                               check_workflow=False)
        warn(result.warnings)
        if result.status == "unavailable" and stores.sink.writes_need_registry:
            # The embedded registry refuses reads: its writes fail too (a server's are kept locally).
            out.cannot_record(f"session registry unavailable: {result.reason}")
        context, shown = session_context(result, handoff=handoff_of(place.root, task.task_id))
        _step(out, "recording the agent session", lambda: remember_provider(stores, payload, task, place))
        with agent_sessions(stores) as sessions:
            heartbeat(sessions, payload, task, place)
            interrupted = interrupted_line(stores, place, sessions)
            out.say(out.context("SessionStart", f"{context}\n\n{interrupted}" if interrupted else context))
            now = clock.now()
            # Signals cut from the context are not told: the next prompt reads from the oldest.
            cut = [s.emitted_at for s in result.signals if str(s.signal_id) not in shown]
            sessions.told(payload.session_id, shown, now)
            sessions.heard(payload.session_id, task.task_id, min([now, *cut]), None if cut else watermark)


def heartbeat(sessions: AgentSessions, payload: Payload, task: ActiveTask, place: Place) -> None:
    """Record that the agent, the process that ran the hook, works on task in this worktree
    now (baton recover tells a gone agent by it)."""
    if not payload.session_id:
        return
    from baton import clock
    from baton.processes import process_start

    agent = payload.agent_pid
    # The host name as socket.gethostname() gives it, without importing socket (a hook's 1 ms).
    sessions.beat(Beat(task.task_id, str(place.root), payload.session_id, agent, process_start(agent),
                       os.uname().nodename, clock.now()))


def remember_provider(stores: Stores, payload: Payload, task: ActiveTask, place: Place) -> None:
    """Keep the agent's own session id and transcript path as the run's provider reference,
    encrypted in the data home (baton.skills.runtime.provider_refs): resume offers the
    agent's own continuation (`claude --resume`, Agent.resume) from it. At session start
    and each end of turn, not on the prompt's light path: encrypting imports the cipher."""
    from baton.skills.runtime.provider_refs import record
    from baton.skills.services.checkpoint import local_run

    run = local_run(place, task.task_id)
    transcript = payload.event.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) else None
    if run is not None and payload.session_id:
        record(stores.settings.home, task.task_id, run.run_id, payload.session_id, transcript,
               agent=payload.agent.name)


def interrupted_line(stores: Stores, place: Place, sessions: AgentSessions) -> str | None:
    """One line naming the interrupted work of other worktrees of this repository, if any
    (None with the registry down: the briefing has said so already)."""
    from baton.skills.services.recover import recover

    try:
        found = recover(stores, place, sessions.heartbeats())
    except StoreUnavailable:
        return None
    others = [c for c in found.candidates if c.worktree != str(place.root)]
    if not others:
        return None
    shown = ", ".join(f"{one_line(c.task_id)} ({one_line(c.branch)})" for c in others[:3])
    more = f" and {len(others) - 3} more" if len(others) > 3 else ""
    return f"Interrupted work in this repository: {shown}{more}; `baton recover` shows how to continue each."


def handoff_of(root: Path, task_id: str) -> str | None:
    """The worktree's current handoff for task_id, as resume chooses it, shown relative to
    root; None if none."""
    from baton.skills.handoff.files import choose_current, shown_path

    path = choose_current(root, task_id)[0]
    return shown_path(path, root) if path is not None else None


def user_prompt_submit(payload: Payload, out: Output) -> None:
    place, _, task = locate(payload.cwd)
    if task is None:
        return
    from baton import clock
    from baton.skills.frontends.briefing import signals_told
    from baton.skills.services.news import forks_among, untold_news
    from baton.skills.services.unit import unit_of_work

    binding = read_binding(place)
    bound_at = binding.bound_at if binding is not None and binding.task_id == task.task_id else None
    with unit_of_work(project=place.repo) as stores, agent_sessions(stores) as sessions:
        heartbeat(sessions, payload, task, place)
        watermark = stores.signals.watermark()
        heard = sessions.last_heard(payload.session_id, task.task_id)
        if heard is not None and watermark is not None and heard[1] == watermark:
            return  # no signal stored since the agent last heard: nothing to decode
        now = clock.now()
        news = untold_news(stores, sessions, payload.session_id, task.task_id, heard, bound_at=bound_at,
                           bound_session=task.session_id)
        if news:
            forks = forks_among(stores, task.task_id, news)
            out.say(out.context("UserPromptSubmit", signals_told(task.task_id, news, forks)))
            sessions.told(payload.session_id, [str(s.signal_id) for s in news], now)
        sessions.heard(payload.session_id, task.task_id, now, watermark)


def _wrap_up(payload: Payload, out: Output, *, ending: bool) -> None:
    """The end of the turn (baton.skills.services.end_of_turn), then (at a stop) the agent's
    heartbeat and provider reference: each step runs even when an earlier one failed."""
    import time

    from baton.skills.services.end_of_turn import SESSION_END, STOP, TurnEnd, end_of_turn
    from baton.skills.services.unit import unit_of_work

    started = time.monotonic()
    place, locator, task = locate(payload.cwd)
    turn = TurnEnd(SESSION_END if ending else STOP, payload.session_id, task, place, locator, started)
    with unit_of_work(project=place.repo) as stores:
        for result in end_of_turn(stores, turn):
            warn(result.warnings)
            if result.failure is not None:
                out.cannot_record(f"{result.doing}: {_failure(result.failure)}")
        if task is not None and not ending:
            def beat() -> None:
                with agent_sessions(stores) as sessions:
                    heartbeat(sessions, payload, task, place)

            _step(out, "recording the heartbeat", beat)
            _step(out, "recording the agent session", lambda: remember_provider(stores, payload, task, place))


def _step(out: Output, doing: str, step: Callable[[], None]) -> None:
    try:
        step()
    except Exception as exc:  # noqa: BLE001 -- the next step must run: report, do not raise
        out.cannot_record(f"{doing}: {_failure(exc)}")


def locate(cwd: Path) -> tuple[Place, WorktreeLocator, ActiveTask | None]:
    """(place, locator, the active ticket or None) for the directory the agent works in."""
    from baton.skills.runtime.settings import ambient_ticket

    locator = WorktreeLocator()
    place = place_of(cwd, locator)
    ambient = ambient_ticket()
    if read_binding(place) is None and not ambient[0]:
        return place, locator, None
    return place, locator, resolve_task(None, place, ambient)


def agent_sessions(stores: Stores) -> closing[AgentSessions]:
    return closing(AgentSessions(stores.settings.home, timeout=stores.settings.store_timeout))


def _failure(exc: Exception) -> str:
    """One line: Baton's own message, else the exception's type and message."""
    return one_line(str(exc) if isinstance(exc, BatonError) else f"{type(exc).__name__}: {exc}")


HANDLERS: dict[str, Callable[[Payload, Output], None]] = {
    "session-start": session_start,
    "pre-tool-use": pre_tool_use,
    "post-tool-use": post_tool_use,
    "user-prompt-submit": user_prompt_submit,
    "stop": lambda payload, out: _wrap_up(payload, out, ending=False),
    "session-end": lambda payload, out: _wrap_up(payload, out, ending=True),
}
