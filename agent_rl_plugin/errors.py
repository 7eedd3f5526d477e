"""The error family: every error the package raises on purpose is an :class:`AgentRLError`.

Contract:

* ``str(error)`` is the message: what happened, in words that make sense from Python and from
  the command line (no CLI flag names here; the CLI adds its own when it prints the error).
* ``error.hint`` is the fix, or ``None`` when the message already says it.
* Subclasses keep the built-in base they had (``ValueError``, ``TimeoutError``,
  ``PermissionError``...), so ``except ValueError`` code written against earlier releases
  still catches them; ``except AgentRLError`` catches them all.
"""

from __future__ import annotations

__all__ = ["AgentRLError"]


class AgentRLError(Exception):
    """An error the user can act on: ``str(error)`` says what happened, ``hint`` how to fix it."""

    hint: str | None = None

    def __init__(self, message: str = "", hint: str | None = None, *args: object) -> None:
        super().__init__(message, *args)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        # A subclass that skipped this __init__ (Exception.__init__ called directly) has no
        # message attribute: fall back to the exception's own text.
        message = getattr(self, "message", None)
        return super().__str__() if message is None else str(message)

    def describe(self) -> str:
        """The message and, when there is one, the fix: ``"<message> Fix: <hint>."``."""
        if not self.hint:
            return str(self)
        return f"{self}. Fix: {self.hint.rstrip('.')}."
