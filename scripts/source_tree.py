"""Build the installed layout of the source as a tree of symlinks, for the static checkers.

pyproject.toml's package-dir maps the top-level folders into one namespace (baton.registry
is registry/, ...). An editable install resolves that with an import hook, which ruff,
mypy and import-linter do not run; they read this tree instead, whose files link back to
the sources, so what they report is the code as it is. The tests and the benches are linked
in as they are imported (tests.*, bench.*), for the import contracts between them.

    python scripts/source_tree.py DIRECTORY
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BESIDE = {"tests": "tests", "bench": "bench"}  # packages run from the repository, not installed


def build(target: Path) -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    if target.exists():
        shutil.rmtree(target)
    for package, folder in {**mapping, **BESIDE}.items():
        destination = target.joinpath(*package.split("."))
        for source in (ROOT / folder).rglob("*.py"):
            link = destination / source.relative_to(ROOT / folder)
            if "__pycache__" in link.parts or link.exists():
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source)


if __name__ == "__main__":
    build(Path(sys.argv[1]).resolve())
