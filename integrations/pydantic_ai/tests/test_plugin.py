"""The entry point, when and how instrumentation is switched on, and whose choice wins."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

import agent_rl_plugin as arl
import agent_rl_pydantic_ai as arp
from agent_rl_plugin import plugins
from agent_rl_pydantic_ai import instrumentation


def test_entry_point_registered_and_loads_without_pydantic_ai():
    (ep,) = [e for e in entry_points(group="agent_rl_plugin") if e.name == "pydantic_ai"]
    assert ep.value == "agent_rl_pydantic_ai.plugin"
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("pydantic_ai") is not None
    assert "pydantic_ai" not in plugins.load_errors
    names = []
    pm.hook.agent_rl_register_normalizers(register=lambda name, fn: names.append(name))
    assert "pydantic_ai" in names


def _python(code: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "AGENT_RL_PLUGINS": "pydantic_ai"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120)


def test_configure_before_import_switches_on_after_import(tmp_path):
    """In a fresh process: the plugin and configure() import nothing of pydantic-ai; importing it
    afterwards switches its instrumentation on, and a run lands in the views."""
    db = tmp_path / "late.duckdb"
    done = _python(f"""
        import sys
        import agent_rl_plugin as arl
        arl.configure(db_path={str(db)!r}, export_delay_ms=50)
        assert "pydantic_ai" not in sys.modules, "configure() imported pydantic_ai"
        assert "agent_rl_pydantic_ai" in sys.modules  # the entry point was loaded
        from pydantic_ai import Agent
        from pydantic_ai.models.test import TestModel
        import agent_rl_pydantic_ai as arp
        assert Agent._instrument_default is arp.installed() is not None
        assert not any(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path)  # one shot
        import importlib.resources, pydantic_ai
        assert type(pydantic_ai.__loader__).__name__ != "_Loader"  # the real loader is put back
        print(Agent(TestModel(), name="late").run_sync("hi").output)
        arl.flush()
        from agent_rl_plugin.store.connection import open_reader
        print(open_reader({str(db)!r}).execute("select agent_name, n_llm_calls from rollouts").fetchall())
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["success (no tool calls)", "[('late', 1)]"]


def test_env_switch_off(tmp_path):
    done = _python(f"""
        import os
        os.environ["AGENT_RL_PYDANTIC_AI_INSTRUMENT"] = "0"
        import agent_rl_plugin as arl
        from pydantic_ai import Agent
        arl.configure(db_path={str(tmp_path / 'off.duckdb')!r})
        print(Agent._instrument_default)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_users_own_instrument_all_wins(db_path):
    mine = InstrumentationSettings(include_content=False)
    Agent.instrument_all(mine)
    arl.configure(db_path=str(db_path))
    assert Agent._instrument_default is mine and instrumentation.installed() is None


def test_switched_off_by_the_user_after_configure_stays_off(db_path, tmp_path):
    arl.configure(db_path=str(db_path))
    assert Agent._instrument_default is instrumentation.installed()
    Agent.instrument_all(False)
    arl.configure(db_path=str(tmp_path / "other.duckdb"))  # new settings: hook runs again
    assert Agent._instrument_default is False


def test_reconfigure_replaces_our_settings(db_path):
    arl.configure(db_path=str(db_path))
    first = instrumentation.installed()
    assert first.include_content is True and first.include_binary_content is False and first.version == 6
    arl.configure(db_path=str(db_path), capture_content=False)
    assert Agent._instrument_default is instrumentation.installed() is not first
    assert instrumentation.installed().include_content is False


def test_agent_with_instrument_off_is_not_recorded(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    quiet = Agent(TestModel(), name="quiet")
    quiet.instrument = False  # an agent's own setting wins over the class-wide default
    quiet.run_sync("hi")
    Agent(TestModel(), name="loud").run_sync("hi")
    assert [r["agent_name"] for r in store.rows("select agent_name from rollouts")] == ["loud"]


def test_enable_and_disable_by_hand(db_path, store):
    Agent.instrument_all(False)
    settings = arp.enable()
    assert Agent._instrument_default is settings
    arp.disable()
    assert Agent._instrument_default is False and arp.installed() is None


def test_disabled_recording_leaves_pydantic_ai_alone(db_path):
    arl.configure(db_path=str(db_path), enable_rl=False)
    assert Agent._instrument_default is False
