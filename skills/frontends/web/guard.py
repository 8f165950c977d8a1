"""Who may read the dashboard, and how: an ASGI layer in front of every route.

- Read-only: only GET and HEAD reach the app; any other method gets 405, on every path.
  The one exception is `POST /login` when a token is set: it checks a token typed into a
  form and answers with a cookie. It writes nothing anywhere.
- With a token (needed off loopback), every request, the live feed included, shows it in
  an `Authorization: Bearer TOKEN` header or in the HttpOnly cookie that the login gives;
  any other gets 401 (a page gets the login form). The token never travels in a URL, so
  no access log, history or Referer holds it; the cookie holds an HMAC of the token, not
  the token.
- On loopback, a Host header naming another host is refused (400): a web page elsewhere
  cannot reach the dashboard through a DNS name rebound to 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import hmac
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "baton_dashboard"
MAX_LOGIN_BODY = 4096
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
SECURITY_HEADERS = [
    (b"content-security-policy", (b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                  b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"baton dashboard session", hashlib.sha256).hexdigest()


class LoginPage(Protocol):
    def __call__(self, *, failed: bool) -> bytes:
        """The HTML of the login form; failed: after a wrong token."""


class AccessGuard:
    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool, login_page: LoginPage) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback
        self.login_page = login_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if self.loopback and _host_name(headers.get("host", "")) not in LOOPBACK_HOSTS:
            await _respond(send, 400, b"Bad Host header: this dashboard answers on loopback only")
            return
        method, path = scope["method"], scope["path"]
        if method == "POST" and path == "/login" and self.token:
            await self._login(receive, send, self.token)
            return
        if method not in ("GET", "HEAD"):
            await _respond(send, 405, b"Method Not Allowed: the dashboard is read-only", [(b"allow", b"GET, HEAD")])
            return
        if self.token and not self._admitted(headers, self.token):
            if "text/html" in headers.get("accept", "") and path != "/events":
                await _respond(send, 401, self.login_page(failed=False), kind=b"text/html")
            else:
                await _respond(send, 401, b"Unauthorized: this dashboard needs its token",
                             [(b"www-authenticate", b'Bearer realm="baton"')])
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, secured)

    def _admitted(self, headers: dict[str, str], token: str) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 -- a malformed Cookie header admits nobody
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), cookie_value(token).encode())

    async def _login(self, receive: Receive, send: Send, token: str) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_LOGIN_BODY:
                await _respond(send, 413, b"Request body too large")
                return
            if not message.get("more_body"):
                break
        given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), token.encode()):
            await _respond(send, 401, self.login_page(failed=True), kind=b"text/html")
            return
        cookie = f"{COOKIE}={cookie_value(token)}; HttpOnly; SameSite=Strict; Path=/"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode()), (b"content-length", b"0"),
                                *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _respond(send: Send, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = (), *,
                   kind: bytes = b"text/plain") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind + b"; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS, *extra]})
    await send({"type": "http.response.body", "body": body})
