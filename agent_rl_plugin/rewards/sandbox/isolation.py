"""How sandboxed code is isolated: a :class:`_Runtime` names the interpreter, the ``unshare``
namespaces and the uid/gid that one run uses. :mod:`.runtime` chooses it (by probing);
:mod:`.process` runs code with it. A plain value: it starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class _Runtime:
    """The interpreter and namespaces that worked in the probe (see the module doc)."""

    python: str
    unshare: str | None
    namespaces: tuple[str, ...]  # of "user", "net", "pid", "mount"
    uid: int | None
    gid: int | None

    def command(self, isolate_network: bool) -> list[str]:
        """The ``unshare ... --`` prefix for one run; empty when no namespace applies."""
        if self.unshare is None:
            return []
        flags: list[str] = []
        if "net" in self.namespaces and isolate_network:
            flags.append("--net")
        if "pid" in self.namespaces:
            flags += ["--pid", "--fork", "--kill-child", "--mount-proc"]
        if not flags:
            return []
        if "user" in self.namespaces:
            flags = ["--user", "--map-root-user", *flags]
        return [self.unshare, *flags, "--"]

    def describe(self, isolate_network: bool) -> dict:
        """What :func:`~.runtime.sandbox_info` reports for a run with ``isolate_network``."""
        used = set(self.namespaces) if self.command(isolate_network) else set()
        if not isolate_network:
            used.discard("net")
        return {
            "python": self.python,
            "namespaces": sorted(used - {"user"}),
            "user_namespace": "user" in used,
            "uid": self.uid,
            "gid": self.gid,
        }
