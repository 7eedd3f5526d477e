"""Who may use the UI, and the headers every answer carries.

Contract (the receiver's token rules, made to work in a browser):

* With a token, every ``api/`` request needs it: as ``Authorization: Bearer TOKEN`` (scripts),
  or as the cookie :meth:`UiAuth.cookie_name` that opening the printed link
  ``.../ui/?token=TOKEN`` sets (HttpOnly, SameSite=Strict, path ``/ui``; named after a hash of
  the token, so several UIs on one host do not overwrite each other's). The link answers 303 to
  the page without the token in its address. Static files (no data) need no token.
* Without a token (``--no-token``, loopback only) every request is allowed.
* A POST must say ``Content-Type: application/json`` and ``X-Agent-RL-UI: 1`` and, when it has
  an ``Origin``, come from the page's own origin: a page of another site can neither read the
  answers (no CORS headers) nor forge writes (the custom header needs a CORS preflight that is
  never answered, and the cookie is SameSite=Strict). Host names are checked before, by
  :class:`~agent_rl_plugin.receiver.guard.HostPolicy` (DNS rebinding).
* :data:`SECURITY_HEADERS` go on every answer: a Content-Security-Policy that allows only the
  page's own scripts, styles and API (no inline script, no other origin, no framing), no
  sniffing, no referrer (the token never leaves in a Referer header).
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from http.cookies import CookieError, SimpleCookie

from agent_rl_plugin.receiver.mounts import Request

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: list[tuple[str, str]] = [
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
]
WRITE_HEADER = "X-Agent-RL-UI"


class UiAuth:
    """The token checks of the module contract. ``token``: ``None`` or ``""`` for none."""

    def __init__(self, token: str | None, prefix: str = "/ui") -> None:
        self.token = token or None
        self.prefix = prefix

    @property
    def cookie_name(self) -> str:
        digest = hashlib.sha256((self.token or "").encode()).hexdigest()[:12]
        return f"agent_rl_ui_{digest}"

    def _matches(self, given: str | None) -> bool:
        return self.token is not None and given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def login_cookie(self, request: Request) -> str | None:
        """The ``Set-Cookie`` value when ``request`` carries the right ``?token=``, else ``None``."""
        if not self._matches(request.query.get("token")):
            return None
        return f"{self.cookie_name}={self.token}; Path={self.prefix}; HttpOnly; SameSite=Strict"

    def has_token_param(self, request: Request) -> bool:
        return "token" in request.query

    def authorized(self, request: Request) -> bool:
        """Whether ``request`` may read and write (see the module contract)."""
        if not self.token:
            return True
        scheme, _, value = (request.header("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and self._matches(value.strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(request.header("Cookie") or "")
        except CookieError:
            return False
        morsel = cookie.get(self.cookie_name)
        return morsel is not None and self._matches(morsel.value)

    def write_refusal(self, request: Request) -> str | None:
        """Why a POST is refused as a possible cross-site forgery, or ``None``."""
        content_type = (request.header("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return "POST bodies must be JSON (Content-Type: application/json)"
        if (request.header(WRITE_HEADER) or "").strip() != "1":
            return f"POST requests need the header {WRITE_HEADER}: 1"
        origin = request.header("Origin")
        if origin is not None and origin != "null":
            host = request.header("Host") or ""
            if urllib.parse.urlsplit(origin).netloc.lower() != host.lower():
                return f"requests from another origin ({origin!r}) are refused"
        elif origin == "null":
            return "requests from an opaque origin are refused"
        return None
