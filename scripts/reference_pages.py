"""MkDocs hook (mkdocs.yml `hooks:`): the command and settings reference pages written at
build time from the tables they document, so they cannot drift from them.

docs/commands.md holds what the table does not: the sections about no one command, and
under each `## baton NAME` heading the command's prose. The hook puts, under each heading,
the command's description, synopsis and options from the CLI's parser (built from
COMMANDS), in the table's order; a command the page has no section for gets one. A bullet
`` - `OPTION`...`` in a section is a note on that option: the text after the closing
backtick is added to the option's help (an option without help starts it with `: `).

docs/settings.md holds the prose about settings; the hook puts the table of SETTINGS (one
row each: variable, baton.toml key, default, meaning) before its first `## ` section. A
bullet `` - `VARIABLE`...`` (or `` - `[table] key`...``) there is a note added to that
row's meaning.

A note or section naming nothing in the tables fails the build: the page would be stale.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

NOTE = re.compile(r"- `([^`]+)`(.*)")
HAND_WRITTEN = {"baton resident"}  # run by the console script before the parser: no row


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "commands.md":
        return commands_page(markdown)
    if page.file.src_uri == "settings.md":
        return settings_page(markdown)
    return markdown


def sections(page: str) -> tuple[str, list[tuple[str, str]]]:
    """(the text before the first `## ` heading, [(title, body)]); headings in code blocks
    are text."""
    head, found, fence = [], [], False
    for line in page.splitlines(keepends=True):
        if line.startswith("```"):
            fence = not fence
        if line.startswith("## ") and not fence:
            found.append((line[3:].strip(), ""))
        elif found:
            found[-1] = (found[-1][0], found[-1][1] + line)
        else:
            head.append(line)
    return "".join(head), found


def notes(body: str, where: str) -> tuple[dict[str, str], str]:
    """({name: note}, the body without the note bullets); a bullet's continuation lines are
    indented by two spaces."""
    found: dict[str, str] = {}
    kept: list[str] = []
    name = None
    for line in body.splitlines(keepends=True):
        bullet = NOTE.fullmatch(line.rstrip("\n"))
        if bullet:
            name = bullet.group(1)
            if name in found:
                raise ValueError(f"{where}: two notes on `{name}`")
            found[name] = bullet.group(2)
        elif name is not None and line.startswith("  "):
            found[name] += " " + line.strip()
        else:
            name = None
            kept.append(line)
    return found, "".join(kept)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every section the parser writes: the global options, then each command (and its
    subcommand), in the table's order."""
    from baton.skills.frontends.cli import _parser

    top = _parser()
    named = {"Global options": top}
    for name, parser in subparsers(top).items():
        named[f"baton {name}"] = parser
        named.update({f"baton {name} {sub}": subparser for sub, subparser in subparsers(parser).items()})
    return named


def option_lines(parser: argparse.ArgumentParser, given: dict[str, str], title: str) -> list[str]:
    formatter = argparse.HelpFormatter(parser.prog)
    lines = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        name = formatter._format_action_invocation(action)
        text = _text(action.help or "") + given.pop(name, "")
        if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
            text += " (repeatable)"
        if action.choices and action.option_strings:
            text += ("; one of " if text else "one of ") + ", ".join(f"`{choice}`" for choice in action.choices)
        if not text.strip():
            raise ValueError(f"docs/commands.md, {title}: `{name}` has no help in the table and no note")
        lines.append(f"- `{name}`" + (text if text.startswith(":") else f": {text}"))
    return lines


def synopsis(parser: argparse.ArgumentParser) -> str:
    """The usage line as `--help` prints it, wrapped at 92 columns, continued 4 spaces in."""
    formatter = argparse.HelpFormatter(parser.prog, width=92)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return re.sub(r"\n +", "\n    ", formatter.format_help().strip())


def command_section(title: str, parser: argparse.ArgumentParser, body: str) -> str:
    given, prose = notes(body, f"docs/commands.md, {title}")
    prose = prose.strip("\n")
    description = _text(parser.description or "")
    if prose.startswith("See "):  # the section's first line: where to read more
        see, _, prose = prose.partition("\n\n")
        description += " " + " ".join(see.split())
    usage = synopsis(parser)
    if title == "Global options":
        description = ""
    options = option_lines(parser, given, title)
    if given:
        raise ValueError(f"docs/commands.md, {title}: notes on no option of the command: {', '.join(given)}")
    parts = [description, f"```\n{usage}\n```", "\n".join(options), prose]
    return "\n\n".join(part for part in parts if part) + "\n\n"


def commands_page(source: str) -> str:
    head, found = sections(source)
    written = parsers()
    bodies: dict[str, str] = {}
    after: dict[str | None, list[tuple[str, str]]] = {}  # hand-written sections, by the command before them
    last = None
    for title, body in found:
        if title in written:
            bodies[title], last = body, title
        elif title.startswith("baton ") and title not in HAND_WRITTEN:
            raise ValueError(f"docs/commands.md: a section for `{title}`, which is no command")
        else:
            after.setdefault(last, []).append((title, body))
    page = [head] + [f"## {title}\n{body}" for title, body in after.get(None, [])]
    for title, parser in written.items():
        page.append(f"## {title}\n\n" + command_section(title, parser, bodies.get(title, "")))
        page += [f"## {hand}\n{body}" for hand, body in after.get(title, [])]
    return "".join(page)


def settings_page(source: str) -> str:
    from baton.skills.runtime.settings import SETTINGS

    head, found = sections(source)
    given, head = notes(head, "docs/settings.md")
    rows = ["| variable | baton.toml | default | meaning |", "|---|---|---|---|"]
    for setting in SETTINGS:
        key = (f"`[{setting.table}] {setting.key}`" if setting.table else f"`{setting.key}` (top)"
               ) if setting.table is not None else ""
        meaning = _text(setting.doc) + "".join(given.pop(name, "") for name in (setting.env, setting.where) if name)
        if setting.choices:
            meaning += "; one of " + ", ".join(f"`{choice}`" for choice in setting.choices)
        if setting.high is not None:
            meaning += f" ({_number(setting.low)} to {_number(setting.high)})" if setting.low is not None \
                else f" (at most {_number(setting.high)})"
        cells = [f"`{setting.env}`" if setting.env else "", key, _default(setting.default), meaning]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if given:
        raise ValueError(f"docs/settings.md: notes on no setting: {', '.join(given)}")
    table = "\n".join(rows) + "\n\n"
    return head.rstrip("\n") + "\n\n" + table + "".join(f"## {title}\n{body}" for title, body in found)


def _text(table_text: str) -> str:
    """A table's plain text as Markdown: `<` and `>` outside code spans are text, not HTML."""
    parts = table_text.split("`")
    parts[::2] = [part.replace("<", "&lt;").replace(">", "&gt;") for part in parts[::2]]
    return "`".join(parts)


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else f"{value:,}"


def _default(value: object) -> str:
    if value is None or value == () or value == {}:
        return ""
    if isinstance(value, bool):
        return "`on`" if value else "`off`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"
