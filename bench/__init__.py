"""Baton's benchmarks, each run from the repository root as `.venv/bin/python -m bench.NAME`.

What several of them share lives in bench/common.py; the test servers they start come from
tests/servers (the tests never import the benches: an import contract in pyproject.toml)."""
