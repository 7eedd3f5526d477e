"""``UiApp``: the UI's HTTP routes, one callable mounted at ``/ui`` (``docs/ui.md``).

Routes (under the mount prefix, default ``/ui``):

* ``GET /ui/`` the page (``static/index.html``); with ``?token=`` it sets the login cookie and
  answers 303 to the page (see :mod:`.auth`); ``GET /ui`` redirects to ``/ui/``.
* ``GET /ui/static/NAME`` the page's scripts and styles (package files under ``static/``: a
  name of letters, digits, ``_``, ``-`` and one extension, optionally in sub-folders; anything
  else is 404, nothing outside the folder is ever read).
* ``GET /ui/api/version | facets | rollouts | rollouts/ID | groups/ID | training |
  training/ID | cookbook`` and ``POST /ui/api/labels | query``: JSON (see ``docs/ui.md``).

Every ``api/`` answer is JSON; errors are ``{"error": ..., "hint": ...}`` with 400 (bad
parameter, SQL error, timeout), 401 (no token), 403 (SQL refused, forged write), 404 (unknown
id or path), 405, 413 (body too large), 503 (the store is busy or locked: try again). Every
answer carries :data:`~agent_rl_plugin.ui.auth.SECURITY_HEADERS`; ``api/`` answers are never
cached.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.receiver.mounts import Request, Response
from agent_rl_plugin.rewards.labels import Label, LabelError, default_labeller, label_rows
from agent_rl_plugin.store.errors import StoreError
from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError
from agent_rl_plugin.ui.auth import SECURITY_HEADERS, UiAuth
from agent_rl_plugin.ui.backend import Backend
from agent_rl_plugin.ui.detail import RunMembership, group_detail, rollout_detail
from agent_rl_plugin.ui.listing import BadParameter, ListFilter, facets, list_rollouts
from agent_rl_plugin.ui.rows import json_value
from agent_rl_plugin.ui.training import training_overview, training_run

logger = logging.getLogger("agent_rl_plugin.ui")

STATIC_DIR = Path(__file__).with_name("static")
_STATIC_NAME = re.compile(r"^(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.(js|css|html|svg|png|ico|json)$")
_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "svg": "image/svg+xml",
    "png": "image/png",
    "ico": "image/x-icon",
    "json": "application/json",
}
MAX_CONSOLE_ROWS = 5000


def sql_type(arrow_type: pa.DataType) -> str:
    """The SQL name the console shows for a result column's Arrow type."""
    for test, name in (
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_integer, "BIGINT"),
        (pa.types.is_floating, "DOUBLE"),
        (pa.types.is_decimal, "DECIMAL"),
        (pa.types.is_timestamp, "TIMESTAMP"),
        (pa.types.is_date, "DATE"),
        (pa.types.is_string, "VARCHAR"),
        (pa.types.is_large_string, "VARCHAR"),
    ):
        if test(arrow_type):
            return name
    return str(arrow_type).upper()


class HttpError(AgentRLError):
    """An API answer other than 200: ``status``, ``message`` and an optional ``hint``."""

    def __init__(self, status: int, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status, self.message = status, message


def _json(status: int, data: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
    return Response(status, body, "application/json; charset=utf-8", [("Cache-Control", "no-store"), *(headers or [])])


def _body(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(request.body or b"{}")
    except ValueError as exc:
        raise HttpError(400, f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise HttpError(400, "the body is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise HttpError(400, "the body must be a JSON object")
    return data


class UiApp:
    """The UI over ``backend`` (a file or a receiver), mounted at ``prefix``.

    ``token``: required on ``api/`` requests (``None``: none, for loopback only; the CLI enforces
    that). ``labeller``: the author of labels a request does not name (default ``$USER``).
    """

    def __init__(
        self, backend: Backend, *, token: str | None, prefix: str = "/ui", labeller: str | None = None
    ) -> None:
        self.backend = backend
        self.prefix = prefix.rstrip("/")
        self.auth = UiAuth(token, self.prefix)
        self.labeller = labeller or default_labeller()
        self.membership = RunMembership()
        self._get: dict[str, Callable[[Request, str], Any]] = {
            "version": self._version,
            "facets": lambda request, rest: facets(self.backend),
            "rollouts": self._rollouts,
            "groups": self._group,
            "training": self._training,
            "cookbook": self._cookbook,
        }
        self._post: dict[str, Callable[[Request, str], Any]] = {"labels": self._labels, "query": self._query}

    def login_url(self, base_url: str) -> str:
        """The link to print: the page, with the token when there is one."""
        page = base_url.rstrip("/") + self.prefix + "/"
        return page + ("?token=" + urllib.parse.quote(self.auth.token, safe="") if self.auth.token else "")

    # --- dispatch -------------------------------------------------------------------------
    def __call__(self, request: Request) -> Response:
        response = self._route(request)
        response.headers.extend(SECURITY_HEADERS)
        return response

    def _route(self, request: Request) -> Response:
        path = request.raw_path
        if path == "/":  # served alone: the root leads to the UI
            return Response(303, b"", "text/plain", [("Location", self.prefix + "/")])
        if path == self.prefix:
            return Response(308, b"", "text/plain", [("Location", self.prefix + "/")])
        rest = path[len(self.prefix) + 1 :] if path.startswith(self.prefix + "/") else None
        if rest is None:
            return _json(404, {"error": f"no such page {path[:200]}", "hint": f"the UI is at {self.prefix}/"})
        if rest == "" or rest == "index.html":
            return self._page(request)
        if rest.startswith("static/"):
            return self._static(rest[len("static/") :])
        if rest.startswith("api/"):
            return self._api(request, rest[len("api/") :])
        return _json(404, {"error": f"no such page {path[:200]}", "hint": f"the UI is at {self.prefix}/"})

    def _page(self, request: Request) -> Response:
        if self.auth.has_token_param(request):
            cookie = self.auth.login_cookie(request)
            if cookie is None:
                return Response(
                    401,
                    b"<!doctype html><title>agent-rl ui</title><p>This link's token is wrong: open the link that "
                    b"<code>agent-rl ui</code> printed.</p>",
                    "text/html; charset=utf-8",
                )
            return Response(303, b"", "text/plain", [("Location", self.prefix + "/"), ("Set-Cookie", cookie)])
        return self._static("index.html")

    def _static(self, name: str) -> Response:
        if not _STATIC_NAME.match(name):
            return _json(404, {"error": "no such file"})
        path = (STATIC_DIR / name).resolve()
        if STATIC_DIR.resolve() not in path.parents or not path.is_file():
            return _json(404, {"error": "no such file"})
        extension = name.rsplit(".", 1)[1]
        return Response(200, path.read_bytes(), _TYPES[extension], [("Cache-Control", "no-cache")])

    def _api(self, request: Request, rest: str) -> Response:
        if not self.auth.authorized(request):
            return _json(
                401,
                {
                    "error": "not signed in to this UI",
                    "hint": "open the link `agent-rl ui` printed (it carries the access token)",
                },
            )
        endpoint, _, tail = rest.partition("/")
        routes = self._post if request.method == "POST" else self._get
        handler = routes.get(endpoint)
        if handler is None:
            other = self._get if request.method == "POST" else self._post
            if endpoint in other:
                return _json(405, {"error": f"use {'GET' if request.method == 'POST' else 'POST'} for api/{endpoint}"})
            return _json(404, {"error": f"no such API endpoint api/{rest[:100]}"})
        if request.method == "POST":
            refusal = self.auth.write_refusal(request)
            if refusal is not None:
                return _json(403, {"error": refusal, "hint": None})
        try:
            answer = handler(request, urllib.parse.unquote(tail))
        except HttpError as exc:
            return _json(exc.status, {"error": exc.message, "hint": exc.hint})
        except (BadParameter, LabelError) as exc:
            return _json(400, {"error": str(exc), "hint": exc.hint})
        except SqlRefused as exc:
            return _json(403, {"error": str(exc), "hint": exc.hint})
        except UserSqlError as exc:
            return _json(400, {"error": str(exc), "hint": exc.hint})
        except StoreError as exc:
            message, _, hint = str(exc).partition(" Fix: ")
            return _json(503, {"error": message, "hint": hint or "try again in a moment"})
        status = 201 if request.method == "POST" and endpoint == "labels" else 200
        return _json(status, answer)

    # --- endpoints ------------------------------------------------------------------------
    def _cookbook(self, request: Request, rest: str) -> dict[str, Any]:
        from agent_rl_plugin.ui import cookbook  # not at import: `python -m ...ui.cookbook` regenerates it

        return {"queries": cookbook.load()}

    def _version(self, request: Request, rest: str) -> dict[str, Any]:
        return {
            "version": self.backend.version(),
            "db": self.backend.db,
            "labeller": self.labeller,
            "served": self.backend.served,
        }

    def _rollouts(self, request: Request, rest: str) -> Any:
        if not rest:
            return list_rollouts(self.backend, ListFilter.from_params(request.query))
        found = rollout_detail(self.backend, rest, self.membership)
        if found is None:
            raise HttpError(404, f"no rollout {rest[:80]!r}", "it may be in another store (see --db)")
        return found

    def _group(self, request: Request, rest: str) -> Any:
        found = group_detail(self.backend, rest) if rest else None
        if found is None:
            raise HttpError(404, f"no group {rest[:80]!r}")
        return found

    def _training(self, request: Request, rest: str) -> Any:
        if not rest:
            return training_overview(self.backend)
        found = training_run(self.backend, rest)
        if found is None:
            raise HttpError(404, f"no training run {rest[:80]!r}")
        return found

    def _labels(self, request: Request, rest: str) -> dict[str, Any]:
        data = _body(request)
        unknown = set(data) - {"rollout_id", "step_index", "label", "score", "note", "labeller"}
        if unknown:
            raise HttpError(400, f"unknown fields {sorted(unknown)}")
        label = Label.make(
            data.get("rollout_id"),  # type: ignore[arg-type]  # Label.make checks the type
            label=data.get("label"),
            score=data.get("score"),
            note=data.get("note"),
            labeller=data.get("labeller") or self.labeller,
            step_index=data.get("step_index"),
        )
        with self.backend.reader() as connection:
            exists = connection.execute(
                "SELECT count(*) FROM rollouts WHERE rollout_id = ?", [label.rollout_id]
            ).fetchall()[0][0]
            if exists and label.step_index is not None:
                exists = connection.execute(
                    "SELECT count(*) FROM steps WHERE rollout_id = ? AND step_index = ?",
                    [label.rollout_id, label.step_index],
                ).fetchall()[0][0]
        if not exists:
            raise HttpError(
                404,
                f"no rollout {label.rollout_id[:80]!r}"
                + ("" if label.step_index is None else f" with step {label.step_index}"),
            )
        rows = label_rows([label])
        self.backend.append_labels(rows)
        row = {k: json_value(v) for k, v in rows[0].items()}
        return {"label": row}

    def _query(self, request: Request, rest: str) -> dict[str, Any]:
        data = _body(request)
        sql = data.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise HttpError(400, 'expected {"sql": "select ..."}')
        max_rows = data.get("max_rows", 1000)
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= MAX_CONSOLE_ROWS:
            raise HttpError(400, f"max_rows must be a whole number from 1 to {MAX_CONSOLE_ROWS}")
        result = self.backend.user_query(sql, max_rows=max_rows)
        return {
            "columns": result.columns,
            "types": [sql_type(f.type) for f in result.table.schema],
            "rows": [[json_value(v) for v in row] for row in result.rows],
            "truncated": result.truncated,
            "seconds": round(result.elapsed_s, 4),
        }
