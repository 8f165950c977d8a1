import pytest

from baton.graph.conflicts import conflict_signal_id, should_emit_conflict_signal


def test_reference_signal_ids():
    assert conflict_signal_id("OMN-1234", "OMN-5678",
                              ["src/foo.py"]) == "986bf57f-1e7b-5edd-be37-b28dff265639"
    assert conflict_signal_id("OMN-9999", "OMN-1234",
                              ["src/foo.py"]) == "650ffd85-554c-582c-9ca8-6a12022ce34c"
    assert conflict_signal_id("OMN-1234", "OMN-5678",
                              ["src/c.py", "src/a.py"]) == "b5221943-360f-5dad-9a8b-5cc2e763cf12"


def test_overlaps_self_skipped_and_symmetric_ids():
    a = {"task_id": "A", "files_touched": ["x", "y", "z"]}
    b = {"task_id": "B", "files_touched": ["y", "z", "q"]}
    c = {"task_id": "C", "files_touched": ["q"]}
    found = should_emit_conflict_signal(a, [a, b, c])
    assert [(f.other_task_id, f.shared_files) for f in found] == [("B", ["y", "z"])]
    back = should_emit_conflict_signal(b, [a])
    assert back[0].signal_id == found[0].signal_id


def test_a_task_listed_twice_is_reported_once():
    mine = {"task_id": "A", "files_touched": ["x", "y"]}
    found = should_emit_conflict_signal(mine, [{"task_id": "B", "files_touched": ["x"]},
                                               {"task_id": "B", "files_touched": ["y"]}])
    assert len(found) == 1 and found[0].shared_files == ["x", "y"]


def test_no_files_no_conflicts_and_strings_are_refused():
    assert should_emit_conflict_signal({"task_id": "A", "files_touched": []},
                                       [{"task_id": "B", "files_touched": ["x"]}]) == []
    with pytest.raises(TypeError):
        should_emit_conflict_signal({"task_id": "A", "files_touched": "src/a.py"}, [])
