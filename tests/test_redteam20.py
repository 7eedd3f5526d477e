"""Red team of the web UI's backend (issue 20): a real ``serve_ui`` server on 127.0.0.1 over real
DuckDB files, attacked through HTTP the way a hostile page, a hostile local process or hostile
recorded content would. Each test is named after the attack and asserts the safe behaviour.

Findings (failing until fixed) come first; attacks that are already defended follow (they pass,
and each says which line of the defence it guards).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import time
import urllib.parse
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
from ui_store import build_ui_store

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.ui import serve_ui
from agent_rl_plugin.ui.detail import MAX_SPANS

TOKEN = "redteam-token-20"
WRITE_HEADERS = {"Content-Type": "application/json", "X-Agent-RL-UI": "1"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Any]:
    return build_ui_store(tmp_path_factory.mktemp("redteam20") / "ui.duckdb")


@pytest.fixture()
def store(built, tmp_path) -> dict[str, Any]:
    """A private copy of the built store (tests plant hostile rows in it)."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(built["db"], db)
    return {**built, "db": str(db)}


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    auth: bool = True,
    timeout: float = 60,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request as a script sends it: ``(status, header pairs, body)``."""
    sent = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent.update(WRITE_HEADERS)
    sent.update(headers or {})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=data, headers=sent)
        answer = connection.getresponse()
        return answer.status, answer.getheaders(), answer.read()
    finally:
        connection.close()


def rows(db: str, sql: str, params: list[Any] | None = None) -> list[tuple]:
    with duckdb.connect(db, read_only=True) as connection:
        return connection.execute(sql, params or []).fetchall()


def write(db: str, sql: str, params: list[Any] | None = None) -> None:
    with duckdb.connect(db) as connection:
        connection.execute(sql, params or [])


def set_root_attribute(db: str, rollout_id: str, name: str, text: str) -> None:
    """Plant a string attribute on a rollout's root span, as any OTLP client can send it."""
    write(
        db,
        "UPDATE spans SET attributes = json_merge_patch(attributes, json_object(?, ?)) "
        "WHERE rollout_id = ? AND is_rollout_root",
        [name, text, rollout_id],
    )


def plant_training_run(db: str, run_id: str, dataset_sql: str) -> None:
    write(
        db,
        "INSERT INTO training_runs (run_id, method, status, dataset_sql, started_at) "
        "VALUES (?, 'kto', 'ok', ?, now() + INTERVAL 1 HOUR)",
        [run_id, dataset_sql],
    )


def quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


# == findings ===================================================================================


def test_nan_recorded_through_the_public_api_does_not_break_the_rollout_view(store):
    """An agent's metadata or tool argument that is NaN (a diverged metric) is stored as the JSON
    text ``NaN``; the detail view parsed it to a float NaN and json.dumps(allow_nan=False) raised:
    500 for that rollout. The contract says NaN becomes null."""
    rollout_id = f"nan-{uuid.uuid4().hex[:8]}"
    tracing.configure(db_path=store["db"], export_delay_ms=50)
    try:
        with arl.rollout(task_id="nan-task", rollout_id=rollout_id, metadata={"score": float("nan")}):
            arl.record_tool_call("measure", arguments={"x": float("nan")}, result=float("inf"))
        assert arl.flush()
    finally:
        tracing.shutdown()
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, body = call(server.port, "GET", f"/ui/api/rollouts/{rollout_id}")
    assert status == 200, body[:300]
    detail = json.loads(body)
    assert detail["rollout"]["metadata"] == {"score": None}
    assert detail["tool_calls"][0]["arguments"] == {"x": None}


def test_nan_in_a_training_config_does_not_break_the_training_run_view(store):
    """``record_training_run`` stores a NaN hyper-parameter as ``NaN`` in ``config``: 500 before."""
    from agent_rl_plugin.train import record_training_run

    result = SimpleNamespace(metrics={"train_loss": 0.5}, log_history=[{"step": 1, "loss": 0.5}], seconds=1.0)
    run_id = record_training_run(
        store["db"], result, {"model": "tiny", "lr": float("nan")}, "select rollout_id from rollouts", method="kto"
    )
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, body = call(server.port, "GET", f"/ui/api/training/{run_id}")
    assert status == 200, body[:300]
    assert json.loads(body)["run"]["config"]["lr"] is None


def test_deeply_nested_input_of_one_rollout_does_not_break_the_whole_list(store):
    """One rollout whose ``agent_rl.input`` is ``[[[[...]]]]`` 5000 deep made json.loads raise
    RecursionError (not a ValueError, so not caught): the default list page and the detail were
    500 for everyone."""
    victim = store["rollout_ids"][0]
    set_root_attribute(store["db"], victim, "agent_rl.input", "[" * 5000 + "]" * 5000)
    with serve_ui(store["db"], token=TOKEN) as server:
        listed = call(server.port, "GET", "/ui/api/rollouts?limit=500")
        detail = call(server.port, "GET", f"/ui/api/rollouts/{victim}")
    assert listed[0] == 200, listed[2][:300]
    assert json.loads(listed[2])["total"] == len(store["rollout_ids"])
    assert detail[0] == 200, detail[2][:300]


def test_huge_number_in_recorded_output_does_not_break_the_rollout_view(store):
    """``1e999`` is valid JSON text that Python parses to inf: 500 before (must be null)."""
    victim = store["rollout_ids"][1]
    set_root_attribute(store["db"], victim, "agent_rl.output", "1e999")
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, body = call(server.port, "GET", f"/ui/api/rollouts/{victim}")
    assert status == 200, body[:300]
    assert json.loads(body)["rollout"]["output"] is None


def test_rollout_with_more_spans_than_the_cap_has_capped_steps_and_tool_calls(store):
    """Spans are capped at MAX_SPANS but steps, tool_calls (and llm_calls, rewards, labels) were
    not: a rollout with 100k tool spans answered 52 MB in 20 s. Here 6000 tool spans."""
    victim = store["rollout_ids"][2]
    write(
        store["db"],
        "INSERT INTO spans SELECT s.* REPLACE (s.span_id || '-' || r.range::VARCHAR AS span_id, "
        "s.start_unix_nano + r.range AS start_unix_nano) FROM spans s, range(?) r "
        "WHERE s.span_id = (SELECT min(span_id) FROM spans WHERE rollout_id = ? AND span_kind = 'tool')",
        [MAX_SPANS + 1000, victim],
    )
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, body = call(server.port, "GET", f"/ui/api/rollouts/{victim}")
    assert status == 200, body[:300]
    detail = json.loads(body)
    assert len(detail["spans"]) <= MAX_SPANS and detail["spans_truncated"] is True
    assert len(detail["tool_calls"]) <= MAX_SPANS, len(detail["tool_calls"])
    assert len(detail["steps"]) <= MAX_SPANS, len(detail["steps"])


def test_slow_recorded_dataset_query_does_not_stall_the_rollout_view(store):
    """The detail view runs every recent training run's recorded dataset_sql (up to 20, each up
    to 30 s, holding the file lock that every other read waits for) before it answers, again
    after every store change: one slow or hostile dataset query made each rollout view take 30 s
    (20 such runs: 10 minutes), and froze the list meanwhile."""
    plant_training_run(
        store["db"],
        "slow-run",
        "select cast(a.range as varchar) as rollout_id from range(100000000) a, range(1000) b "
        "where a.range * b.range = -1",
    )
    with serve_ui(store["db"], token=TOKEN) as server:
        started = time.monotonic()
        try:
            status, _, _ = call(server.port, "GET", f"/ui/api/rollouts/{store['rollout_ids'][0]}", timeout=12)
        except TimeoutError:
            status = None
        elapsed = time.monotonic() - started
    assert status == 200 and elapsed < 10, f"the rollout view took {elapsed:.1f} s (status {status})"


def test_login_cookie_is_not_the_receivers_bearer_token(store):
    """The login cookie's value was the token itself. Cookies are not isolated by port: any other
    server on 127.0.0.1 the browser talks to same-site under /ui receives it. Under
    ``agent-rl serve`` that token is the receiver's bearer token (ingest, /query, /snapshot)."""
    from agent_rl_plugin.receiver import Receiver
    from agent_rl_plugin.ui import ReceiverBackend, UiApp

    receiver = Receiver(store["db"], port=0, token=TOKEN, announce=False)
    receiver.mounts["/ui"] = UiApp(ReceiverBackend(receiver), token=receiver.token)
    with receiver:
        port = int(urllib.parse.urlsplit(receiver.url).port or 0)
        status, headers, _ = call(port, "GET", f"/ui/?token={TOKEN}", auth=False)
        assert status == 303
        cookie = next(value for name, value in headers if name.lower() == "set-cookie")
        name, _, value = cookie.split(";", 1)[0].partition("=")
        assert call(port, "GET", "/ui/api/version", auth=False, headers={"Cookie": f"{name}={value}"})[0] == 200
        assert TOKEN not in cookie
        assert call(port, "GET", "/stats", auth=False, headers={"Authorization": f"Bearer {value}"})[0] == 401


def login_cookie(port: int) -> str:
    """``name=value`` of the cookie the printed link sets."""
    status, headers, _ = call(port, "GET", f"/ui/?token={TOKEN}", auth=False)
    assert status == 303
    return next(value for name, value in headers if name.lower() == "set-cookie").split(";", 1)[0]


def test_a_foreign_cookie_with_a_space_or_json_value_does_not_lock_the_user_out(store):
    """Cookies are not isolated by port: every web app on 127.0.0.1 (and any page served there)
    adds its cookies to the UI's requests. ``SimpleCookie.load`` gives up on the whole header at
    the first value it cannot parse (``theme=dark mode``, ``prefs={"a":1}``), so the login cookie
    was never found: 401 for good, although the user opened the link."""
    with serve_ui(store["db"], token=TOKEN) as server:
        mine = login_cookie(server.port)
        assert call(server.port, "GET", "/ui/api/version", auth=False, headers={"Cookie": mine})[0] == 200
        for header in (f'prefs={{"a":1}}; {mine}', f"{mine}; theme=dark mode", f'{mine}; x="open'):
            status, _, _ = call(server.port, "GET", "/ui/api/version", auth=False, headers={"Cookie": header})
            assert status == 200, header


def test_a_page_on_another_local_port_cannot_drive_the_api_with_the_cookie(store):
    """The SameSite=Strict cookie is sent with requests from pages of the same *site*: any port of
    127.0.0.1. Such a page cannot read answers, but its ``<img src=".../api/rollouts?where=...">``
    requests run (``Sec-Fetch-Site: same-site`` is let through): SQL chosen by that page, slow on
    purpose or not, whose timing leaks the store one bit at a time, and a 30 s lock each.
    Cookie-authenticated API requests must come from the page itself (same-origin, or no
    Sec-Fetch-Site from browsers that do not send it)."""
    slow_if_true = "(select count(*) from range(3000000)) > 0 and task_id like 'shop%'"
    with serve_ui(store["db"], token=TOKEN) as server:
        mine = login_cookie(server.port)
        path = "/ui/api/rollouts?where=" + quote(slow_if_true)
        own = {"Cookie": mine, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
        assert call(server.port, "GET", path, auth=False, headers=own)[0] == 200
        other = {"Cookie": mine, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
        status, _, body = call(server.port, "GET", path, auth=False, headers=other)
    assert status in (401, 403), body[:200]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"label": ["good"]}, id="label-list"),
        pytest.param({"label": {"good": 1}}, id="label-object"),
        pytest.param({"note": "\ud800"}, id="note-lone-surrogate"),
        pytest.param({"labeller": "\udfff", "label": "good"}, id="labeller-lone-surrogate"),
        pytest.param({"rollout_id": "\ud800", "label": "good"}, id="rollout-id-lone-surrogate"),
    ],
)
def test_malformed_label_bodies_are_400_not_500(store, body):
    """Unhashable labels (TypeError) and lone surrogates (DuckDB cannot encode them) were 500 with
    a traceback in the log; they are the client's mistake: 400 with the error shape."""
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, answer = call(server.port, "POST", "/ui/api/labels", {"rollout_id": store["rollout_ids"][0], **body})
    assert status == 400, answer[:300]
    assert json.loads(answer)["error"]
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


@pytest.mark.parametrize("endpoint", ["labels", "query"])
def test_deeply_nested_json_body_is_400_not_500(store, endpoint):
    """``[[[[...]]]]`` 100000 deep (200 kB) made json.loads raise RecursionError: 500 before."""
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, answer = call(server.port, "POST", f"/ui/api/{endpoint}", b"[" * 100_000 + b"]" * 100_000)
    assert status == 400, answer[:300]
    assert json.loads(answer)["error"]


@pytest.mark.parametrize("labeller", ["\u202enimda", "alice\x1b[2J", "alice\r\nbob", "a\x00b"])
def test_labeller_with_control_or_bidi_characters_is_refused(store, labeller):
    """The author name shows next to every label (UI, CLI): bidi overrides reverse what follows
    it, terminal escapes reach the CLI's output. Refuse them (400), write nothing."""
    with serve_ui(store["db"], token=TOKEN) as server:
        status, _, answer = call(
            server.port,
            "POST",
            "/ui/api/labels",
            {"rollout_id": store["rollout_ids"][0], "label": "good", "labeller": labeller},
        )
    assert status == 400, answer[:300]
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


# == attacks that are defended ==================================================================


@pytest.fixture()
def ui(store):
    with serve_ui(store["db"], token=TOKEN, labeller="tester") as server:
        yield server.port, store


def test_token_is_accepted_only_as_bearer_header_or_login_cookie(ui):
    """Guards ``UiAuth.authorized`` (auth.py): the API never reads a token from the query string,
    a body or another cookie name, and a wrong cookie is refused."""
    port, _ = ui
    assert call(port, "GET", "/ui/api/version")[0] == 200
    assert call(port, "GET", "/ui/api/version", auth=False, headers={"authorization": f"bearer {TOKEN}"})[0] == 200
    assert call(port, "GET", f"/ui/api/version?token={TOKEN}", auth=False)[0] == 401
    assert call(port, "GET", f"/ui/api/version?access_token={TOKEN}", auth=False)[0] == 401
    assert call(port, "GET", "/ui/api/version", auth=False, headers={"Cookie": f"token={TOKEN}"})[0] == 401
    assert call(port, "GET", "/ui/api/version", auth=False, headers={"Authorization": f"Basic {TOKEN}"})[0] == 401
    assert call(port, "GET", "/ui/api/version", auth=False, headers={"Authorization": "Bearer " + TOKEN[:-1]})[0] == 401


def test_simple_cross_site_writes_are_refused_and_write_nothing(ui):
    """Guards ``UiAuth.write_refusal`` (auth.py: media type, X-Agent-RL-UI, Origin == Host) and
    ``HostPolicy.refusal`` (guard.py: ``Origin: null``, Sec-Fetch-Site cross-site)."""
    port, store = ui
    label = json.dumps({"rollout_id": store["rollout_ids"][0], "label": "bad"}).encode()
    forged = [
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {"Content-Type": "text/plain; application/json"},
        {"X-Agent-RL-UI": "0"},
        {"Origin": "null"},
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:1"},
        {"Origin": f"http://evil@127.0.0.1:{port}"},
        {"Sec-Fetch-Site": "cross-site"},
    ]
    for headers in forged:
        status, _, answer = call(port, "POST", "/ui/api/labels", label, headers=headers)
        assert status == 403, (headers, answer[:200])
    status, _, answer = call(port, "POST", "/ui/api/labels", label, headers={"X-Agent-RL-UI": ""})
    assert status == 403, answer[:200]
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]
    assert call(port, "POST", "/ui/api/labels", label, headers={"Origin": f"http://127.0.0.1:{port}"})[0] == 201


def test_dns_rebinding_host_names_are_refused(ui):
    """Guards the Host check of ``HostPolicy.refusal`` (guard.py) in front of the UI."""
    port, _ = ui
    for host in ("evil.example", f"evil.example:{port}", "localhost.", "127.0.0.1.", "127.0.0.1.nip.io", "127.1"):
        status, _, answer = call(port, "GET", "/ui/api/version", headers={"Host": host})
        assert status == 403, (host, answer[:200])
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert call(port, "GET", "/ui/api/version", headers={"Host": host})[0] == 200, host


def test_static_path_traversal_variants_are_404(ui):
    """Guards ``_STATIC_NAME`` and the ``resolve()``/parents check of ``UiApp._static`` (app.py);
    the test fails when both are removed (each alone stops ``../``)."""
    port, _ = ui
    assert call(port, "GET", "/ui/static/app.js", auth=False)[0] == 200
    for path in (
        "/ui/static/../app.py",
        "/ui/static/../../ui/app.py",
        "/ui/static/%2e%2e/app.py",
        "/ui/static/..%2fapp.py",
        "/ui/static/%252e%252e%252fapp.py",
        "/ui/static/..\\app.py",
        "/ui/static//etc/passwd",
        "/ui/static/app.js%00.css",
        "/ui/static/.hidden.js",
    ):
        status, _, body = call(port, "GET", path, auth=False)
        assert status == 404, (path, body[:100])
        assert b"import" not in body and b"def " not in body


def test_hostile_recorded_dataset_sql_cannot_read_or_write_files(ui, tmp_path):
    """A training run's ``dataset_sql`` comes from the database. Guards ``run_rollout_ids``
    (listing.py) running it through ``backend.user_query`` (the locked user-SQL wall), both for
    ``api/rollouts?run=`` and for the rollout view's training runs."""
    port, store = ui
    secret = tmp_path / "secret.txt"
    secret.write_text(store["rollout_ids"][0])
    target = tmp_path / "written.csv"
    plant_training_run(store["db"], "reads-file", f"select content as rollout_id from read_text('{secret}')")
    plant_training_run(store["db"], "file-table", f"select column0 as rollout_id from '{secret}'")
    plant_training_run(
        store["db"],
        "writes-file",
        f"select rollout_id from rollouts) x; copy (select 1) to '{target}'; select * from (select 'a' as rollout_id",
    )
    for run_id in ("reads-file", "file-table", "writes-file"):
        status, _, body = call(port, "GET", f"/ui/api/rollouts?run={run_id}")
        assert status == 403, (run_id, body[:200])
    status, _, body = call(port, "GET", f"/ui/api/rollouts/{store['rollout_ids'][0]}")
    assert status == 200
    used = {run["run_id"] for run in json.loads(body)["training_runs"]}
    assert not used & {"reads-file", "file-table", "writes-file"}
    assert not target.exists()


def test_where_filter_cannot_stack_statements_or_read_files(ui, tmp_path):
    """Guards ``check_condition`` in ``where_rollout_ids`` (listing.py)."""
    port, store = ui
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    for where in (
        "true); delete from labels; select 1 where (true",
        f"true) union all select content from read_text('{secret}') --",
        f"(select count(*) from read_text('{secret}')) > 0",
        "rollout_id in (select rollout_id from rollouts) ; drop table labels",
    ):
        status, _, body = call(port, "GET", "/ui/api/rollouts?where=" + quote(where))
        assert status in (400, 403), (where, body[:200])
        assert json.loads(body)["error"]
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


def test_crlf_in_an_id_does_not_split_the_answer(ui):
    """Decoded ids only ever reach JSON bodies (``UiApp._api``, app.py), never a header: a
    response-splitting attempt through the path stays a 404 with no injected header."""
    port, _ = ui
    for path in ("/ui/api/rollouts/x%0d%0aSet-Cookie:%20pwned=1", "/ui/api/groups/x%0d%0aLocation:%20//evil"):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            answer = b""
            while chunk := raw.recv(65536):
                answer += chunk
        head = answer.split(b"\r\n\r\n", 1)[0].lower()
        assert head.startswith(b"http/1.1 404")
        assert b"pwned" not in head and b"evil" not in head


def test_other_methods_are_refused_without_cors_headers(ui):
    """Guards the method check of ``handle_with`` (mounts.py): no PUT/DELETE/PATCH, and OPTIONS
    (a CORS preflight) gets no ``Access-Control-*`` header, so cross-origin scripts stay out;
    nor does any answer of the app (``SECURITY_HEADERS``, auth.py, names no CORS header)."""
    port, store = ui
    label = {"rollout_id": store["rollout_ids"][0], "label": "good"}
    for method, path, body in (("GET", "/ui/api/version", None), ("POST", "/ui/api/labels", label)):
        status, headers, _ = call(port, method, path, body, headers={"Origin": f"http://127.0.0.1:{port}"})
        assert status in (200, 201)
        assert not [name for name, _ in headers if name.lower().startswith("access-control")]
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
        status, headers, _ = call(
            port,
            method,
            "/ui/api/labels",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert status in (403, 405), method
        assert not [name for name, _ in headers if name.lower().startswith("access-control")]
        status, headers, _ = call(port, method, "/ui/api/labels")
        assert status == 405, method
        assert not [name for name, _ in headers if name.lower().startswith("access-control")]


def test_the_token_is_never_echoed_in_answers(ui):
    """Guards the login's ``Location`` (``UiApp._page``, app.py: the prefix only, never the
    request target) and the error answers, which name no credential."""
    port, _ = ui
    status, headers, body = call(port, "GET", f"/ui/?token={TOKEN}&next=x", auth=False)
    assert status == 303
    location = next(value for name, value in headers if name.lower() == "location")
    assert location == "/ui/"
    answers = [
        call(port, "GET", f"/ui/?token={TOKEN}x", auth=False),
        call(port, "GET", f"/ui/api/version?token={TOKEN}", auth=False),
        call(port, "GET", f"/ui/api/nope?token={TOKEN}"),
        call(port, "GET", f"/ui/nope/{TOKEN}", auth=False),
        call(port, "POST", "/ui/api/query", {"sql": f"select * from read_text('{TOKEN}')"}),
        call(port, "POST", "/ui/api/labels", {"rollout_id": "nope", "label": "good"}),
    ]
    for status, headers, _body in answers:
        names = [name.lower() for name, _ in headers]
        assert "set-cookie" not in names, status
        assert TOKEN.encode() not in b" ".join(value.encode() for _, value in headers)
    assert TOKEN.encode() not in answers[0][2] + answers[1][2] + answers[2][2] + answers[5][2]


def test_labels_cannot_target_unknown_rollouts_or_steps(ui):
    """Guards the existence checks of ``UiApp._labels`` (app.py): no label rows for rollouts or
    steps the store does not have (label injection)."""
    port, store = ui
    rollout_id = store["rollout_ids"][0]
    for body in (
        {"rollout_id": "no-such-rollout", "label": "good"},
        {"rollout_id": rollout_id + "%", "label": "good"},
        {"rollout_id": rollout_id, "label": "good", "step_index": 10_000},
        {"rollout_id": rollout_id, "label": "good", "step_index": 2**70},
    ):
        status, _, answer = call(port, "POST", "/ui/api/labels", body)
        assert status == 404, (body, answer[:200])
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


def test_oversized_or_unframed_bodies_are_refused_before_reading(ui):
    """Guards the body checks of ``handle_with`` (mounts.py): over ``MAX_APP_BODY`` is 413, no
    Content-Length (chunked) is 411, a signed or non-decimal one is 400; nothing is written."""
    port, store = ui

    def answer_to(framing: str) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(
                f"POST /ui/api/labels HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Type: application/json\r\nX-Agent-RL-UI: 1\r\n{framing}\r\n{{}}".encode()
            )
            return raw.recv(65536)

    assert answer_to(f"Content-Length: {2 << 20}\r\n").startswith(b"HTTP/1.1 413")
    for length in ("-1", "+5", "0x10", "1e3"):
        assert answer_to(f"Content-Length: {length}\r\n").startswith(b"HTTP/1.1 400"), length
    assert answer_to("Transfer-Encoding: chunked\r\n").startswith(b"HTTP/1.1 411")
    assert rows(store["db"], "SELECT count(*) FROM labels") == [(0,)]


def test_list_paging_values_out_of_range_are_400(ui):
    """Guards ``_integer``'s range check and the sort/order whitelists (listing.py): ``sort`` and
    ``order`` are spliced into SQL text, so anything but the listed names must be refused."""
    port, _ = ui
    for query in (
        "limit=501",
        "limit=0",
        "limit=1e3",
        "offset=-1",
        f"offset={1 << 41}",
        "sort=rollout_id;drop table labels",
        "sort=(select 1)",
        "order=desc,(select 1)",
        "min_reward=abc",
    ):
        status, _, body = call(port, "GET", "/ui/api/rollouts?" + query.replace(";", "%3B").replace(" ", "%20"))
        assert status == 400, (query, body[:200])
        assert json.loads(body)["error"]


def test_the_ui_command_prints_the_token_only_in_its_link(store, tmp_path):
    """``agent-rl ui --json`` prints one line with the link; stderr (where request errors are
    logged) never shows the token, even after a failing request and a wrong login."""
    import subprocess
    import sys

    executable = shutil.which("agent-rl") or str(Path(sys.executable).parent / "agent-rl")
    env = {**os.environ, "AGENT_RL_UI_TOKEN": TOKEN}
    process = subprocess.Popen(
        [executable, "ui", "--db", store["db"], "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        port = json.loads(line)["port"]
        assert json.loads(line)["url"].endswith(f"/ui/?token={TOKEN}")
        call(port, "GET", f"/ui/?token={TOKEN}", auth=False)
        call(port, "GET", "/ui/?token=wrong", auth=False)
        call(port, "POST", "/ui/api/labels", {"rollout_id": store["rollout_ids"][0], "label": "good"})
    finally:
        process.terminate()
        out, err = process.communicate(timeout=60)
    assert TOKEN not in out + err


# Last in the file: the query it starts goes on in a server thread after it fails.
def test_console_query_with_many_unions_is_stopped_within_its_time_limit(store):
    """A 540 kB console query (30000 UNION ALLs, under the 1 MB body limit) spends its time in
    planning, where ``connection.interrupt()`` does not stop it: the 30 s limit did not hold
    (16000 unions: 40-65 s here, growing quadratically; 55000: over 8 minutes), all the while
    holding the lock every read of the UI waits for."""
    sql = "select 1 " + "union all select 1 " * 30000
    with serve_ui(store["db"], token=TOKEN) as server:
        started = time.monotonic()
        try:
            status, _, _ = call(server.port, "POST", "/ui/api/query", {"sql": sql}, timeout=50)
        except TimeoutError:
            status = None
        elapsed = time.monotonic() - started
    assert status is not None and elapsed < 45, f"no answer after {elapsed:.0f} s"
