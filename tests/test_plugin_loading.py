"""Loading plugins: unknown hooks are reported, not fatal; built-ins carry no command line; the
``agent_rl_configure`` start-up hook."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import hookimpl, plugins, tracing

MISSPELLED_PLUGIN = """
    from agent_rl_plugin import hookimpl

    @hookimpl
    def agent_rl_register_exportrs(register, config):
        register("never", None)

    @hookimpl
    def agent_rl_register_normalizers(register):
        register("misspelled_neighbour", lambda attributes, span_name: None)
"""

OPTIONAL_PLUGIN = """
    from agent_rl_plugin.hookspecs import hookimpl

    @hookimpl(optionalhook=True)
    def agent_rl_hook_of_a_later_version(config):
        pass
"""


def install(site: Path, dist: str, module: str, body: str) -> None:
    """An installed-looking distribution in ``site`` whose entry point is ``module``."""
    (site / f"{module}.py").write_text(textwrap.dedent(body))
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[agent_rl_plugin]\n{dist} = {module}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[name]
    plugins.load_errors.clear()
    plugins.distributions.clear()


def test_a_misspelled_hook_is_reported_and_its_plugin_skipped(site, caplog):
    install(site, "fake-misspelled", "fake_misspelled_plugin", MISSPELLED_PLUGIN)
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.plugins"):
        pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("fake-misspelled") is None
    error = plugins.load_errors["fake-misspelled"]
    assert "unknown hook 'agent_rl_register_exportrs'" in error
    assert "'fake-misspelled'" in caplog.text and "agent_rl_register_exportrs" in caplog.text
    pm.check_pending()  # what is left passes pluggy's own check
    registered = []
    pm.hook.agent_rl_register_normalizers(register=lambda name, fn: registered.append(name))
    assert "misspelled_neighbour" not in registered


def test_the_agent_keeps_running_beside_a_misspelled_plugin(site, tmp_path):
    install(site, "fake-misspelled", "fake_misspelled_plugin", MISSPELLED_PLUGIN)
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=True))
    try:
        arl.configure(db=str(tmp_path / "t.duckdb"))

        @arl.trace_agent
        def agent(x: int) -> int:
            return x + 1

        assert agent(1) == 2
        assert arl.flush()
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(None)


def test_agent_rl_plugins_shows_the_unknown_hook(site, capsys):
    install(site, "fake-misspelled", "fake_misspelled_plugin", MISSPELLED_PLUGIN)
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=True))
    try:
        from agent_rl_plugin.cli.main import main

        with pytest.raises(SystemExit) as exit_info:
            main(["plugins", "--json"])
        assert exit_info.value.code == 0
    finally:
        plugins.set_plugin_manager(None)
    listing = json.loads(capsys.readouterr().out)
    assert "agent_rl_register_exportrs" in listing["load_errors"]["fake-misspelled"]
    assert "fake-misspelled" not in {p["name"] for p in listing["plugins"]}


def test_an_optional_hook_is_not_an_error(site):
    install(site, "fake-optional", "fake_optional_plugin", OPTIONAL_PLUGIN)
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("fake-optional") is not None
    assert plugins.load_errors == {}


def test_builtins_and_command_groups_pass_check_pending():
    from agent_rl_plugin.cli.main import COMMAND_PLUGINS

    pm = plugins.new_plugin_manager(load_entry_points=False)
    plugins.register_modules(pm, COMMAND_PLUGINS)
    pm.check_pending()
    assert plugins.load_errors == {}
    assert set(COMMAND_PLUGINS) <= {name for name, _ in pm.list_name_plugin()}


def test_builtins_import_no_command_line():
    assert [m for m in plugins.DEFAULT_PLUGINS.values() if m.startswith("agent_rl_plugin.cli")] == []


def test_the_command_line_lists_its_command_groups_as_builtins(capsys):
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        from agent_rl_plugin.cli.main import main

        with pytest.raises(SystemExit):
            main(["plugins", "--json"])
    finally:
        plugins.set_plugin_manager(None)
    by_name = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert by_name["cli_query"]["builtin"] is True
    assert by_name["cli_query"]["hooks"] == ["agent_rl_register_commands"]


class StartUp:
    """Counts ``agent_rl_configure`` calls and the configs it got."""

    def __init__(self) -> None:
        self.configs: list[arl.RLConfig] = []

    @hookimpl
    def agent_rl_configure(self, config):  # noqa: ANN001 - hook signature
        self.configs.append(config)


class BrokenStartUp:
    @hookimpl
    def agent_rl_configure(self, config):  # noqa: ANN001 - hook signature
        raise RuntimeError("broken start-up hook")


def test_agent_rl_configure_runs_once_per_configure_that_sets_up_recording(plugin_manager):
    start_up = StartUp()
    plugin_manager.register(start_up)
    first = arl.configure(db_path=None, service_name="one")
    assert start_up.configs == [first]
    arl.configure(db_path=None, service_name="one")  # the same settings: nothing to set up
    assert len(start_up.configs) == 1
    second = arl.configure(db_path=None, service_name="two")
    assert start_up.configs == [first, second]
    arl.configure(db_path=None, enable_rl=False)  # recording off: no start-up
    assert len(start_up.configs) == 2


def test_a_failing_agent_rl_configure_is_logged_and_the_others_still_run(plugin_manager, caplog):
    start_up = StartUp()
    plugin_manager.register(start_up)
    plugin_manager.register(BrokenStartUp(), name="broken-start-up")
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.tracing"):
        config = arl.configure(db_path=None, service_name="despite")
    assert start_up.configs == [config]
    assert "broken-start-up" in caplog.text and "broken start-up hook" in caplog.text
