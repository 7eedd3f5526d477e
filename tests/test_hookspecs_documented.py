"""Every hook spec is documented: in its docstring and in docs/plugins.md."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from agent_rl_plugin import hookspecs

SPECS = sorted(
    name for name, fn in vars(hookspecs).items() if name.startswith("agent_rl_") and inspect.isfunction(fn)
)
PLUGINS_DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_there_are_hook_specs():
    assert "agent_rl_register_exporters" in SPECS
    assert len(SPECS) >= 6


@pytest.mark.parametrize("name", SPECS)
def test_hook_has_docstring(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.split()) >= 12, f"hook {name} needs a docstring saying when it is called and what it gets"


@pytest.mark.parametrize("name", SPECS)
def test_hook_is_in_plugins_doc(name):
    assert f"`{name}" in PLUGINS_DOC.read_text(), f"docs/plugins.md must document hook {name}"
