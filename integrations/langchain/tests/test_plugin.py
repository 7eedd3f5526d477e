"""The entry point loads without LangChain; the package imports LangChain only when its handler
is used."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points, version

import agent_rl_langchain
from agent_rl_plugin import plugins


def test_entry_point_registered_and_loads_without_langchain():
    (ep,) = [e for e in entry_points(group="agent_rl_plugin") if e.name == "langchain"]
    assert ep.value == "agent_rl_langchain.plugin"
    code = ("import sys; from importlib.metadata import entry_points; "
            "[e.load() for e in entry_points(group='agent_rl_plugin') if e.name == 'langchain']; "
            "import agent_rl_langchain; "
            "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # loading the plugin never imports the framework
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("langchain") is not None
    assert "langchain" not in plugins.load_errors


def test_tested_versions_are_the_installed_ones():
    assert version("langchain-core") == agent_rl_langchain.LANGCHAIN_CORE_VERSION_TESTED
    assert version("langgraph") == agent_rl_langchain.LANGGRAPH_VERSION_TESTED
