"""Server settings come from the environment or `baton.toml`; the environment wins."""

import json
import re
from pathlib import Path

import pytest


def test_baton_toml_configures_a_server(home, worktrees, cli, postgres_url):
    home.mkdir(parents=True)
    (home / "baton.toml").write_text(f'[stores]\ndatabase_url = "{postgres_url}"\n')
    reports = {r["store"]: r for r in json.loads(cli(worktrees[0], "doctor", "--json")[1])}
    assert reports["registry"]["backend"] == "postgresql" and reports["graph"]["backend"] == "sqlite"


def test_the_environment_wins_over_the_file(home, worktrees, cli, monkeypatch, postgres_url):
    home.mkdir(parents=True)
    (home / "baton.toml").write_text('[stores]\ndatabase_url = "postgresql://nobody@127.0.0.1:1/none"\n')
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    assert cli(worktrees[0], "doctor")[0] == 0


def test_a_bad_config_file_is_bad_input(home, worktrees, cli, monkeypatch, tmp_path):
    config = tmp_path / "baton.toml"
    monkeypatch.setenv("BATON_CONFIG", str(config))
    code, _, err = cli(worktrees[0], "list")
    assert code == 2 and "missing file" in err
    config.write_text("[stores]\ndatabse_url = 'typo'\n")
    code, _, err = cli(worktrees[0], "list")
    assert code == 2 and "unknown key in [stores]: databse_url" in err
    config.write_text("[stores\n")
    code, _, err = cli(worktrees[0], "list")
    assert code == 2 and "cannot read" in err


def test_each_field_of_the_settings_is_typed_as_its_row_reads_it():
    """Settings restates the table's names for the checker: each field is a row's (or holds
    the rows of its table), typed as the row's kind reads, None where the row may be unset."""
    from collections.abc import Mapping
    from datetime import timedelta
    from typing import get_type_hints

    from baton.skills.runtime.settings import SETTINGS, HandoffSettings, Settings

    kinds = {"text": str, "secret": str, "choice": str, "path": Path, "seconds": float, "number": float,
             "count": int, "duration": timedelta, "switch": bool, "globs": tuple[str, ...],
             "patterns": tuple[str, ...], "commands": tuple[tuple[str, ...], ...],
             "services": Mapping[str, tuple[str, ...]]}
    # Not fields of their own: where the data lives, a secret's file (its secret's value),
    # the [workflow] table (kept whole) and the [handoff] table (HandoffSettings).
    apart = {"config", "kafka_sasl_password_file", "qdrant_api_key_file"}
    fields = {**get_type_hints(Settings), **get_type_hints(HandoffSettings)}
    expected = {"home": Path, "handoff": HandoffSettings, "workflow": Mapping[str, object] | None}
    for row in SETTINGS:
        if row.name not in apart | {"home"} and row.table != "workflow":
            expected[row.name] = kinds[row.kind] if row.default is not None else kinds[row.kind] | None
    assert fields == expected


def test_reading_the_settings_masks_nothing_until_they_are_loaded(tmp_path):
    """Settings.from_env only reads; load_settings, where a command takes its settings,
    makes the secrets known to the masking."""
    from baton import masking
    from baton.skills.runtime.settings import Settings, load_settings

    environ = {"BATON_HOME": str(tmp_path), "BATON_GRAPH_PASSWORD": "bolt-pw-only-read",
               "BATON_QDRANT_API_KEY": "qdrant-key-only-read"}
    assert Settings.from_env(environ).secrets == ("bolt-pw-only-read", "qdrant-key-only-read")
    assert masking.mask("login with bolt-pw-only-read") == "login with bolt-pw-only-read"
    load_settings(environ)
    assert masking.mask("login with bolt-pw-only-read") == "login with ***"


def test_only_the_settings_read_batons_environment():
    """A `BATON_*` variable read anywhere but skills/runtime would be a setting outside the table."""
    root = Path(__file__).resolve().parents[1]
    read = re.compile(r"(environ(\.get)?\s*[\[(]|getenv\s*\()\s*[\"']BATON_")
    offenders = [str(path.relative_to(root)) for folder in ("baton", "skills", "registry", "graph", "recall", "signals")
                 for path in (root / folder).rglob("*.py")
                 if "runtime" not in path.relative_to(root).parts and read.search(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_a_setting_from_the_file_is_checked_like_one_from_the_environment(tmp_path):
    from baton.errors import BadInput
    from baton.skills.runtime.settings import Settings

    config = tmp_path / "baton.toml"
    config.write_text('[handoff]\nprobe_timeout = 5\nallow = ["pytest -q"]\n[hooks]\nhandoff = "stop"\n')
    settings = Settings.from_env({"BATON_HOME": str(tmp_path), "BATON_TASK_ID": "OMN-1"})
    read = (settings.handoff.probe_timeout, settings.handoff.allow, settings.hook_handoff)
    assert read == (5.0, (("pytest", "-q"),), "stop")
    assert settings.ambient == ("OMN-1", None)
    config.write_text("[handoff]\nprobe_budget = -1\n")
    with pytest.raises(BadInput, match=r"^baton.toml: \[handoff\] probe_budget is out of range"):
        Settings.from_env({"BATON_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match=r"^BATON_PROBE_BUDGET is out of range"):
        Settings.from_env({"BATON_HOME": str(tmp_path), "BATON_PROBE_BUDGET": "0"})


def test_credentials_are_settings_that_are_never_printed(tmp_path):
    from baton import masking
    from baton.errors import BadInput
    from baton.skills.runtime.settings import Settings, load_settings

    environ = {"BATON_HOME": str(tmp_path), "BATON_GRAPH_USER": "team", "BATON_GRAPH_PASSWORD": "bolt-pw-1",
               "BATON_QDRANT_API_KEY": "qdrant-key-2", "BATON_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
               "BATON_KAFKA_SASL_USERNAME": "team", "BATON_KAFKA_SASL_PASSWORD": "kafka-pw-3",
               "BATON_KAFKA_SSL_CA": str(tmp_path / "ca.pem")}
    settings = load_settings(environ)
    assert settings.graph_auth == ("team", "bolt-pw-1") and settings.qdrant_api_key == "qdrant-key-2"
    assert settings.kafka_security() == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                         "sasl.username": "team", "sasl.password": "kafka-pw-3",
                                         "ssl.ca.location": str(tmp_path / "ca.pem")}
    for secret in ("bolt-pw-1", "qdrant-key-2", "kafka-pw-3"):
        assert secret not in repr(settings)
        assert masking.mask(f"Kafka said: bad login with {secret}") == "Kafka said: bad login with ***"
    assert Settings.from_env({"BATON_HOME": str(tmp_path)}).kafka_security() == {"security.protocol": "PLAINTEXT"}
    for wrong in ({"BATON_KAFKA_SECURITY_PROTOCOL": "SASL"}, {"BATON_KAFKA_SASL_MECHANISM": "GSSAPI"},
                  {"BATON_GRAPH_PASSWORD": "pw"}):
        with pytest.raises(BadInput):
            Settings.from_env({"BATON_HOME": str(tmp_path), **wrong})
