"""The documentation users navigate: the README stays a walk-through whose links lead
somewhere, and the reference in docs/ builds with MkDocs, broken links failing, and names
every command and option Baton has (tests/test_settings.py holds docs/settings.md's table
to every setting)."""

import argparse
import re
import subprocess
import sys
import unicodedata

from tests.workspace import ROOT

README_MAX_LINES = 600
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def prose(text: str, inline_code: bool = False) -> str:
    """The text outside fenced code blocks (and inline code, unless kept): where a link is a
    link and a heading a heading."""
    kept, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
            fence = None
        elif fence is None:
            kept.append(line if inline_code else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def anchors(text: str) -> set[str]:
    """The ids MkDocs (Python-Markdown's toc) gives the headings of a page."""
    ids = set()
    for line in prose(text, inline_code=True).splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            title = unicodedata.normalize("NFKD", heading.group(1)).encode("ascii", "ignore").decode()
            ids.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower()))
    return ids


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every `baton` command of the CLI's parser, `handoff verify` included."""
    from baton.skills.frontends.cli import _parser

    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}

    named = {}
    for name, parser in subcommands(_parser()).items():
        named[name] = parser
        named.update({f"{name} {sub}": subparser for sub, subparser in subcommands(parser).items()})
    return named


def sections(page: str) -> dict[str, str]:
    """The page's `## ` sections by title (headings inside code blocks are text)."""
    found: dict[str, str] = {}
    title = None
    in_prose = set(prose(page, inline_code=True).splitlines())
    for line in page.splitlines():
        if line.startswith("## ") and line in in_prose:
            title = line[3:].strip()
            found[title] = ""
        elif title is not None:
            found[title] += line + "\n"
    return found


def test_the_reference_builds_strictly(tmp_path):
    """--strict turns MkDocs' warnings into a failure: a link to a missing page or anchor, a
    page left out of the navigation."""
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "commands" / "index.html").exists()


def test_every_command_and_option_is_in_the_commands_page():
    page = sections((ROOT / "docs" / "commands.md").read_text(encoding="utf-8"))
    for name, parser in commands().items():
        section = page.get(f"baton {name}")
        assert section is not None, f"`baton {name}` has no section in docs/commands.md"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert re.search(rf"`{re.escape(option)}[` ]", section), \
                    f"`baton {name} {option}` is not in its section of docs/commands.md"


def test_the_commands_page_documents_no_command_baton_lacks():
    documented = {title.removeprefix("baton ") for title in sections((ROOT / "docs" / "commands.md").read_text())
                  if title.startswith("baton ")}
    assert documented - set(commands()) == {"resident"}  # run by the console script before the parser


def test_the_readme_is_a_walk_through():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the reference belongs in docs/"


def test_the_readmes_links_lead_somewhere():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = LINK.findall(prose(readme))
    assert any(target.startswith("docs/") for target in targets)
    for target in targets:
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else ROOT / "README.md"
        assert file.exists(), f"README.md links to {path}, which does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file.read_text(encoding="utf-8")), f"README.md links to {target}: no such heading"
