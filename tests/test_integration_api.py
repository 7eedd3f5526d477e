"""The framework integrations use only the public API (``agent_rl_plugin.integration`` and
friends), and that API does what its docstrings say."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agent_rl_plugin
from agent_rl_plugin import integration as rl
from agent_rl_plugin import semconv

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "integrations").glob("*/src/**/*.py"))

#: The modules an integration may import from agent-rl-plugin. ``rewards`` and
#: ``rewards.builtin`` are the documented reward API (a reward class is not part of recording,
#: so ``integration``, a layer below the rewards, cannot re-export it). ``envs`` is the documented
#: environment protocol an environment integration implements (docs/environments.md).
PUBLIC_MODULES = {
    "agent_rl_plugin.envs",
    "agent_rl_plugin",
    "agent_rl_plugin.integration",
    "agent_rl_plugin.hookspecs",
    "agent_rl_plugin.config",
    "agent_rl_plugin.rewards",
    "agent_rl_plugin.rewards.builtin",
}


def private_uses(source: str) -> list[str]:
    """Each import or attribute of agent-rl-plugin in ``source`` that is not public, described
    as ``line: what``."""
    tree = ast.parse(source)
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name -> the module of ours it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "agent_rl_plugin":
                    continue
                if alias.name not in PUBLIC_MODULES:
                    found.append(f"{node.lineno}: import {alias.name}")
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases["agent_rl_plugin"] = "agent_rl_plugin"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agent_rl_plugin":
            module = node.module or ""
            if node.level or module not in PUBLIC_MODULES:
                found.append(f"{node.lineno}: from {module} import ...")
                continue
            for alias in node.names:
                name, submodule = alias.name, f"{module}.{alias.name}"
                if submodule in PUBLIC_MODULES:
                    aliases[alias.asname or name] = submodule
                elif name.startswith("_") or name == "STATE" or (
                    module == "agent_rl_plugin" and name not in agent_rl_plugin.__all__
                ):
                    found.append(f"{node.lineno}: from {module} import {name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in aliases):
            continue
        module = aliases[root.id] if node.value is root else None
        if node.attr.startswith("_") or node.attr == "STATE" or (
            module == "agent_rl_plugin"
            and node.attr not in agent_rl_plugin.__all__
            and f"{module}.{node.attr}" not in PUBLIC_MODULES
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_integrations_are_found():
    assert {p.relative_to(ROOT / "integrations").parts[0] for p in SOURCES} >= {
        "langchain", "massgen", "openai_agents", "pydantic_ai", "smolagents",
    }


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "integrations")))
def test_integrations_use_only_the_public_api(path):
    assert private_uses(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "from agent_rl_plugin import tracing",
        "from agent_rl_plugin.instrumentation.calls import is_suppressed",
        "from agent_rl_plugin.integration import _private",
        "from agent_rl_plugin import _version",
        "import agent_rl_plugin.tracing",
        "from agent_rl_plugin import integration as rl\nrl._hidden()",
        "import agent_rl_plugin as arl\narl.tracing.STATE",
        "import agent_rl_plugin as arl\narl._EXPORTS",
    ],
)
def test_the_check_catches_private_uses(source):
    assert private_uses(source) != []


def test_the_check_allows_the_public_api():
    source = (
        "import agent_rl_plugin as arl\n"
        "from agent_rl_plugin import configure, integration as rl\n"
        "from agent_rl_plugin.integration import semconv as sc, is_recording\n"
        "from agent_rl_plugin.hookspecs import hookimpl\n"
        "rl.start_span('x', rl.TOOL)\narl.flush()\n"
    )
    assert private_uses(source) == []


def test_every_public_name_exists():
    assert [name for name in rl.__all__ if not hasattr(rl, name)] == []


def test_is_recording_follows_configuration_and_suppression(span_exporter):
    assert rl.is_recording()
    token = rl.suppress()
    try:
        assert not rl.is_recording()
    finally:
        rl.unsuppress(token)
    assert rl.is_recording()
    rl.configure(db_path=None, enable_rl=False)
    assert not rl.is_recording()


def test_active_config_never_configures(plugin_manager):
    assert rl.active_config() is None
    config = rl.configure(db_path=None, service_name="integration")
    assert rl.active_config() is config


def test_spans_of_a_kind_carry_the_current_rollout(span_exporter):
    info = rl.RolloutInfo(name="framework run", implicit=True)
    token = rl.set_current_rollout(info)
    try:
        span = rl.start_span("execute_tool search", rl.TOOL, {semconv.GEN_AI_TOOL_NAME: "search"})
    finally:
        rl.reset_current_rollout(token)
    assert rl.current_rollout() is None
    rl.end_span(span)
    rl.flush()
    (finished,) = span_exporter.get_finished_spans()
    assert finished.attributes[semconv.SPAN_KIND] == semconv.SPAN_KIND_TOOL
    assert finished.attributes[semconv.GEN_AI_TOOL_NAME] == "search"
    assert finished.attributes[semconv.ROLLOUT_ID] == info.rollout_id


def test_a_kind_in_the_attributes_wins(span_exporter):
    rl.end_span(rl.start_span("step", rl.AGENT, {semconv.SPAN_KIND: "chain"}))
    rl.flush()
    (finished,) = span_exporter.get_finished_spans()
    assert finished.attributes[semconv.SPAN_KIND] == "chain"
