"""``agent-rl ui``'s HTTP API over a real store and a real server on 127.0.0.1: what each
endpoint answers (checked against the DuckDB file), the labels it writes, and its walls: the
token, forged writes, other hosts, SQL that writes or reads files, paths outside the static
folder. ``test_ui_browser.py`` drives the page itself in Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pytest
from ui_store import build_ui_store

from agent_rl_plugin.ui import serve_ui
from agent_rl_plugin.ui.auth import CSP


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Any]:
    return build_ui_store(tmp_path_factory.mktemp("ui") / "ui.duckdb")


@pytest.fixture()
def store(built, tmp_path) -> dict[str, Any]:
    """A private copy of the built store (tests write labels)."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(built["db"], db)
    return {**built, "db": str(db)}


@pytest.fixture()
def ui_server(store):
    with serve_ui(store["db"], token="t0ken", labeller="tester") as server:
        yield server


@pytest.fixture()
def ui(store, ui_server):
    return Client(ui_server.url.split("/ui/")[0], "t0ken"), store


class Client:
    """Requests to the UI as a script would send them (bearer token)."""

    def __init__(self, base: str, token: str | None) -> None:
        self.base, self.token = base, token

    def call(
        self, path: str, body: Any = None, *, headers: dict[str, str] | None = None, auth: bool = True
    ) -> tuple[int, dict[str, str], bytes]:
        sent = {"Authorization": f"Bearer {self.token}"} if auth and self.token else {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent.update({"Content-Type": "application/json", "X-Agent-RL-UI": "1"})
        sent.update(headers or {})
        request = urllib.request.Request(self.base + path, data=data, headers=sent)
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=60) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def json(self, path: str, body: Any = None, expect: int = 200, **kwargs: Any) -> Any:
        status, _, payload = self.call(path, body, **kwargs)
        assert status == expect, (status, payload[:500])
        return json.loads(payload)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def rows(db: str, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(db, read_only=True) as connection:
        return connection.execute(sql, params or []).fetchall()


# -- signing in and the walls ----------------------------------------------------------------------


def test_the_link_signs_in_with_a_cookie_and_api_calls_need_it(ui):
    client, _ = ui
    status, headers, _ = client.call("/ui/?token=t0ken", auth=False)
    assert status == 303 and headers["Location"] == "/ui/"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    pair = cookie.split(";", 1)[0]
    assert client.call("/ui/api/version", auth=False)[0] == 401
    assert client.call("/ui/api/version", auth=False, headers={"Cookie": pair})[0] == 200
    assert client.call("/ui/api/version", auth=False, headers={"Cookie": pair[:-1] + "x"})[0] == 401
    assert client.call("/ui/api/version", auth=False, headers={"Authorization": "Bearer nope"})[0] == 401
    assert client.call("/ui/?token=wrong", auth=False)[0] == 401
    status, headers, page = client.call("/ui/", auth=False)  # the page itself holds no data
    assert status == 200 and b"<html" in page.lower()
    assert headers["Content-Security-Policy"] == CSP
    assert headers["Referrer-Policy"] == "no-referrer" and headers["X-Frame-Options"] == "DENY"
    assert client.call("/", auth=False)[1]["Location"] == "/ui/"


def test_forged_writes_and_other_hosts_are_refused(ui):
    client, store = ui
    rid = store["rollout_ids"][0]
    label = {"rollout_id": rid, "label": "good"}
    no_header = client.call("/ui/api/labels", json.dumps(label).encode(), headers={"X-Agent-RL-UI": "0"})
    assert no_header[0] == 403 and b"X-Agent-RL-UI" in no_header[2]
    text_plain = client.call("/ui/api/labels", json.dumps(label).encode(), headers={"Content-Type": "text/plain"})
    assert text_plain[0] == 403
    other_origin = client.call("/ui/api/labels", label, headers={"Origin": "http://127.0.0.1:1"})
    assert other_origin[0] == 403 and b"origin" in other_origin[2]
    assert client.call("/ui/api/version", headers={"Host": "evil.example"})[0] == 403  # DNS rebinding
    assert client.call("/ui/api/version", headers={"Origin": "http://evil.example"})[0] == 403
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]
    same_origin = client.base.removeprefix("http://")
    assert client.call("/ui/api/labels", label, headers={"Origin": client.base, "Host": same_origin})[0] == 201


def test_static_files_come_only_from_the_static_folder(ui):
    client, _ = ui
    assert client.call("/ui/static/app.js", auth=False)[0] == 200
    for path in (
        "/ui/static/../app.py",
        "/ui/static/%2e%2e/app.py",
        "/ui/static/..%2fapp.py",
        "/ui/static//etc/passwd",
        "/ui/static/nothing.js",
        "/ui/static/app.py",
        "/ui/elsewhere",
    ):
        status, _, body = client.call(path, auth=False)
        assert status == 404, (path, status)
        assert b"import" not in body


def test_user_sql_cannot_write_or_read_files(ui):
    client, store = ui
    before = rows(store["db"], "SELECT count(*) FROM spans")
    for sql in ("delete from spans", "select * from read_text('/etc/passwd')", "copy spans to '/tmp/x.csv'"):
        answer = client.json("/ui/api/query", {"sql": sql}, expect=403)
        assert answer["error"] and answer["hint"]
    for where in ("1=1; delete from spans", "rollout_id in (select content from read_text('/etc/passwd'))"):
        status, _, body = client.call("/ui/api/rollouts?" + urllib.parse.urlencode({"where": where}))
        assert status in (400, 403), (where, status)
        assert json.loads(body)["error"]
    assert rows(store["db"], "SELECT count(*) FROM spans") == before


# -- reading ----------------------------------------------------------------------------------------


def test_rollouts_list_filters_sorts_and_pages(ui):
    client, store = ui
    every = client.json("/ui/api/rollouts?limit=500")
    assert every["total"] == len(store["rollout_ids"]) == len(every["rows"])
    rewards = [r["total_reward"] for r in client.json("/ui/api/rollouts?sort=total_reward&order=asc")["rows"]]
    present = [r for r in rewards if r is not None]
    assert present == sorted(present) and rewards[: len(present)] == present  # NULLs last
    group = store["group_id"]
    in_group = client.json("/ui/api/rollouts?" + urllib.parse.urlencode({"group": group}))
    assert {r["group_id"] for r in in_group["rows"]} == {group} and in_group["total"] == 3
    high = client.json("/ui/api/rollouts?min_reward=0.5")["rows"]
    expected = rows(store["db"], "SELECT count(*) FROM rollouts WHERE total_reward >= 0.5")[0][0]
    assert len(high) == expected and all(r["total_reward"] >= 0.5 for r in high)
    where = client.json("/ui/api/rollouts?" + urllib.parse.urlencode({"where": "n_tool_errors > 0"}))
    assert where["total"] == rows(store["db"], "SELECT count(*) FROM rollouts WHERE n_tool_errors > 0")[0][0] > 0
    searched = client.json("/ui/api/rollouts?q=ONERROR")["rows"]
    assert [r["rollout_id"] for r in searched] == [store["hostile_rollout_id"]]
    page = client.json("/ui/api/rollouts?limit=4&offset=4&sort=start_time&order=asc")
    assert [r["rollout_id"] for r in page["rows"]] == store["rollout_ids"][4:8]
    run = store["training_run_ids"][1]  # selects task_id like 'shop-0%'
    by_run = client.json(f"/ui/api/rollouts?run={run}")["rows"]
    assert by_run and {r["task_id"] for r in by_run} == {"shop-0"}
    for bad in ("limit=0", "limit=x", "sort=secret", "order=sideways", "min_reward=lots", "queue=mine", "run=nope"):
        answer = client.json(f"/ui/api/rollouts?{bad}", expect=400)
        assert answer["error"]


def test_one_rollout_has_everything_the_store_holds_about_it(ui):
    client, store = ui
    rid = store["rollout_ids"][0]
    detail = client.json(f"/ui/api/rollouts/{rid}")
    db = store["db"]
    assert detail["rollout"]["rollout_id"] == rid
    assert len(detail["spans"]) == rows(db, "SELECT count(*) FROM spans WHERE rollout_id = ?", [rid])[0][0]
    assert detail["spans"][0]["offset_ms"] == 0 and all(s["offset_ms"] >= 0 for s in detail["spans"])
    assert isinstance(detail["spans"][0]["attributes"], dict)
    assert len(detail["llm_calls"]) == rows(db, "SELECT count(*) FROM llm_calls WHERE rollout_id = ?", [rid])[0][0]
    assert isinstance(detail["llm_calls"][0]["input_messages"], list)
    assert len(detail["tool_calls"]) == rows(db, "SELECT count(*) FROM tool_calls WHERE rollout_id = ?", [rid])[0][0]
    stored = rows(db, "SELECT reward_id FROM rewards WHERE rollout_id = ?", [rid])
    assert sorted(r["reward_id"] for r in detail["rewards"]) == sorted(r[0] for r in stored)
    assert {r["method"] for r in detail["advantages"]} == {"grpo", "gigpo"}
    weighted = sum(r["weight"] * r["value"] for r in detail["episode_rewards"]) / sum(
        r["weight"] for r in detail["episode_rewards"]
    )
    assert weighted == pytest.approx(detail["rollout"]["total_reward"])
    used = {r["run_id"] for r in detail["training_runs"]}
    kto, grpo = store["training_run_ids"]
    assert kto in used and (grpo in used) == (detail["rollout"]["task_id"] == "shop-0")
    assert detail["group"]["n_rollouts"] == 3
    assert detail["neighbours"] == {"previous": None, "next": store["rollout_ids"][1]}
    hostile = client.json("/ui/api/rollouts/" + urllib.parse.quote(store["hostile_rollout_id"], safe=""))
    assert hostile["rollout"]["rollout_id"] == store["hostile_rollout_id"]
    assert client.json("/ui/api/rollouts/nope", expect=404)["error"]


def test_group_view_puts_the_rollouts_grpo_compares_side_by_side(ui):
    client, store = ui
    group = client.json("/ui/api/groups/" + urllib.parse.quote(store["group_id"], safe=""))
    totals = [r["total_reward"] for r in group["rollouts"]]
    assert len(totals) == 3 and totals == sorted(totals, reverse=True)
    expected = dict(
        rows(
            store["db"],
            "SELECT name, value FROM episode_rewards WHERE rollout_id = ?",
            [group["rollouts"][0]["rollout_id"]],
        )
    )
    assert group["rollouts"][0]["rewards"] == pytest.approx(expected)
    runs = {r["method"]: r["run_id"] for r in group["advantage_runs"]}
    assert set(runs) == {"grpo", "gigpo"}
    grpo_advantages = [r["advantages"][runs["grpo"]] for r in group["rollouts"]]
    assert sum(grpo_advantages) == pytest.approx(0.0, abs=1e-9)  # GRPO: centred within the group
    assert client.json("/ui/api/groups/nope", expect=404)["error"]


def test_training_runs_and_their_metric_series(ui):
    client, store = ui
    overview = client.json("/ui/api/training")
    assert {r["run_id"] for r in overview["runs"]} == set(store["training_run_ids"])
    kto = store["training_run_ids"][0]
    assert next(r for r in overview["runs"] if r["run_id"] == kto)["metric_names"][0] == "loss"
    run = client.json(f"/ui/api/training/{kto}")
    assert run["run"]["config"] == {"model": "tiny", "lr": 1e-4}
    stored = rows(
        store["db"], "SELECT step, value FROM training_metrics WHERE run_id = ? AND name = 'loss' ORDER BY step", [kto]
    )
    assert [tuple(p) for p in run["series"]["loss"]] == [(s, pytest.approx(v)) for s, v in stored]
    assert client.json("/ui/api/training/nope", expect=404)["error"]
    rounds = [(r["loop_id"], r["round"], r["heldout_success"], r["training_run_id"]) for r in overview["loop_rounds"]]
    assert rounds == [("loop-ui", 0, 0.2, None), ("loop-ui", 1, 0.7, store["training_run_ids"][1])]
    assert overview["loop_rounds"][1]["seconds"] == {"rollouts": 1.5, "train": 2.5}


def test_console_runs_read_only_sql_with_a_row_cap(ui):
    client, store = ui
    answer = client.json("/ui/api/query", {"sql": "select task_id, count(*) as n from rollouts group by 1 order by 1"})
    assert answer["columns"] == ["task_id", "n"] and answer["types"] == ["VARCHAR", "BIGINT"]
    assert answer["rows"] == [
        list(r) for r in rows(store["db"], "select task_id, count(*) from rollouts group by 1 order by 1")
    ]
    capped = client.json("/ui/api/query", {"sql": "select * from range(100)", "max_rows": 7})
    assert len(capped["rows"]) == 7 and capped["truncated"] is True
    assert "error" in client.json("/ui/api/query", {"sql": "select nope from nowhere"}, expect=400)
    cookbook = client.json("/ui/api/cookbook")["queries"]
    assert len(cookbook) >= 20 and all(q["sql"] and q["title"] and q["section"] for q in cookbook)
    first = client.json("/ui/api/query", {"sql": cookbook[0]["sql"]})
    assert first["rows"]


# -- labelling --------------------------------------------------------------------------------------


def test_labels_are_the_rows_the_cli_writes_plus_scores_notes_and_steps(ui, ui_server):
    client, store = ui
    a, b, c = store["rollout_ids"][:3]
    client.json("/ui/api/labels", {"rollout_id": a, "label": "good"}, expect=201)
    client.json("/ui/api/labels", {"rollout_id": b, "label": "bad", "labeller": "alice"}, expect=201)
    client.json("/ui/api/labels", {"rollout_id": c, "score": 4, "note": "close"}, expect=201)
    client.json("/ui/api/labels", {"rollout_id": a, "step_index": 1, "label": "bad"}, expect=201)
    client.json("/ui/api/labels", {"rollout_id": a, "note": "the first step is odd"}, expect=201)
    stored = rows(
        store["db"],
        "SELECT rollout_id, step_index, label, value, score, labeller, note FROM labels ORDER BY created_at, label_id",
    )
    assert sorted(stored, key=str) == sorted(
        [
            (a, None, "good", 1.0, None, "tester", None),
            (b, None, "bad", 0.0, None, "alice", None),
            (c, None, "score", 0.75, 4, "tester", "close"),
            (a, 1, "bad", 0.0, None, "tester", None),
            (a, None, "note", None, None, "tester", "the first step is odd"),
        ],
        key=str,
    )
    listed = {r["rollout_id"]: r for r in client.json("/ui/api/rollouts?limit=500")["rows"]}
    # The current label of a: its verdict; the later step label and note do not replace it.
    assert (listed[a]["label"], listed[a]["n_labels"]) == ("good", 3)
    assert (listed[c]["label"], listed[c]["label_score"]) == ("score", 4)
    unlabelled = client.json("/ui/api/rollouts?queue=unlabelled&limit=500")["rows"]
    assert {a, b, c}.isdisjoint(r["rollout_id"] for r in unlabelled) and len(unlabelled) == len(listed) - 3

    from agent_rl_plugin.rewards.rollout import load_rollouts
    from agent_rl_plugin.store import open_reader

    connection = open_reader(store["db"])
    try:
        loaded = {r.rollout_id: (r.label, r.label_value) for r in load_rollouts(connection, rollout_ids=[a, c])}
    finally:
        connection.close()
    assert loaded == {a: ("good", 1.0), c: ("score", 0.75)}  # what human_label scores
    scorer = ui_server.app.backend.scorer
    assert scorer.wait_idle(60) and scorer.errors == 0, scorer.last_error
    human = rows(
        store["db"],
        "SELECT rollout_id, arg_max(value, created_at) FROM rewards WHERE name = 'human_label' GROUP BY 1 ORDER BY 1",
    )
    assert human == sorted([(a, 1.0), (b, 0.0), (c, 0.75)])  # as after `agent-rl label`


def test_disagreeing_queue(ui):
    client, store = ui
    low = rows(store["db"], "SELECT rollout_id FROM rollouts WHERE total_reward < 0.5 ORDER BY rollout_id")
    a = low[0][0]  # two labellers disagree; the latest label (bad) agrees with its low reward
    client.json("/ui/api/labels", {"rollout_id": a, "label": "good", "labeller": "ann"}, expect=201)
    client.json("/ui/api/labels", {"rollout_id": a, "label": "bad", "labeller": "bob"}, expect=201)
    b = low[1][0]  # one label, against its reward
    client.json("/ui/api/labels", {"rollout_id": b, "label": "good"}, expect=201)
    agree = low[2][0]
    client.json("/ui/api/labels", {"rollout_id": agree, "label": "bad"}, expect=201)
    disagreeing = {r["rollout_id"] for r in client.json("/ui/api/rollouts?queue=disagreeing")["rows"]}
    assert disagreeing == {a, b}


def test_bad_labels_are_refused_and_nothing_is_written(ui):
    client, store = ui
    rid = store["rollout_ids"][0]
    for body, status in (
        ({"rollout_id": rid}, 400),
        ({"rollout_id": rid, "label": "great"}, 400),
        ({"rollout_id": rid, "score": 6}, 400),
        ({"rollout_id": rid, "score": True}, 400),
        ({"rollout_id": rid, "label": "good", "step_index": -1}, 400),
        ({"rollout_id": rid, "note": "x" * 10_001}, 400),
        ({"rollout_id": rid, "label": "good", "admin": True}, 400),
        ({"rollout_id": "nope", "label": "good"}, 404),
        ({"rollout_id": rid, "label": "good", "step_index": 999}, 404),
        ({"rollout_id": 5, "label": "good"}, 400),
    ):
        answer = client.json("/ui/api/labels", body, expect=status)
        assert answer["error"], body
    assert client.call("/ui/api/labels", b"[1, 2]")[0] == 400
    assert client.call("/ui/api/labels", b"{not json")[0] == 400
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


# -- live ---------------------------------------------------------------------------------------------


def test_a_rollout_recorded_by_another_process_shows_up(ui):
    client, store = ui
    before = client.json("/ui/api/version")["version"]
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from ui_store import record_one; print(record_one({store['db']!r}))"
    rid = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert client.json("/ui/api/version")["version"] != before
    listed = client.json("/ui/api/rollouts?limit=5")["rows"]
    assert listed[0]["rollout_id"] == rid  # newest first
    assert client.json(f"/ui/api/rollouts/{rid}")["tool_calls"][0]["arguments"] == {"a": 2, "b": 2}


# -- inside agent-rl serve ---------------------------------------------------------------------------


def test_agent_rl_serve_mounts_the_ui_with_its_token(store):
    from agent_rl_plugin.receiver import Receiver
    from agent_rl_plugin.ui import ReceiverBackend, UiApp

    receiver = Receiver(store["db"], port=0, token="serve-token", announce=False)
    receiver.mounts["/ui"] = UiApp(ReceiverBackend(receiver), token=receiver.token, labeller="served")
    with receiver:
        client = Client(receiver.url, "serve-token")
        assert client.call("/ui/api/version", auth=False)[0] == 401
        version = client.json("/ui/api/version")
        assert version["served"] is True
        listed = client.json("/ui/api/rollouts?limit=500")
        assert listed["total"] == len(store["rollout_ids"])
        rid = store["rollout_ids"][0]
        client.json("/ui/api/labels", {"rollout_id": rid, "label": "bad"}, expect=201)
        assert client.json("/ui/api/version")["version"] != version["version"]
        assert client.json(f"/ui/api/rollouts/{rid}")["labels"][0]["labeller"] == "served"
        assert client.json("/ui/api/query", {"sql": "select count(*) as n from labels"})["rows"] == [[1]]
        assert client.json("/ui/api/query", {"sql": "delete from labels"}, expect=403)["error"]
        backend = receiver.mounts["/ui"].backend
        assert backend.scorer.wait_idle(60) and backend.scorer.errors == 0, backend.scorer.last_error
        assert client.call("/healthz", auth=False)[0] == 200  # the receiver's own routes are untouched
        assert client.call("/stats", auth=False)[0] == 401
    assert rows(store["db"], "SELECT rollout_id, label, labeller FROM labels") == [(rid, "bad", "served")]
    assert rows(store["db"], "SELECT rollout_id, value, source FROM rewards WHERE name = 'human_label'") == [
        (rid, 0.0, "human")
    ]


# -- the command -------------------------------------------------------------------------------------


def agent_rl() -> str:
    return shutil.which("agent-rl") or str(Path(sys.executable).parent / "agent-rl")


def test_the_command_prints_its_link_and_serves_until_stopped(store):
    env = {**os.environ, "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    process = subprocess.Popen(
        [agent_rl(), "ui", "--db", store["db"], "--port", "0", "--json", "--labeller", "cli"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = process.stdout.readline()
        url = json.loads(line)["url"]
        assert url.startswith("http://127.0.0.1:") and "/ui/?token=" in url
        base, token = url.split("/ui/?token=")
        assert Client(base, token).json("/ui/api/version")["labeller"] == "cli"
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0", "--no-token"], "loopback"),
        (["--host", "0.0.0.0"], "without an explicit token"),
        (["--db", "/nonexistent/none.duckdb"], "no database"),
    ],
)
def test_the_command_refuses_unsafe_or_impossible_starts(store, args, message):
    env = {**os.environ, "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("AGENT_RL_UI_TOKEN", None)
    command = [agent_rl(), "ui", "--port", "0", *args]
    if "--db" not in args:
        command += ["--db", store["db"]]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_cookbook_json_is_current():
    from agent_rl_plugin.ui import cookbook

    assert cookbook.PACKAGED.read_text() == cookbook.render(cookbook.DOCS.read_text()), (
        "agent_rl_plugin/ui/cookbook.json is stale: run python -m agent_rl_plugin.ui.cookbook"
    )


def test_polling_the_version_does_not_open_the_database(ui, monkeypatch):
    client, _ = ui
    import agent_rl_plugin.ui.backend as backend

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("version opened the database")

    monkeypatch.setattr(backend, "open_reader", refuse)
    started = time.monotonic()
    assert client.json("/ui/api/version")["version"]
    assert time.monotonic() - started < 5


def test_concurrent_reads_queries_and_labels_all_succeed(ui):
    """Several browser tabs at once: lists, details, console queries and label writes overlap."""
    from concurrent.futures import ThreadPoolExecutor

    client, store = ui
    ids = store["rollout_ids"][:6]

    def work(i: int) -> int:
        rid = ids[i % len(ids)]
        if i % 4 == 0:
            return client.call("/ui/api/labels", {"rollout_id": rid, "label": "good"})[0]
        if i % 4 == 1:
            return client.call("/ui/api/query", {"sql": "select count(*) from spans"})[0]
        if i % 4 == 2:
            return client.call(f"/ui/api/rollouts/{rid}")[0]
        return client.call("/ui/api/rollouts?limit=50")[0]

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(work, range(24)))
    assert statuses.count(201) == 6 and set(statuses) == {200, 201}, statuses
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(6,)]


def test_every_static_file_and_the_cookbook_ship_in_the_wheel():
    """pyproject's package-data globs cover every file the page needs (a wheel install has no
    source tree to fall back on)."""
    import glob
    import tomllib

    root = Path(__file__).resolve().parents[1]
    package = root / "agent_rl_plugin" / "ui"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "agent_rl_plugin.ui"
    ]
    shipped = {Path(p) for pattern in patterns for p in glob.glob(str(package / pattern), recursive=True)}
    needed = {p for p in package.rglob("*") if p.is_file() and "static" in p.parts} | {package / "cookbook.json"}
    assert needed and needed <= shipped, sorted(str(p) for p in needed - shipped)
