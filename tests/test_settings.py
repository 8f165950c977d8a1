"""Server settings come from the environment or `baton.toml`; the environment wins."""

import json


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
