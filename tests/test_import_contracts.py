"""The import contracts (pyproject.toml, checked by scripts/check) that name modules: the
kernel's names every kernel module and forbids every other package, the front ends' forbids
every store package, so a module or package added later is covered too. And no module
imports tests/conftest.py: pytest gives its fixtures to tests by name."""

import ast
import tomllib

from tests.workspace import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = set(PYPROJECT["tool"]["setuptools"]["package-dir"])


def contract(contract_id: str) -> dict:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def test_the_kernel_contract_lists_every_module_directly_in_baton():
    kernel = ROOT / "baton"
    modules = {f"baton.{path.stem}" for path in kernel.glob("*.py") if path.stem != "__init__"}
    modules |= {f"baton.{path.parent.name}" for path in kernel.glob("*/__init__.py")}
    assert sorted(contract("kernel")["source_modules"]) == sorted(modules)


def test_the_kernel_contract_forbids_every_other_package():
    assert sorted(contract("kernel")["forbidden_modules"]) == sorted(PACKAGES - {"baton"})


def test_the_front_ends_contract_forbids_every_store_package():
    stores = PACKAGES - {"baton", "baton.skills"}
    assert stores <= set(contract("frontends-open-no-store")["forbidden_modules"])


def imports_conftest(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name == "tests.conftest" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
                node.module == "tests.conftest"
                or (node.module == "tests" and any(alias.name == "conftest" for alias in node.names))):
            return True
    return False


def test_no_module_imports_conftest():
    """conftest.py holds pytest's hooks and fixtures, which pytest hands to tests by name;
    helpers live in ordinary modules (tests/workspace.py, tests/stores.py, ...). Imported,
    conftest.py would be a second copy of itself beside the one pytest loaded."""
    offenders = [str(path.relative_to(ROOT)) for folder in ("tests", "bench", "scripts")
                 for path in sorted((ROOT / folder).rglob("*.py"))
                 if imports_conftest(ast.parse(path.read_text(), filename=str(path)))]
    assert offenders == []
