"""The documentation users navigate: the README stays a walk-through whose links lead
somewhere, and the reference in docs/ builds with MkDocs, broken links failing, its command
and settings pages written from the tables (scripts/reference_pages.py) naming every
command, option and setting Baton has; the examples marked as running do run."""

import argparse
import html
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.workspace import ROOT, git, make_repo

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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The reference as MkDocs builds it; --strict turns its warnings into a failure (a link
    to a missing page or anchor, a page left out of the navigation, a note of the command or
    settings page on nothing in the tables)."""
    built_in = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(built_in)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    return built_in


def html_sections(page: Path) -> dict[str, str]:
    """The built page's `<h2>` sections by id."""
    parts = re.split(r'<h2 id="([^"]+)"', page.read_text(encoding="utf-8"))
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_reference_builds_strictly(site):
    assert (site / "commands" / "index.html").exists() and (site / "settings" / "index.html").exists()


def test_the_commands_page_is_written_from_every_command_and_option(site):
    page = html_sections(site / "commands" / "index.html")
    for name, parser in commands().items():
        section = page.get("baton-" + name.replace(" ", "-"))
        assert section is not None, f"`baton {name}` has no section in the built commands page"
        assert (parser.description or "").replace("`", "") in html.unescape(re.sub(r"<[^>]+>", "", section))
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert re.search(rf"<code>{re.escape(html.escape(option))}[< ]", section), \
                    f"`baton {name} {option}` is not in its section of the built commands page"
    documented = {key.removeprefix("baton-") for key in page if key.startswith("baton-")}
    assert documented - {name.replace(" ", "-") for name in commands()} == {"resident"}  # before the parser


def test_the_settings_page_is_written_from_every_setting(site):
    from baton.skills.runtime.settings import SETTINGS

    rows = re.findall(r"<tr>.*?</tr>", (site / "settings" / "index.html").read_text(encoding="utf-8"), re.S)
    for setting in SETTINGS:
        names = [f"<code>{setting.env}</code>"] if setting.env else []
        if setting.table:
            names.append(f"<code>[{setting.table}] {setting.key}</code>")
        row = [row for row in rows if all(name in row for name in names)]
        assert len(row) == 1, f"{setting.where} has no row of its own in the built settings page"
        assert setting.doc.replace("`", "") in html.unescape(re.sub(r"<[^>]+>", "", row[0]))


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


# On the lines before a fenced bash or console block: `<!-- example: runs -->`, or, where the
# example needs what its page's prose describes, the commands that set it up, one a line:
# `<!-- example: runs after:`, the commands, `-->`.
EXAMPLE = "<!-- example: runs"


def examples(page: str) -> list[list[tuple[str, list[str]]]]:
    """The marked example blocks of a page, each as its command lines (set-up first) with
    the output shown under each (console blocks show it; in a bash block a command stands
    alone)."""
    blocks, lines = [], page.splitlines()
    for number, line in enumerate(lines):
        if not line.startswith(EXAMPLE):
            continue
        commands: list[tuple[str, list[str]]] = []
        if line.rstrip().endswith("after:"):
            while not lines[number + 1].startswith("-->"):
                number += 1
                commands.append((lines[number], []))
            number += 1  # the closing line
        fence = re.match(r"\s*```(bash|console)\s*$", lines[number + 1])
        assert fence, f"the example marked at line {number + 1} is not followed by a bash or console block"
        for text in lines[number + 2:]:
            if text.strip().startswith("```"):
                break
            if fence.group(1) == "bash" and text.strip():
                commands.append((text, []))
            elif fence.group(1) == "console" and text.startswith("$ "):
                commands.append((text[2:], []))
            elif commands:
                commands[-1][1].append(text)
        blocks.append(commands)
    return blocks


EXAMPLE_PAGES = [path for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
                 if EXAMPLE in path.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda path: path.name)
def test_the_marked_examples_run(page, home, cli, tmp_path, monkeypatch, capsys):
    """The page's marked blocks run in order in a fresh embedded home and repository. `cd DIR`
    enters the repository (a later, other DIR: a worktree of it); a `baton` command must exit
    0, or, where the output shown is `baton: error: ...`, fail and say so; other commands
    (`echo ... >> FILE`, `git add ...`) are run by bash and must succeed."""
    # The checks an example runs (`pytest -q`) find this pytest, and none of this run's options.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    places: dict[str, Path] = {}

    def enter(directory: str) -> Path:
        name = Path(directory).name
        if name not in places:
            first = next(iter(places.values()), None)
            places[name] = make_repo(tmp_path / name, "git@github.com:acme/shop.git") if first is None \
                else worktree(first, tmp_path / name)
        return places[name]

    def shell(command: str) -> None:
        ran = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
        assert ran.returncode == 0, f"{page.name}: `{command}` failed: {ran.stderr}"

    cwd = None
    for block in examples(page.read_text(encoding="utf-8")):
        for line, shown in block:
            words = shlex.split(line, comments=True)
            if words[0] != "cd" and "baton" not in words:
                cwd = cwd or enter("shop")
                shell(line)
                continue
            assert not {"|", ">", ">>", ";", "||"} & set(words), f"{page.name}: `{line}`: only && joins baton commands"
            for command in split_and(words):
                if command[0] == "cd":
                    cwd = enter(command[1])
                    continue
                cwd = cwd or enter("shop")
                if command[0] != "baton":
                    shell(shlex.join(command))
                    continue
                try:
                    code, _, err = cli(cwd, *command[1:])
                except SystemExit as exit_:  # argparse's refusal of the words
                    code, err = exit_.code, capsys.readouterr().err
                refused = [text for text in shown if text.startswith("baton: error:")]
                if refused:
                    assert code != 0 and refused[0] in err, f"{page.name}: `{line}` did not fail as shown: {err}"
                else:
                    assert code == 0, f"{page.name}: `{line}` exited {code}: {err}"


def split_and(words: list[str]) -> list[list[str]]:
    """`a && b` as [a, b]."""
    groups: list[list[str]] = [[]]
    for word in words:
        if word == "&&":
            groups.append([])
        else:
            groups[-1].append(word)
    return [group for group in groups if group]


def worktree(repo: Path, path: Path) -> Path:
    git(repo, "worktree", "add", "-q", str(path), "-b", path.name)
    return path
