"""tests/conftest.py marks every test that uses a server `servers`, from the fixtures it
uses and their parameters, and fails one that asks for a server at run time unmarked."""

import pytest

from tests.workspace import ROOT

pytest_plugins = ["pytester"]

# Stand-ins for the server fixtures, so that the inner session starts no server.
INNER_TESTS = '''
import pytest


@pytest.fixture
def postgres_url():
    return "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
def bolt_uri():
    return "bolt://127.0.0.1:1"


@pytest.fixture(params=["embedded", "servers"])
def some_home(request):
    return request.param


def test_by_fixture(postgres_url):
    pass


def test_by_parameter(some_home):
    pass


def test_embedded():
    pass


def test_at_run_time_unmarked(request):
    request.getfixturevalue("bolt_uri")


@pytest.mark.servers
def test_at_run_time_marked(request):
    request.getfixturevalue("bolt_uri")
'''


@pytest.fixture
def inner(pytester):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    servers\n    slow\n")
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester


def test_servers_are_marked_from_fixtures_and_parameters(inner):
    result = inner.runpytest("-p", "no:cacheprovider", "-m", "servers", "--collect-only", "-q")
    collected = {line for line in result.outlines if "::" in line}
    assert collected == {"test_inner.py::test_by_fixture", "test_inner.py::test_by_parameter[servers]",
                         "test_inner.py::test_at_run_time_marked"}


def test_a_server_asked_for_at_run_time_without_the_mark_fails(inner):
    result = inner.runpytest("-p", "no:cacheprovider", "-m", "not servers")
    result.assert_outcomes(passed=3, errors=1, deselected=3)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_at_run_time_unmarked*",
                                 "uses bolt_uri but is not marked servers*"])
