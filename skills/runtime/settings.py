"""Settings read once from the environment and `baton.toml`, validated, frozen.

The environment wins over the file. The file is BATON_CONFIG, else `baton.toml` in the
data home; its `[stores]` table names server backends, e.g. `database_url = "postgresql://..."`.
A store without a server setting stays embedded, so every mix works.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from baton.clock import parse_duration
from baton.errors import BadInput
from baton.home import data_home, unusable
from baton.skills.runtime.handoff_settings import HandoffSettings


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    store_timeout: float
    stale_after: timedelta
    recall_min_score: float
    database_url: str | None = None
    graph_url: str | None = None
    qdrant_url: str | None = None
    kafka_bootstrap: str | None = None
    kafka_topic_prefix: str = "baton."
    background_delivery: bool = True
    background_indexing: bool = True
    handoff: HandoffSettings = HandoffSettings()
    hook_handoff: str = "never"  # which agent hook writes a handoff: never, stop or session-end
    recheck_after: float = 30.0  # seconds a server found down is skipped without connecting (baton.health)
    dashboard_token: str | None = None  # what `baton serve` asks of every request (needed off loopback)

    @property
    def uses_servers(self) -> bool:
        """Whether a store that writes go to lives on a server: then writes are kept for the
        background delivery (recall's Qdrant is written by the background indexer only)."""
        return bool(self.database_url or self.graph_url or self.kafka_bootstrap)

    @classmethod
    def from_env(cls) -> Settings:
        home = data_home()
        config = _config_file(home)
        stores = config.get("stores", {})
        return cls(
            home=home,
            database_url=os.environ.get("BATON_DATABASE_URL") or _text(stores, "database_url"),
            graph_url=os.environ.get("BATON_GRAPH_URL") or _text(stores, "graph_url"),
            qdrant_url=os.environ.get("BATON_QDRANT_URL") or _text(stores, "qdrant_url"),
            kafka_bootstrap=os.environ.get("BATON_KAFKA_BOOTSTRAP") or _text(stores, "kafka_bootstrap"),
            kafka_topic_prefix=os.environ.get("BATON_KAFKA_TOPIC_PREFIX") or _text(stores, "kafka_topic_prefix") or "baton.",
            store_timeout=_number("BATON_STORE_TIMEOUT", 2.0, maximum=MAX_STORE_TIMEOUT),
            recheck_after=_number("BATON_RECHECK_AFTER", 30.0, maximum=MAX_RECHECK_AFTER),
            stale_after=_duration("BATON_STALE_AFTER", "24h"),
            recall_min_score=_number("BATON_RECALL_MIN_SCORE", 0.3, minimum=-1.0, maximum=1.0),
            background_delivery=_switch("BATON_BACKGROUND_DELIVERY", True),
            background_indexing=_switch("BATON_BACKGROUND_INDEXING", True),
            handoff=HandoffSettings.from_config(config.get("handoff", {}), "baton.toml"),
            hook_handoff=_hook_handoff(config.get("hooks", {})),
            dashboard_token=os.environ.get("BATON_DASHBOARD_TOKEN") or None,
        )


# Kafka's clients accept socket timeouts up to 300 s; a store that needs longer is down.
MAX_STORE_TIMEOUT = 300.0
MAX_RECHECK_AFTER = 86400.0  # a day: a server down longer is asked again at least daily
_KNOWN_STORE_KEYS = {"database_url", "graph_url", "qdrant_url", "kafka_bootstrap", "kafka_topic_prefix"}


def _config_file(home: Path) -> dict:
    import tomllib

    path = Path(os.environ["BATON_CONFIG"]).expanduser() if os.environ.get("BATON_CONFIG") else home / "baton.toml"
    try:
        with path.open("rb") as handle:
            config = tomllib.load(handle)
    except FileNotFoundError:
        if os.environ.get("BATON_CONFIG"):
            raise BadInput(f"BATON_CONFIG names a missing file: {path}") from None
        return {}
    except OSError as exc:
        if not os.environ.get("BATON_CONFIG") and unusable(home):
            # Not a bad setting: the stores, which live there too, each say why (exit 3).
            return {}
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"cannot read {path}: {exc}") from None
    unknown = set(config.get("stores", {})) - _KNOWN_STORE_KEYS
    if unknown:
        raise BadInput(f"{path}: unknown key in [stores]: {', '.join(sorted(unknown))}")
    return config


HOOK_HANDOFF = ("never", "stop", "session-end")


def _hook_handoff(table: dict) -> str:
    """BATON_HOOK_HANDOFF, else `[hooks] handoff` of baton.toml: when an agent's hooks write a handoff."""
    unknown = set(table) - {"handoff"}
    if unknown:
        raise BadInput(f"baton.toml: unknown key in [hooks]: {', '.join(sorted(unknown))}")
    value = os.environ.get("BATON_HOOK_HANDOFF") or table.get("handoff", "never")
    if value not in HOOK_HANDOFF:
        raise BadInput(f"BATON_HOOK_HANDOFF or [hooks] handoff must be one of {', '.join(HOOK_HANDOFF)}, got {value!r}")
    return value


def _text(table: dict, key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"baton.toml: [stores] {key} must be a string")
    return value or None


def _number(name: str, default: float, *, minimum: float = 0.0, maximum: float) -> float:
    """A finite number within [minimum, maximum]; a minimum of 0 excludes 0 itself."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name} must be a number, got {raw!r}") from None
    # NaN fails every comparison, so the test is written to let only numbers in range pass.
    if not (minimum <= value <= maximum) or (minimum == 0.0 and value == 0.0):
        raise BadInput(f"{name} is out of range ({minimum:g} to {maximum:g}): {raw!r}")
    return value


def _switch(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "on", "yes"):
        return True
    if raw in ("0", "false", "off", "no"):
        return False
    raise BadInput(f"{name} must be on or off, got {raw!r}")


def _duration(name: str, default: str) -> timedelta:
    try:
        return parse_duration(os.environ.get(name) or default)
    except ValueError as exc:
        raise BadInput(f"{name}: {exc}") from None
