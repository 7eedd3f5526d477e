"""Python code blocks in a text (a model's answer): :func:`python_code_blocks`.

What counts as a Python block, in order of appearance:

* a fenced block (```` ``` ```` or ``~~~``, three or more, as in CommonMark: the closing fence
  uses the same character and is at least as long; an unclosed fence runs to the end of the
  text), not blank, whose language (the first word of the info string, any case) is one of
  :data:`PYTHON_LANGUAGES` (``python``, ``py``, ``python3``, ``py3``); blocks tagged with any
  other language (``bash``, ``json``, ``pycon``, ``text``...) are never Python;
* with ``untagged=True`` (default), a fenced block without a language when its content parses
  as Python *and* looks like code (:func:`looks_like_code`: not only bare names, numbers or
  other plain expressions, which are usually program output or shell commands such as
  ``ls -la``, which happens to parse);
* with ``bare=True`` (default False), when the text has no fenced block at all, the whole text,
  if it parses as Python and looks like code (an answer that is just code).

Fences may be indented (inside list items); that indentation is removed from the block's
lines. Each block keeps the line of the text its code starts on (``start_line``, 1-based), so
errors can be located in the answer.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

#: Info-string languages taken as Python (lower case).
PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "py3"})

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")


@dataclass(frozen=True)
class CodeBlock:
    """One block: its ``code``, ``language`` (lower case; ``None`` for an untagged fence or bare
    text), ``start_line`` (1-based line of the text where the code starts) and ``fenced``."""

    code: str
    language: str | None
    start_line: int
    fenced: bool = True


def parses(code: str) -> bool:
    """True when ``code`` is valid Python for this interpreter (``ast.parse``)."""
    return parse_error(code) is None


def parse_error(code: str) -> SyntaxError | ValueError | RecursionError | MemoryError | None:
    """The error ``ast.parse(code)`` raises (a ``SyntaxError`` with ``lineno``/``msg``; a
    ``ValueError`` for null bytes; ``RecursionError``/``MemoryError`` for absurd nesting), or
    ``None`` when it parses. Warnings (invalid escape sequences...) are silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return exc
    return None


def looks_like_code(code: str) -> bool:
    """True when ``code`` parses and has at least one statement that is not a plain expression
    (an assignment, ``import``, ``def``, ``for``...) or is a call (``print(x)``, ``main()``).
    Output like ``42``, ``[1, 2, 3]`` or ``True`` and shell lines like ``ls -la`` are not code."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            return True
        value = statement.value
        if isinstance(value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)):
            return True
    return False


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, removable) :]


def fenced_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of ``text`` (any language), in order."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"].expandtabs(4))
        info = match["info"].strip()
        language = info.split()[0].lower().strip("{}.") if info else None
        closing = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            body.append(_dedent(lines[j], indent))
            j += 1
        code = "\n".join(body)
        if body:
            code += "\n"
        blocks.append(CodeBlock(code=code, language=language or None, start_line=i + 2))
        i = j + 1
    return blocks


def python_code_blocks(text: str | None, *, untagged: bool = True, bare: bool = False) -> list[CodeBlock]:
    """The Python code blocks of ``text``, in order (see the module docstring for the rules)."""
    if not text or not text.strip():
        return []
    blocks = fenced_blocks(text)
    found = []
    for block in blocks:
        if not block.code.strip():
            continue
        if block.language in PYTHON_LANGUAGES:
            found.append(block)
        elif block.language is None and untagged and looks_like_code(block.code):
            found.append(block)
    if not blocks and bare and looks_like_code(text):
        normalized = text.replace("\r\n", "\n").replace("\r", "\n")
        found.append(CodeBlock(code=normalized, language=None, start_line=1, fenced=False))
    return found


def python_code(text: str | None, *, untagged: bool = True, bare: bool = False) -> list[str]:
    """The code of :func:`python_code_blocks`."""
    return [block.code for block in python_code_blocks(text, untagged=untagged, bare=bare)]


__all__ = [
    "PYTHON_LANGUAGES",
    "CodeBlock",
    "fenced_blocks",
    "looks_like_code",
    "parse_error",
    "parses",
    "python_code",
    "python_code_blocks",
]
