"""Capture health (``check_traces``, ``agent-rl doctor``, the report's section) on real stores.

A *defects* store is recorded with the public API, each defect planted a known number of times:

====  ========  ==========  =====================================================  ======
 id   group     agent       what it holds                                          reward
====  ========  ==========  =====================================================  ======
 r1   g-ok      planner     a clean LLM call (with token ids)                      yes
 r2   g-ok      planner     a clean LLM call                                       yes
 r3   g-solo    coder       a tool call only                                       no
 r4   g-pair    (none)      a tool call only                                       yes
 r5   g-pair    planner     an LLM call without input; one cut at the size limit   yes
 r6   g-pair    planner     coder: an LLM call without output; a failed call       no
 r7   g-pair    planner     an LLM call without output; one under a lost parent    no
 r8   g-crash   coder       raised after a tool call (failed: only failed_rollouts) no
====  ========  ==========  =====================================================  ======

plus a rollout left open in another thread (its root never ends) and an event recorded outside
any rollout. A *clean* store (two rollouts of one group, messages and rewards) has no error and
no warning. A *tokens* store holds stored token ids right, wrong, re-tokenised differently and
with a wrong prompt, checked against a tiny tokenizer built locally.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from opentelemetry import trace

import agent_rl_plugin as arl
from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.data.health import CHECKS, check_traces
from agent_rl_plugin.data.report import DatasetError

ROOT = Path(__file__).resolve().parents[1]


def _recording(path: Path, **config):
    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    tracing.configure(db_path=str(path), export_delay_ms=50, **config)
    return previous


def _done(previous) -> None:
    assert arl.flush()
    tracing.shutdown()
    plugins.set_plugin_manager(previous)


@arl.trace_agent(name="planner")
def planner(action) -> None:
    action()


@arl.trace_agent(name="coder")
def coder(action) -> None:
    action()


def _chat(output="4", **kwargs):
    return arl.record_llm_call("m", [{"role": "user", "content": "2+2?"}], output, **kwargs)


def _open_rollout() -> None:
    """A rollout whose root span never ends (a fresh thread: its context dies with it)."""
    arl.rollout(task_id="open", group_id="g-open", rollout_id="open-rollout").__enter__()
    _chat()


def _lost_parent() -> None:
    """An LLM call whose parent span never ends (so is never stored)."""
    parent = tracing.get_tracer().start_span("lost parent")
    with trace.use_span(parent, end_on_exit=False):
        _chat(output="orphan")


def make_defects(path: Path) -> Path:
    previous = _recording(path, max_attribute_size=256)
    try:
        for rid in ("r1", "r2"):
            with arl.rollout(task_id="t-ok", group_id="g-ok", rollout_id=rid):
                planner(lambda rid=rid: _chat(token_ids=[5, 6]) if rid == "r1" else _chat())
                arl.emit_reward(1.0)
        with arl.rollout(task_id="t-solo", group_id="g-solo", rollout_id="r3"):
            coder(lambda: arl.record_tool_call("lookup", arguments={"q": 1}, result=2))
        with arl.rollout(task_id="t-pair", group_id="g-pair", rollout_id="r4"):
            arl.record_tool_call("lookup", arguments={"q": 1}, result=2)
            arl.emit_reward(0.0)
        with arl.rollout(task_id="t-pair", group_id="g-pair", rollout_id="r5"):
            planner(lambda: arl.record_llm_call("m", None, "an answer"))
            planner(lambda: arl.record_llm_call("m", [{"role": "user", "content": "x" * 1000}], "ok"))
            arl.emit_reward(0.5)
        with arl.rollout(task_id="t-pair", group_id="g-pair", rollout_id="r6"):
            planner(lambda: None)  # the rollout's agent is planner; its LLM calls are the coder's
            coder(lambda: _chat(output=None))
            coder(lambda: _chat(output=None, error="RuntimeError: rate limited"))
        with arl.rollout(task_id="t-pair", group_id="g-pair", rollout_id="r7"):
            planner(lambda: _chat(output=None))
            _lost_parent()
        with pytest.raises(RuntimeError), arl.rollout(task_id="t-crash", group_id="g-crash", rollout_id="r8"):
            coder(lambda: arl.record_tool_call("lookup", arguments={"q": 1}, result=2))
            raise RuntimeError("the agent crashed")
        thread = threading.Thread(target=_open_rollout)
        thread.start()
        thread.join()
        arl.record_event("note", content="outside any rollout")
    finally:
        _done(previous)
    return path


def make_clean(path: Path) -> Path:
    previous = _recording(path)
    try:
        for i in range(2):
            with arl.rollout(task_id="t", group_id="g", rollout_id=f"c{i}"):
                planner(lambda: _chat())
                arl.emit_reward(float(i))
    finally:
        _done(previous)
    return path


@pytest.fixture(scope="module")
def defects(tmp_path_factory) -> Path:
    return make_defects(tmp_path_factory.mktemp("doctor") / "defects.duckdb")


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return make_clean(tmp_path_factory.mktemp("doctor") / "clean.duckdb")


@pytest.fixture(scope="module")
def report(defects):
    return check_traces(str(defects))


def _counts(report) -> dict[str, tuple[int, int]]:
    return {f.code: (f.count, f.total) for f in report.overall()}


# -- the checks ---------------------------------------------------------------------------------


def test_every_planted_defect_is_found_with_its_count(report):
    assert report.rollouts == 8 and report.llm_calls == 8
    assert _counts(report) == {
        "no_llm_calls": (2, 8),
        "no_reward": (3, 8),
        "failed_rollouts": (1, 8),
        "llm_no_input": (1, 8),
        "llm_no_output": (2, 8),
        "llm_truncated": (1, 8),
        "singleton_groups": (2, 4),
        "open_rollouts": (1, 9),  # 8 finished, 1 open
        "orphan_spans": (1, report.spans),
        "no_rollout_id": (1, report.spans),
        "no_token_ids": (7, 8),
    }
    assert report.exit_code == 1 and not report.healthy
    assert [f.severity for f in report.errors] == ["error"] * 5


def test_findings_name_examples_and_fixes(report):
    assert report.get("no_llm_calls").examples == ["r3", "r4"]
    assert report.get("no_reward").examples == ["r3", "r6", "r7"]
    assert report.get("singleton_groups").examples == ["g-crash", "g-solo"]
    assert report.get("failed_rollouts").examples == ["r8"]
    assert report.get("open_rollouts").examples == ["open-rollout"]
    assert report.get("no_reward").fix.startswith(f"score them: agent-rl score --db {report.database}")
    for finding in report.findings:
        assert finding.fix and "\n" not in finding.fix and "\n" not in finding.message
        assert len(finding.examples) <= 3


def test_findings_per_agent(report):
    assert {a: f.count for a, f in report.by_agent("no_reward").items()} == {"coder": 1, "planner": 2}
    assert {a: f.count for a, f in report.by_agent("no_llm_calls").items()} == {"coder": 1}  # r4 has no agent
    assert {a: f.count for a, f in report.by_agent("llm_no_output").items()} == {"coder": 1, "planner": 1}
    assert {a: (f.count, f.total) for a, f in report.by_agent("llm_no_input").items()} == {"planner": (1, 6)}
    # the orphan LLM call's parent is lost: its agent is its rollout's (planner)
    assert report.by_agent("no_token_ids")["planner"].count == 5


def test_a_clean_store_has_no_error_or_warning(clean):
    report = check_traces(str(clean))
    assert report.healthy and report.exit_code == 0
    assert {f.severity for f in report.findings} == {"info"}  # no token ids recorded: info only
    assert report.rollouts == 2 and report.llm_calls == 2


def test_where_limits_the_checks(defects):
    report = check_traces(str(defects), where="group_id = 'g-pair'")
    assert report.rollouts == 4
    assert _counts(report)["no_reward"] == (2, 4)
    assert "open_rollouts" not in _counts(report) and "open_rollouts" in report.skipped
    with pytest.raises(DatasetError, match="only reads"):
        check_traces(str(defects), where="true); drop table spans; select (1")
    with pytest.raises(DatasetError, match="no rollouts match"):
        check_traces(str(defects), where="task_id = 'nothing'")


def test_an_empty_store(tmp_path):
    from agent_rl_plugin.store import ensure_schema

    path = tmp_path / "empty.duckdb"
    ensure_schema(path)
    report = check_traces(str(path))
    assert [f.code for f in report.findings] == ["no_rollouts"] and report.exit_code == 1


# -- tokenizer checks -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from agent_rl_plugin.train.tiny import build_tokenizer

    folder = tmp_path_factory.mktemp("tokens")
    tokenizer = build_tokenizer(folder / "tok")
    text = "The total is 15.00."
    canonical = tokenizer.encode(text, add_special_tokens=False)
    per_char = [i for ch in text for i in tokenizer.encode(ch, add_special_tokens=False)]
    assert per_char != canonical and tokenizer.decode(per_char) == text
    messages = [{"role": "user", "content": "How much do 3 notebooks cost?"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer.encode(rendered, add_special_tokens=False)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    path = folder / "tokens.duckdb"
    previous = _recording(path)
    try:
        with arl.rollout(task_id="t", group_id="g", rollout_id="tok"):
            calls = {
                "right": dict(token_ids=canonical, prompt_token_ids=prompt),
                "right+end": dict(token_ids=[*canonical, end]),
                "wrong": dict(token_ids=tokenizer.encode("apples coffee", add_special_tokens=False)),
                "per-char": dict(token_ids=per_char),
                "bad-prompt": dict(prompt_token_ids=prompt[:-2]),
            }
            for name, ids in calls.items():
                arl.record_llm_call("m", messages, text, request_id=name, **ids)
    finally:
        _done(previous)
    return path, folder / "tok", tokenizer


def test_token_ids_against_a_tokenizer(tokens):
    path, tokenizer_path, tokenizer = tokens
    for given in (str(tokenizer_path), tokenizer):
        report = check_traces(str(path), tokenizer=given)
        assert report.token_checks == 5
        counts = _counts(report)
        assert counts["token_ids_mismatch"] == (1, 4)
        assert counts["retokenization_differs"] == (1, 4)
        assert counts["prompt_ids_mismatch"] == (1, 2)
        assert report.get("token_ids_mismatch").severity == "error"
    without = check_traces(str(path))
    assert "token_ids_mismatch" in without.skipped and "token_ids_mismatch" not in _counts(without)
    assert check_traces(str(path), tokenizer=tokenizer, max_token_checks=2).token_checks == 2
    with pytest.raises(DatasetError, match="cannot load a tokenizer"):
        check_traces(str(path), tokenizer=str(path.parent / "nothing-here"))


# -- the command line -------------------------------------------------------------------------------


def test_cli_json_and_exit_codes(defects, clean, tmp_path):
    from score_support import agent_rl

    result = agent_rl("doctor", "--db", str(defects), "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["exit_code"] == 1 and data["rollouts"] == 8
    assert {f["code"] for f in data["findings"] if f["agent"] is None} >= {"no_llm_calls", "open_rollouts"}
    result = agent_rl("doctor", "--db", str(clean), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["healthy"] is True
    result = agent_rl("doctor", "--db", str(defects), "--where", "true); drop table spans; select (1")
    assert result.exit_code == 2 and "only reads" in result.stderr and "Traceback" not in result.output
    result = agent_rl("doctor", "--db", str(tmp_path / "missing.duckdb"))
    assert result.exit_code == 2 and "error:" in result.stderr
    assert check_traces(str(defects)).rollouts == 8  # nothing was changed


def test_cli_table_fits_80_columns(defects, clean, monkeypatch):
    from score_support import agent_rl

    monkeypatch.setenv("COLUMNS", "80")
    result = agent_rl("doctor", "--db", str(defects))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    for code in ("no_llm_calls", "no_reward", "open_rollouts", "orphan_spans", "no_rollout_id"):
        assert code in result.stdout
    assert "fix:" in result.stdout and "coder 1, planner 2" in result.stdout
    result = agent_rl("doctor", "--db", str(clean))
    assert result.exit_code == 0 and "0 errors, 0 warnings" in result.stdout


def test_cli_tokenizer(tokens):
    from score_support import agent_rl

    path, tokenizer_path, _ = tokens
    result = agent_rl("doctor", "--db", str(path), "--tokenizer", str(tokenizer_path), "--json")
    assert result.exit_code == 1
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert {"token_ids_mismatch", "retokenization_differs", "prompt_ids_mismatch"} <= codes


# -- report and docs -------------------------------------------------------------------------------


def test_the_report_shows_capture_health(defects, tmp_path):
    pytest.importorskip("matplotlib")
    from agent_rl_plugin.report import build_report

    summary = build_report(str(defects), tmp_path / "r.html", worst=0)
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert summary.sections[:2] == ["overview", "health"]
    assert summary.counts["health_error"] == 5 and summary.counts["health_warning"] == 4
    assert summary.counts["health_info"] == 2
    section = text[text.index('<section id="health">') :]
    section = section[: section.index("</section>")]
    assert "Capture health" in section and "5 errors, 4 warnings" in section
    for finding in check_traces(str(defects)).overall():
        assert f"<td>{finding.code}</td>" in section


def test_every_check_is_documented():
    text = (ROOT / "docs" / "doctor.md").read_text(encoding="utf-8")
    for check in CHECKS:
        assert f"`{check.code}`" in text, check.code
