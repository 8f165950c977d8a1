"""The kernel import contract (pyproject.toml, checked by scripts/check) names every kernel
module and forbids every other package, so a module or package added later is covered too."""

import tomllib

from tests.workspace import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def kernel_contract() -> dict:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == "kernel")


def test_the_kernel_contract_lists_every_module_directly_in_baton():
    kernel = ROOT / "baton"
    modules = {f"baton.{path.stem}" for path in kernel.glob("*.py") if path.stem != "__init__"}
    modules |= {f"baton.{path.parent.name}" for path in kernel.glob("*/__init__.py")}
    assert sorted(kernel_contract()["source_modules"]) == sorted(modules)


def test_the_kernel_contract_forbids_every_other_package():
    packages = set(PYPROJECT["tool"]["setuptools"]["package-dir"]) - {"baton"}
    assert sorted(kernel_contract()["forbidden_modules"]) == sorted(packages)
