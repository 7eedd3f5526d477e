"""The SQL console's cookbook: the queries of ``docs/cookbook.md``, shipped with the package.

``docs/cookbook.md`` is the one definition: each query there follows a
``<!-- query: NAME -->`` marker, under a ``## Section`` heading, after the paragraph that says
what it answers. ``python -m agent_rl_plugin.ui.cookbook`` writes them to ``cookbook.json``
next to this module (a test checks that it is current); :func:`load` reads that file.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

PACKAGED = Path(__file__).with_name("cookbook.json")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cookbook.md"
_MARKER = re.compile(r"<!-- query: (?P<name>[a-z0-9_]+)(?: needs-data)? -->\n```sql\n(?P<sql>.*?)```", re.S)


def _first_sentence(paragraph: str) -> str:
    text = " ".join(paragraph.split()).replace("`", "")
    match = re.match(r"(.+?[.:!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(":")


def parse(markdown: str) -> list[dict[str, str]]:
    """``[{"name", "section", "title", "sql"}]`` of every marked query of ``markdown``, in order."""
    queries = []
    for match in _MARKER.finditer(markdown):
        before = markdown[: match.start()]
        headings = re.findall(r"^## (.+)$", before, re.M)
        paragraphs = [p for p in re.split(r"\n\s*\n", before.strip()) if p.strip() and not p.lstrip().startswith("#")]
        title = _first_sentence(paragraphs[-1]) if paragraphs else match["name"].replace("_", " ")
        queries.append(
            {
                "name": match["name"],
                "section": headings[-1].strip() if headings else "",
                "title": title,
                "sql": match["sql"].strip(),
            }
        )
    return queries


@lru_cache(maxsize=1)
def load() -> list[dict[str, Any]]:
    """The packaged cookbook (``[]`` when the file is missing)."""
    try:
        return json.loads(PACKAGED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def render(markdown: str) -> str:
    """The text of ``cookbook.json`` for ``markdown``."""
    return json.dumps(parse(markdown), indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    PACKAGED.write_text(render(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PACKAGED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
