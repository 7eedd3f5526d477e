"""Who may use the UI, and the headers every answer carries.

Contract (the receiver's token rules, made to work in a browser):

* With a token, every ``api/`` request needs it: as ``Authorization: Bearer TOKEN`` (scripts),
  or as the cookie :meth:`UiAuth.cookie_name` that opening the printed link
  ``.../ui/?token=TOKEN`` sets (HttpOnly, SameSite=Strict, path ``/ui``; named after a hash of
  the token, so several UIs on one host do not overwrite each other's; its value is an HMAC of
  the token, never the token). The link answers 303 to the page without the token in its
  address. A cookie counts only on requests the page itself makes or navigations
  (``Sec-Fetch-Site`` absent, ``same-origin`` or ``none``): SameSite does not separate the ports
  of one host. Static files (no data) need no token.
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
COOKIE_PURPOSE = b"agent-rl-ui-cookie"


class UiAuth:
    """The token checks of the module contract. ``token``: ``None`` or ``""`` for none."""

    def __init__(self, token: str | None, prefix: str = "/ui") -> None:
        self.token = token or None
        self.prefix = prefix

    @property
    def cookie_name(self) -> str:
        digest = hashlib.sha256((self.token or "").encode()).hexdigest()[:12]
        return f"agent_rl_ui_{digest}"

    @property
    def cookie_value(self) -> str:
        """What the cookie holds: derived from the token, not the token (under ``agent-rl serve``
        the token is also the receiver's bearer token, and cookies are not kept apart by port)."""
        return hmac.new((self.token or "").encode(), COOKIE_PURPOSE, hashlib.sha256).hexdigest()

    def _matches(self, given: str | None, expected: str | None) -> bool:
        return expected is not None and given is not None and hmac.compare_digest(given.encode(), expected.encode())

    def login_cookie(self, request: Request) -> str | None:
        """The ``Set-Cookie`` value when ``request`` carries the right ``?token=``, else ``None``."""
        if not self._matches(request.query.get("token"), self.token):
            return None
        return f"{self.cookie_name}={self.cookie_value}; Path={self.prefix}; HttpOnly; SameSite=Strict"

    def has_token_param(self, request: Request) -> bool:
        return "token" in request.query

    def _cookie(self, header: str) -> str | None:
        """This UI's cookie from a ``Cookie`` header, parsed by hand: other sites' cookies with
        values the standard parser rejects (spaces, JSON) must not hide it."""
        found = None
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if sep and name.strip() == self.cookie_name:
                found = value.strip().strip('"')
        return found

    def authorized(self, request: Request) -> bool:
        """Whether ``request`` may read and write (see the module contract)."""
        if not self.token:
            return True
        scheme, _, value = (request.header("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and self._matches(value.strip(), self.token):
            return True
        # A cookie rides along with requests other pages make (an <img> of another port is
        # "same-site"): honour it only for the page's own requests and for navigations.
        fetch_site = (request.header("Sec-Fetch-Site") or "").strip().lower()
        if fetch_site not in ("", "same-origin", "none"):
            return False
        return self._matches(self._cookie(request.header("Cookie") or ""), self.cookie_value)

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
