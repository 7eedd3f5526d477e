"""MkDocs hook (see ``hooks:`` in mkdocs.yml): tidy what docstrings written for Sphinx look like.

The package's docstrings use reStructuredText roles (``:func:`name```) and ``::`` before
literal blocks; mkdocstrings renders Markdown, so ``:func:`` would show up as text. This strips
the role prefix before inline code and the doubled colon ending a paragraph, in the rendered
HTML of the API reference pages only. It changes no docstring.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|data|mod|attr|exc|obj|const):(?=<code>)")
_LITERAL_COLONS = re.compile(r"(?<=[^:\s])::</p>")


def on_page_content(html: str, page, config, files) -> str:  # noqa: ANN001 - MkDocs hook signature
    if not page.file.src_uri.startswith("reference/"):
        return html
    html = _ROLE.sub("", html)
    return _LITERAL_COLONS.sub(":</p>", html)
