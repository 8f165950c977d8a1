"""Every setting of Baton, in one table (SETTINGS), read by one function (Settings.from_env).

A row names the environment variable, the `baton.toml` table and key, the kind of value, its
default, range or choices and one line of documentation (docs/settings.md is written from the
rows). The environment wins over the file (BATON_CONFIG, else `baton.toml` in the data home);
neither is read unless it is the user's own (baton.trust; else baton.errors.Untrusted, exit 3).
A store without a server setting stays embedded, so every mix works. No other module reads a
`BATON_*` variable (a lower one is handed its value), except the resident process's client
(baton.skills.runtime.resident_client), which runs before anything is imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

from baton.clock import parse_duration
from baton.errors import BadInput, Untrusted
from baton.home import data_home, unusable
from baton.trust import home_refusal, read_private

HOOK_HANDOFF = ("never", "stop", "session-end")
ON_EXCLUSIVE = ("ask", "deny")
CHECKPOINT_PUSH = ("auto", "off")
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROBE_TIMEOUT = 10.0
PROBE_BUDGET = 30.0
# The longest of the caps below it by default (the probes' budget, a checkpoint's git):
# nothing that fit in its own cap is cut, and a hung git or probe costs a command at most
# this in all. Unset, a cap raised above it raises it too (Settings.command_deadline).
COMMAND_BUDGET = 30.0
# Kafka's clients accept socket timeouts up to 300 s; a store that needs longer is down.
MAX_STORE_TIMEOUT = 300.0
MAX_RECHECK_AFTER = 86400.0  # a day: a server down longer is asked again at least daily
MAX_PROBE_SECONDS = 86400.0
MAX_CHECKPOINT_FILE_BYTES = 1 << 40
MAX_GLOBS = 100
MAX_PARTITIONS = 1000  # each projector of a group takes at least one
MAX_GC_INTERVAL = 7 * 86400.0  # a week: the projector applies retention at least weekly
MCP_ANSWER_BUDGET = 10_000  # characters: Codex cuts a tool's output past about 12 KB
MIN_ANSWER_BUDGET, MAX_ANSWER_BUDGET = 2000, 10_000_000
PROJECT_VARIABLE = "BATON_PROJECT"  # what `--project` sets (use_project)


# The classes here are NamedTuples, not dataclasses: every fresh command builds them, and a
# dataclass's generated methods cost a fresh process about 1 ms per class, 6 ms for Settings
# (Python 3.11). Being tuples, two are equal when their values are, as dataclasses were.
class Setting(NamedTuple):
    """One row: where a setting comes from, what it may be, and what it does."""

    name: str  # the attribute of Settings (or of HandoffSettings, for the [handoff] table)
    env: str | None  # the environment variable, if the environment may set it
    table: str | None  # the baton.toml table, if the file may set it ("": a key at the top of the file)
    kind: str  # text, secret, secret_file (a path; its first line is the secret), path, seconds, number,
    # count, duration, switch, choice, commands, patterns, globs, services, lifecycle
    default: object
    doc: str
    low: float | None = None  # numbers: the range; `low_open` excludes low itself
    high: float | None = None
    low_open: bool = True
    choices: tuple[str, ...] = ()
    toml_key: str | None = None  # where the file's key differs from name

    @property
    def key(self) -> str:
        """The key in its baton.toml table."""
        return self.toml_key or self.name

    @property
    def where(self) -> str:
        """How a message names the setting: the variable, else the table and key."""
        return self.env or (f"[{self.table}] {self.key}" if self.table else self.key)


SETTINGS: tuple[Setting, ...] = (
    Setting("home", "BATON_HOME", None, "path", None,
            "the data directory (default `$XDG_DATA_HOME/baton` or `~/.local/share/baton`)"),
    Setting("config", "BATON_CONFIG", None, "path", None, "the configuration file (default `$BATON_HOME/baton.toml`)"),
    Setting("store_timeout", "BATON_STORE_TIMEOUT", None, "seconds", 2.0,
            "seconds one command may wait on servers in all; an embedded store's lock wait", high=MAX_STORE_TIMEOUT),
    Setting("command_budget", "BATON_COMMAND_BUDGET", None, "seconds", None,
            "seconds one command may wait in all, on servers, git, handoff probes and toolchains; each kind "
            "within its own cap (BATON_STORE_TIMEOUT, BATON_PROBE_BUDGET, ...); default 30, or the larger of "
            "those two when set higher", high=MAX_PROBE_SECONDS),
    Setting("recheck_after", "BATON_RECHECK_AFTER", None, "seconds", 30.0,
            "seconds a server found down stays in the health record", high=MAX_RECHECK_AFTER),
    Setting("stale_after", "BATON_STALE_AFTER", None, "duration", "24h",
            "idle time after which an active session is marked stale"),
    Setting("lease_ttl", "BATON_LEASE_TTL", None, "duration", "30m",
            "how long a lease lasts after its ticket's last activity (`baton claim --ttl` sets one lease's)"),
    Setting("lease_grace", "BATON_LEASE_GRACE", None, "duration", "15m",
            "grace after a lease's time before it lapses and another ticket may take it"),
    Setting("guard", "BATON_GUARD", None, "choice", "block",
            "what the pre-commit guard does with a staged path under another ticket's exclusive lease: "
            "block the commit, or warn", choices=("block", "warn")),
    # 0.4 from bench/recall_eval.py: it shows 95.6% of relevant decisions and 27% of the
    # others the search listed (0.3: 98.4% and 68%).
    Setting("recall_min_score", "BATON_RECALL_MIN_SCORE", None, "number", 0.4,
            "cosine score below which resume shows no related decision", low=-1.0, high=1.0, low_open=False),
    Setting("recall_horizon", "BATON_RECALL_HORIZON", None, "duration", "365d",
            "age after which a recalled decision ranks below current ones, marked `older than N days`"),
    Setting("project", PROJECT_VARIABLE, "", "text", None,
            "the project every record of this configuration belongs to (default: the worktree's repository; "
            "`--project`; `project` at the top of baton.toml)"),
    Setting("task_id", "BATON_TASK_ID", None, "text", None, "the ticket when no binding file applies"),
    Setting("session_id", "BATON_SESSION_ID", None, "text", None, "the session when no binding file applies"),
    Setting("database_url", "BATON_DATABASE_URL", "stores", "text", None, "PostgreSQL for the session registry"),
    Setting("graph_url", "BATON_GRAPH_URL", "stores", "text", None, "a Bolt server for the conflict graph"),
    Setting("qdrant_url", "BATON_QDRANT_URL", "stores", "text", None, "a Qdrant server for decision recall"),
    Setting("kafka_bootstrap", "BATON_KAFKA_BOOTSTRAP", "stores", "text", None,
            "Kafka for coordination signals and the event log"),
    Setting("kafka_topic_prefix", "BATON_KAFKA_TOPIC_PREFIX", "stores", "text", "baton.",
            "prefix of Baton's topic names"),
    Setting("kafka_partitions", "BATON_KAFKA_PARTITIONS", "stores", "count", 3,
            "partitions of the event log's topic when Baton creates it: the most `baton projector` processes "
            "that share its work (a topic made before keeps its count)", low=1, high=MAX_PARTITIONS, low_open=False),
    # Credentials: a `secret` is never printed (baton.masking masks it wherever it appears).
    Setting("graph_user", "BATON_GRAPH_USER", "stores", "text", None, "the Bolt server's user"),
    Setting("graph_password", "BATON_GRAPH_PASSWORD", "stores", "secret", None, "the Bolt server's password"),
    Setting("qdrant_api_key", "BATON_QDRANT_API_KEY", "stores", "secret", None, "the Qdrant server's API key"),
    Setting("kafka_security_protocol", "BATON_KAFKA_SECURITY_PROTOCOL", "stores", "choice", "PLAINTEXT",
            "how Baton talks to Kafka", choices=KAFKA_PROTOCOLS),
    Setting("kafka_sasl_mechanism", "BATON_KAFKA_SASL_MECHANISM", "stores", "choice", "SCRAM-SHA-512",
            "the SASL mechanism (with a SASL_ protocol)", choices=SASL_MECHANISMS),
    Setting("kafka_sasl_username", "BATON_KAFKA_SASL_USERNAME", "stores", "text", None, "Kafka's SASL user"),
    Setting("kafka_sasl_password", "BATON_KAFKA_SASL_PASSWORD", "stores", "secret", None, "Kafka's SASL password"),
    Setting("kafka_sasl_password_file", "BATON_KAFKA_SASL_PASSWORD_FILE", "stores", "secret_file", None,
            "a file holding Kafka's SASL password (its first line), when the password itself is not set"),
    Setting("qdrant_api_key_file", "BATON_QDRANT_API_KEY_FILE", "stores", "secret_file", None,
            "a file holding the Qdrant server's API key (its first line), when the key itself is not set"),
    Setting("qdrant_allow_insecure", "BATON_QDRANT_ALLOW_INSECURE", "stores", "switch", False,
            "send the Qdrant API key over plain http off loopback (refused otherwise)"),
    Setting("kafka_ssl_ca", "BATON_KAFKA_SSL_CA", "stores", "path", None,
            "the CA certificate (PEM) that Kafka's certificate is checked against (with an _SSL protocol)"),
    Setting("kafka_ssl_certificate", "BATON_KAFKA_SSL_CERTIFICATE", "stores", "path", None,
            "a client certificate (PEM), for a broker that asks for one"),
    Setting("kafka_ssl_key", "BATON_KAFKA_SSL_KEY", "stores", "path", None, "the client certificate's key (PEM)"),
    Setting("background_delivery", "BATON_BACKGROUND_DELIVERY", None, "switch", True,
            "with servers, a write starts a background `baton deliver`"),
    Setting("background_indexing", "BATON_BACKGROUND_INDEXING", None, "switch", True,
            "a write that records a decision starts a background `baton index`"),
    Setting("probe_timeout", "BATON_PROBE_TIMEOUT", "handoff", "seconds", PROBE_TIMEOUT,
            "seconds one handoff probe may run on re-verification", high=MAX_PROBE_SECONDS),
    Setting("probe_budget", "BATON_PROBE_BUDGET", "handoff", "seconds", PROBE_BUDGET,
            "seconds all probes of one re-verification may take together", high=MAX_PROBE_SECONDS),
    Setting("key_file", "BATON_HANDOFF_KEY_FILE", "handoff", "path", None,
            "a team's shared key for signing handoff probes (default `$BATON_HOME/handoff.key`)"),
    Setting("allow", None, "handoff", "commands", (), "unsigned probe commands that may run anyway"),
    Setting("hook_handoff", "BATON_HOOK_HANDOFF", "hooks", "choice", "never",
            "which agent hook writes a handoff", choices=HOOK_HANDOFF, toml_key="handoff"),
    Setting("on_exclusive", "BATON_ON_EXCLUSIVE", "conflicts", "choice", "ask",
            "what the check before an edit does with a file another ticket leases exclusively: `ask` the user "
            "(the permission prompt names the holder) or `deny` the edit (the agent is told why)",
            choices=ON_EXCLUSIVE),
    Setting("keep_ended_sessions", None, "retention", "duration", "90d",
            "how long an ended session and its events are kept after its last activity (`baton gc`)",
            toml_key="ended_sessions"),
    Setting("keep_signals", None, "retention", "duration", "30d", "how long a signal is kept (`baton gc`)",
            toml_key="signals"),
    Setting("gc_interval", "BATON_GC_INTERVAL", "retention", "seconds", 3600.0,
            "seconds between the retention runs (`baton gc`) of a running `baton projector`", high=MAX_GC_INTERVAL),
    Setting("repair_window", "BATON_REPAIR_WINDOW", "doctor", "duration", "24h",
            "how far back `baton doctor --repair` (and a starting `baton projector`) compares the stores with "
            "the registry: tickets active within it"),
    Setting("checkpoint_artifacts", None, "checkpoints", "globs", (),
            "globs of ignored files a checkpoint holds too (build outputs, say), each within the size cap",
            toml_key="artifacts"),
    Setting("checkpoint_max_file_bytes", None, "checkpoints", "count", 10 * 1024 * 1024,
            "bytes over which an untracked file or artifact is left out of a checkpoint (and said so)",
            low=0, high=MAX_CHECKPOINT_FILE_BYTES, low_open=False, toml_key="max_file_bytes"),
    Setting("checkpoint_push", "BATON_CHECKPOINT_PUSH", "checkpoints", "choice", "auto",
            "whether checkpoints travel through the repository's git remote: `auto` pushes the checkpoint of a "
            "handoff, `end` and `fork` (when there is a remote that has not refused one) and fetches one this clone "
            "lacks on demand; `off` keeps them in the clone that took them (`baton checkpoint --push` pushes anyway)",
            choices=CHECKPOINT_PUSH, toml_key="push"),
    Setting("checkpoint_remote", None, "checkpoints", "text", None,
            "the git remote checkpoints are pushed to and fetched from (default: origin, else the only remote)",
            toml_key="remote"),
    Setting("checkpoint_keep", None, "checkpoints", "count", 5,
            "checkpoints `baton gc --checkpoints` keeps per run besides those still needed", low=1, high=10_000,
            low_open=False, toml_key="keep_per_run"),
    Setting("environment_lockfiles", None, "environment", "globs", (),
            "globs of lockfiles hashed into the environment manifest besides the known ones",
            toml_key="lockfiles"),
    Setting("environment_services", None, "environment", "services", {},
            "services the work needs, each with the command probing it (`baton env record`)", toml_key="services"),
    Setting("redaction_allow", None, "redaction", "patterns", (),
            "regular expressions of text never redacted as a secret (false positives)", toml_key="allow"),
    # The [workflow] table, kept as the file gives it: the lifecycle is validated whole where
    # it is read (baton.skills.core.stages.parse_lifecycle), which this layer cannot import.
    Setting("stages", None, "workflow", "lifecycle", None, "a team's own workflow stages (see \"Workflow stages\")"),
    Setting("repair_stage", None, "workflow", "lifecycle", None, "the stage a repair goes back to"),
    Setting("repair_scopes", None, "workflow", "lifecycle", None, "each repair scope and the stages its repair skips"),
    Setting("max_repair_rounds", None, "workflow", "lifecycle", None, "repairs allowed before the next one blocks"),
    Setting("dashboard_token", "BATON_DASHBOARD_TOKEN", None, "text", None,
            "the token `baton serve` asks of every request; needed to listen off loopback"),
    Setting("resident", "BATON_RESIDENT", None, "switch", True,
            "commands are run by a resident process that keeps Baton loaded, started on demand"),
    Setting("resident_idle", "BATON_RESIDENT_IDLE", None, "seconds", 900.0,
            "seconds the resident process waits for a command before it exits", high=MAX_RECHECK_AFTER),
    Setting("mcp_answer_budget", "BATON_MCP_ANSWER_BUDGET", "mcp", "count", MCP_ANSWER_BUDGET,
            "characters an MCP tool's answer may take (a client cuts a longer one); filled in priority order",
            low=MIN_ANSWER_BUDGET, high=MAX_ANSWER_BUDGET, low_open=False, toml_key="answer_budget"),
)
_ROWS = {row.name: row for row in SETTINGS}
_SECRET_FIELDS = frozenset(row.name for row in SETTINGS if row.kind == "secret")


# The rows' values, typed for the checker; every default is its row's (from_env gives each
# field), and tests/test_settings.py checks each field against its row's kind.
class HandoffSettings(NamedTuple):
    """The `[handoff]` rows: how handoff probes are re-verified and signed."""

    probe_timeout: float
    probe_budget: float
    key_file: Path | None
    allow: tuple[tuple[str, ...], ...]


class Settings(NamedTuple):
    home: Path
    store_timeout: float
    command_budget: float | None  # as given (command_deadline: as used)
    recheck_after: float
    stale_after: timedelta
    lease_ttl: timedelta
    lease_grace: timedelta
    guard: str
    recall_min_score: float
    recall_horizon: timedelta
    project: str | None
    task_id: str | None
    session_id: str | None
    database_url: str | None
    graph_url: str | None
    qdrant_url: str | None
    kafka_bootstrap: str | None
    kafka_topic_prefix: str
    kafka_partitions: int
    graph_user: str | None
    graph_password: str | None
    qdrant_api_key: str | None  # or the first line of qdrant_api_key_file
    qdrant_allow_insecure: bool
    kafka_security_protocol: str
    kafka_sasl_mechanism: str
    kafka_sasl_username: str | None
    kafka_sasl_password: str | None  # or the first line of kafka_sasl_password_file
    kafka_ssl_ca: Path | None
    kafka_ssl_certificate: Path | None
    kafka_ssl_key: Path | None
    background_delivery: bool
    background_indexing: bool
    handoff: HandoffSettings  # the [handoff] rows
    hook_handoff: str
    on_exclusive: str
    keep_ended_sessions: timedelta
    keep_signals: timedelta
    gc_interval: float
    repair_window: timedelta
    checkpoint_artifacts: tuple[str, ...]
    checkpoint_max_file_bytes: int
    checkpoint_push: str
    checkpoint_remote: str | None
    checkpoint_keep: int
    environment_lockfiles: tuple[str, ...]
    environment_services: Mapping[str, tuple[str, ...]]
    redaction_allow: tuple[str, ...]
    workflow: Mapping[str, object] | None  # the [workflow] rows as given; None: the default lifecycle
    dashboard_token: str | None
    resident: bool
    resident_idle: float
    mcp_answer_budget: int

    def __repr__(self) -> str:
        """Every value but the secrets'."""
        shown = (f"{name}={value!r}" for name, value in self._asdict().items() if name not in _SECRET_FIELDS)
        return f"Settings({', '.join(shown)})"

    @property
    def uses_servers(self) -> bool:
        """Whether a store that writes go to lives on a server: then writes are kept for the
        background delivery (recall's Qdrant is written by the background indexer only)."""
        return bool(self.database_url or self.graph_url or self.kafka_bootstrap)

    @property
    def command_deadline(self) -> float:
        """Seconds all the waits of one command draw on (baton.deadline): BATON_COMMAND_BUDGET,
        else COMMAND_BUDGET or a cap set above it (the servers', the probes')."""
        if self.command_budget is not None:
            return self.command_budget
        return max(COMMAND_BUDGET, self.store_timeout, self.handoff.probe_budget)

    @property
    def graph_auth(self) -> tuple[str, str] | None:
        """The Bolt server's credentials, when set (else those in the URI's user information)."""
        if self.graph_user is None and self.graph_password is None:
            return None
        return self.graph_user or "neo4j", self.graph_password or ""

    def kafka_security(self) -> dict[str, str]:
        """librdkafka's settings for the security protocol, SASL and TLS given."""
        config = {"security.protocol": self.kafka_security_protocol}
        if self.kafka_security_protocol.startswith("SASL_"):
            config |= {"sasl.mechanism": self.kafka_sasl_mechanism, "sasl.username": self.kafka_sasl_username or "",
                       "sasl.password": self.kafka_sasl_password or ""}
        for key, path in (("ssl.ca.location", self.kafka_ssl_ca), ("ssl.certificate.location",
                          self.kafka_ssl_certificate), ("ssl.key.location", self.kafka_ssl_key)):
            if path is not None:
                config[key] = str(path)
        return config

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values of the `secret` rows that are set (load_settings has them masked)."""
        return tuple(value for row in SETTINGS if row.kind == "secret" if (value := getattr(self, row.name)))

    @property
    def ambient(self) -> tuple[str | None, str | None]:
        """(BATON_TASK_ID, BATON_SESSION_ID): the ticket when no binding file applies."""
        return self.task_id, self.session_id

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every row of SETTINGS from environ (default: the process environment) and the
        configuration file; a bad value is BadInput naming the setting. Nothing else changes:
        load_settings is what makes the secrets known to the masking."""
        environ = os.environ if environ is None else environ
        home = data_home(_given(environ, _ROWS["home"]), environ.get("XDG_DATA_HOME") or None)
        refusal = home_refusal(home)  # before anything in it is read: another user may have planted it
        if refusal is not None:
            raise Untrusted(refusal)
        config_name = _given(environ, _ROWS["config"])
        config_path = Path(config_name).expanduser() if config_name else home / "baton.toml"
        config = _config_file(config_path, explicit=bool(config_name), home=home)
        # Each row's kind gives its value's type, which the table cannot tell the checker.
        values: dict[str, Any] = {row.name: _value(row, environ, config, config_path) for row in SETTINGS
                                  if row.name not in ("home", "config")}
        if values["project"] is not None:
            from baton.projects import check_project

            check_project(values["project"])
        # A secret given in a file stands in for the secret itself, which wins when both are set.
        for secret, secret_file in (("kafka_sasl_password", "kafka_sasl_password_file"),
                                    ("qdrant_api_key", "qdrant_api_key_file")):
            from_file = values.pop(secret_file)
            values[secret] = values[secret] or from_file
        handoff = HandoffSettings(**{row.name: values.pop(row.name) for row in SETTINGS if row.table == "handoff"})
        workflow = {row.key: value for row in SETTINGS if row.table == "workflow"
                    if (value := values.pop(row.name)) is not None}
        return cls(home=home, handoff=handoff, workflow=workflow or None, **values)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings a command runs with: Settings.from_env, its secrets then masked in
    everything Baton prints from now on in this process (baton.masking)."""
    from baton.masking import known_secret

    settings = Settings.from_env(environ)
    for secret in settings.secrets:
        known_secret(secret)
    return settings


def use_project(project: str) -> None:
    """Make `project` this process's setting, for whatever reads the settings later in it
    or in what it spawns (`--project`, which wins over the environment and the file)."""
    os.environ[PROJECT_VARIABLE] = project


def ambient_ticket(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(BATON_TASK_ID, BATON_SESSION_ID), read through the same rows without the file: a
    hook asks for them before anything else, so outside a bound worktree (and with neither
    set) nothing else is read and nothing can fail."""
    environ = os.environ if environ is None else environ
    return _given(environ, _ROWS["task_id"]), _given(environ, _ROWS["session_id"])


def _given(environ: Mapping[str, str], row: Setting) -> str | None:
    return (environ.get(row.env) or None) if row.env else None


def _config_file(path: Path, *, explicit: bool, home: Path) -> dict:
    try:
        text = read_private(path, root_too=True).decode()
    except FileNotFoundError:
        if explicit:
            raise BadInput(f"BATON_CONFIG names a missing file: {path}") from None
        return {}
    except OSError as exc:
        if not explicit and unusable(home):
            # Not a bad setting: the stores, which live there too, each say why (exit 3).
            return {}
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
    import tomllib  # for a file that exists only: with its regular expressions it costs a hook 2.5 ms

    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"cannot read {path}: {exc}") from None
    top = {row.key for row in SETTINGS if row.table == ""}
    tables = {row.table for row in SETTINGS if row.table}
    stray = {key for key, value in config.items() if not isinstance(value, dict) and key not in top}
    if stray:
        raise BadInput(f"{path}: unknown key: {', '.join(sorted(stray))}")
    for table in sorted(tables):
        known = {row.key for row in SETTINGS if row.table == table}
        unknown = set(config.get(table, {})) - known
        if unknown:
            raise BadInput(f"{path}: unknown key in [{table}]: {', '.join(sorted(unknown))}")
    return config


def _value(row: Setting, environ: Mapping[str, str], config: dict, path: Path) -> object:
    """The row's value: the environment's, else the file's, else the default."""
    raw: object = _given(environ, row)
    where = row.env
    section = config if row.table == "" else config.get(row.table, {}) if row.table else {}
    if raw is None and row.key in section and (row.table or not isinstance(section[row.key], dict)):
        raw, where = section[row.key], f"{path.name}: " + (f"[{row.table}] {row.key}" if row.table else row.key)
    if raw is None:
        raw, where = row.default, row.where
        if raw is None:
            return None
    return _PARSERS[row.kind](row, raw, where or row.where)


def _text(row: Setting, raw: object, where: str) -> str | None:
    if not isinstance(raw, str):
        raise BadInput(f"{where} must be a string")
    return raw or row.default  # type: ignore[return-value]  # a text row's default is text or None


def _choice(row: Setting, raw: object, where: str) -> str | None:
    if raw not in row.choices:
        raise BadInput(f"{row.env} or [{row.table}] {row.key} must be one of {', '.join(row.choices)}, got {raw!r}")
    return _text(row, raw, where)


def _path(row: Setting, raw: object, where: str) -> Path | None:
    given = _text(row, raw, where)
    return Path(given).expanduser() if given else None


def _secret(row: Setting, raw: object, where: str) -> str | None:
    from baton.masking import MIN_KNOWN

    secret = _text(row, raw, where)
    if secret and len(secret) < MIN_KNOWN:
        raise BadInput(f"{where} is shorter than {MIN_KNOWN} characters: too short to be a secret")
    return secret


def _secret_in_file(row: Setting, raw: object, where: str) -> str | None:
    """The secret on the first line of the file given (a trailing newline is not part of it)."""
    given = _text(row, raw, where)
    if not given:
        return None
    path = Path(given).expanduser()
    try:
        with path.open(encoding="utf-8") as handle:
            line = handle.readline(4096).strip()
    except OSError as exc:
        raise BadInput(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{where}: {path} is not UTF-8 text") from None
    if not line:
        raise BadInput(f"{where}: {path} is empty")
    return _secret(row, line, where)


def _duration(row: Setting, raw: object, where: str) -> timedelta:
    try:
        return parse_duration(str(raw))
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


def _number(row: Setting, raw: object, where: str) -> float:
    """A finite number within the row's range."""
    if isinstance(raw, bool):
        raise BadInput(f"{where} must be a number, got {raw!r}")
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BadInput(f"{where} must be a number, got {raw!r}") from None
    low = 0.0 if row.low is None else row.low
    high = float("inf") if row.high is None else row.high
    # NaN fails every comparison, so the test is written to let only numbers in range pass.
    if not (low <= value <= high) or (row.low_open and value == low):
        raise BadInput(f"{where} is out of range ({low:g} to {high:g}): {raw!r}")
    return value


def _count(row: Setting, raw: object, where: str) -> int:
    """A whole number within the row's range (the environment gives it as digits)."""
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise BadInput(f"{where} must be a whole number, got {raw!r}")
    _number(row, raw, where)
    return raw


def _globs(row: Setting, raw: object, where: str) -> tuple[str, ...]:
    """Glob patterns relative to the worktree: git pathspecs, so `**` crosses directories."""
    if not isinstance(raw, (list, tuple)) or not all(isinstance(entry, str) for entry in raw):
        raise BadInput(f"{where} must be a list of glob patterns (strings)")
    if len(raw) > MAX_GLOBS:
        raise BadInput(f"{where}: at most {MAX_GLOBS} patterns, got {len(raw)}")
    for entry in raw:
        parts = entry.split("/")
        if not entry.strip() or "\0" in entry or entry.startswith("/") or ".." in parts or len(entry) > 1000:
            raise BadInput(f"{where}: {entry[:100]!r} is not a pattern inside the worktree "
                           "(relative, without `..`, at most 1000 characters)")
    return tuple(raw)


def _services(row: Setting, raw: object, where: str) -> dict[str, tuple[str, ...]]:
    """{name: probe command}: a table of strings, each a command run without a shell."""
    from baton.skills.runtime.command_words import parse_command

    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise BadInput(f"{where} must be a table of service = \"probe command\"")
    if len(raw) > MAX_GLOBS:
        raise BadInput(f"{where}: at most {MAX_GLOBS} services, got {len(raw)}")
    try:
        return {str(name): tuple(parse_command(command)) for name, command in raw.items()}
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


def _switch(row: Setting, raw: object, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no"):
        return False
    raise BadInput(f"{where} must be on or off, got {raw!r}")


def _patterns(row: Setting, raw: object, where: str) -> tuple[str, ...]:
    import re

    if not isinstance(raw, (list, tuple)) or not all(isinstance(entry, str) for entry in raw):
        raise BadInput(f"{where} must be a list of regular expressions (strings)")
    for entry in raw:
        try:
            re.compile(entry)
        except re.error as exc:
            raise BadInput(f"{where}: {entry!r} is not a regular expression: {exc}") from None
    return tuple(raw)


def _commands(row: Setting, raw: object, where: str) -> tuple[tuple[str, ...], ...]:
    from baton.skills.runtime.command_words import parse_command

    if not isinstance(raw, (list, tuple)) or not all(isinstance(entry, str) for entry in raw):
        raise BadInput(f"{where} must be a list of commands (strings)")
    try:
        return tuple(tuple(parse_command(entry)) for entry in raw)
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


# How each kind of row reads its value (the [workflow] rows are kept as given).
_PARSERS: dict[str, Callable[[Setting, object, str], object]] = {
    "text": _text, "choice": _choice, "path": _path, "secret": _secret, "secret_file": _secret_in_file,
    "seconds": _number, "number": _number, "count": _count, "duration": _duration, "switch": _switch,
    "commands": _commands, "patterns": _patterns, "globs": _globs, "services": _services,
    "lifecycle": lambda row, raw, where: raw,
}
