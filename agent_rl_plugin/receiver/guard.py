"""What the receiver refuses before reading a body: forged browser requests and bad lengths.

Contract:

* :class:`HostPolicy` decides whether a ``Host`` header and an ``Origin`` header may reach the
  receiver. Allowed hosts: loopback names and addresses (``localhost``, ``127.0.0.0/8``,
  ``::1``), the address it is bound to, and names given in ``allowed_hosts``; when bound to a
  wildcard address (``0.0.0.0``, ``::``; only allowed with a token) any Host is accepted, since
  the token is then the gate. A missing Host (HTTP/1.0 clients) is accepted. ``Origin``, when
  present, must name an allowed host (``null`` and other sites are refused), and a
  ``Sec-Fetch-Site: cross-site`` request is refused: browsers send these, scripted clients do not.
  This stops DNS rebinding and cross-site form posts even when no token is set.
* :func:`content_length` parses ``Content-Length``: only plain decimal digits count; a missing,
  negative, signed or non-numeric value is ``None`` (the server answers 411 or 400).
* :func:`is_media_type` compares the media type of a ``Content-Type`` header (parameters such
  as ``charset`` ignored) with an exact set; a missing header never matches.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Iterable, Mapping

from agent_rl_plugin.receiver.client import is_loopback

if TYPE_CHECKING:
    from email.message import Message

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
_DIGITS = re.compile(r"[0-9]{1,18}")


def content_length(value: str | None) -> int | None:
    """The length in ``value`` when it is plain decimal digits, else ``None``."""
    if value is None:
        return None
    text = value.strip()
    return int(text) if _DIGITS.fullmatch(text) else None


def is_media_type(header: str | None, allowed: Iterable[str]) -> bool:
    """True when the media type of ``header`` is one of ``allowed`` (case-insensitive)."""
    if not header:
        return False
    return header.split(";", 1)[0].strip().lower() in {kind.lower() for kind in allowed}


def _host_part(value: str) -> str:
    """``example.com`` from ``example.com:4318``, ``::1`` from ``[::1]:4318``."""
    text = value.strip().lower()
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text


class HostPolicy:
    """Which Host and Origin headers a receiver bound to ``bind_host`` answers (see the module
    contract)."""

    def __init__(self, bind_host: str, allowed_hosts: Iterable[str] = ()) -> None:
        self.wildcard = bind_host.strip() in WILDCARD_HOSTS
        self.names = {_host_part(name) for name in allowed_hosts if name}
        if not self.wildcard:
            self.names.add(_host_part(bind_host) if not bind_host.startswith("[") else bind_host.strip("[]").lower())
            self.names.add(bind_host.strip("[]").lower())

    def host_allowed(self, host: str) -> bool:
        """True when the name ``host`` (no port) may be addressed."""
        return self.wildcard or is_loopback(host) or host.lower() in self.names

    def refusal(self, headers: Mapping[str, str] | Message) -> str | None:
        """Why a request with these headers is refused (403), or ``None`` when it may proceed."""
        host = headers.get("Host")
        if host is not None and not self.host_allowed(_host_part(host)):
            return (
                f"Host {host!r} is not this receiver's address (DNS rebinding?); "
                "serve with --allow-host NAME to accept it"
            )
        origin = headers.get("Origin")
        if origin is not None:
            try:
                name = urllib.parse.urlsplit(origin.strip()).hostname
            except ValueError:
                name = None
            if not name or not (is_loopback(name) or name.lower() in self.names):
                return f"requests from web pages of origin {origin!r} are refused"
        if (headers.get("Sec-Fetch-Site") or "").strip().lower() == "cross-site":
            return "cross-site requests from web pages are refused"
        return None
