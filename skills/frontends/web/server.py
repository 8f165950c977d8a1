"""`baton serve`: the dashboard on loopback by default; beyond loopback only with a token."""

from __future__ import annotations

import ipaddress

from baton.errors import BadInput
from baton.skills.runtime.settings import Settings

MIN_TOKEN = 16  # characters: a shorter token is guessed too easily by anyone who can reach the port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def serve(settings: Settings, *, host: str, port: int, token: str | None, open_browser: bool) -> None:
    """Serve until interrupted. The token is --token, else BATON_DASHBOARD_TOKEN."""
    import importlib.util

    missing = [name for name in ("starlette", "sse_starlette", "uvicorn", "jinja2")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise BadInput(f"the dashboard needs {', '.join(missing)}: pip install 'baton-sessions[dashboard]'")
    if not 0 < port < 65536:
        raise BadInput(f"--port must be between 1 and 65535, got {port}")
    token = token or settings.dashboard_token
    loopback = is_loopback(host)
    if not loopback and not token:
        raise BadInput(f"listening on {host} needs a token: --token TOKEN or BATON_DASHBOARD_TOKEN")
    if token is not None and len(token) < MIN_TOKEN:
        raise BadInput(f"the dashboard's token must have at least {MIN_TOKEN} characters")
    from baton.masking import known_secret

    known_secret(token)  # masked in whatever Baton shows, as a server's password is
    import uvicorn

    from baton.skills.frontends.web.app import create_app

    app = create_app(settings, token=token, loopback=loopback)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    print(f"Baton dashboard on {url}" + (" (token required)" if token else ""), flush=True)
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=1)
