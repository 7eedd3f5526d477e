"""The plugin manager: built-ins and entry-point plugins are loaded the same way."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from agent_rl_plugin import plugins


def make_distribution(site: Path, dist: str, module: str, body: str, version: str = "1.2.3") -> None:
    """Write an installed-looking distribution (dist-info + module) into ``site``."""
    (site / f"{module}.py").write_text(textwrap.dedent(body))
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[agent_rl_plugin]\n{dist} = {module}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path that importlib.metadata scans for distributions."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[name]
    plugins.load_errors.clear()
    plugins.distributions.clear()


GOOD_PLUGIN = """
    from agent_rl_plugin import hookimpl

    @hookimpl
    def agent_rl_register_normalizers(register):
        register("fake", lambda attributes, span_name: None)
"""


def test_builtins_are_registered_like_plugins():
    pm = plugins.new_plugin_manager(load_entry_points=False)
    names = {name for name, _ in pm.list_name_plugin()}
    assert set(plugins.DEFAULT_PLUGINS) <= names
    # the DuckDB store is itself an exporter plugin
    assert pm.get_plugin("duckdb_store") in [impl.plugin for impl in pm.hook.agent_rl_register_exporters.get_hookimpls()]


def test_entry_point_plugin_is_discovered_with_its_version(site):
    make_distribution(site, "fake-normalizer", "fake_normalizer_plugin", GOOD_PLUGIN)
    pm = plugins.new_plugin_manager(load_entry_points=True)
    plugin = pm.get_plugin("fake-normalizer")
    assert plugin is not None
    assert plugins.plugin_version(pm, plugin) == "1.2.3"
    registered = []
    pm.hook.agent_rl_register_normalizers(register=lambda name, fn: registered.append(name))
    assert "fake" in registered


def test_autoload_can_be_disabled(site, monkeypatch):
    make_distribution(site, "fake-normalizer", "fake_normalizer_plugin", GOOD_PLUGIN)
    monkeypatch.setenv(plugins.DISABLE_AUTOLOAD_ENV, "1")
    pm = plugins.new_plugin_manager()
    assert pm.get_plugin("fake-normalizer") is None


def test_allow_list_loads_only_named_plugins(site, monkeypatch):
    make_distribution(site, "fake-one", "fake_one_plugin", GOOD_PLUGIN)
    make_distribution(site, "fake-two", "fake_two_plugin", GOOD_PLUGIN)
    monkeypatch.setenv(plugins.ALLOW_LIST_ENV, "fake-two")
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("fake-one") is None
    assert pm.get_plugin("fake-two") is not None


def test_broken_plugin_is_reported_not_fatal(site, caplog):
    make_distribution(site, "fake-broken", "fake_broken_plugin", "raise RuntimeError('boom at import')\n")
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("fake-broken") is None
    assert "boom at import" in plugins.load_errors["fake-broken"]
    assert "could not be loaded" in caplog.text


def test_plugins_command_lists_entry_point_plugins(site, monkeypatch, capsys):
    make_distribution(site, "fake-normalizer", "fake_normalizer_plugin", GOOD_PLUGIN)
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=True))
    try:
        from agent_rl_plugin.cli.main import main

        with pytest.raises(SystemExit) as exit_info:
            main(["plugins", "--json"])
        assert exit_info.value.code == 0
    finally:
        plugins.set_plugin_manager(None)
    import json

    listing = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in listing["plugins"]}
    assert by_name["fake-normalizer"]["version"] == "1.2.3"
    assert by_name["fake-normalizer"]["distribution"] == "fake-normalizer"
    assert by_name["fake-normalizer"]["hooks"] == ["agent_rl_register_normalizers"]
    assert by_name["duckdb_store"]["builtin"] is True
