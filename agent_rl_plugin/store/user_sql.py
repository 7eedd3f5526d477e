"""User SQL on a locked, read-only DuckDB connection (``agent-rl query``, the receiver's ``/query``).

Contract:

* :func:`check_user_sql` is the statement-level wall: every statement must only read
  (:func:`~agent_rl_plugin.store.connection.is_read_only_sql`, which also refuses
  data-modifying CTEs), and no table function outside :data:`ALLOWED_TABLE_FUNCTIONS`
  (``read_text``, ``read_csv``, ``glob``, ``read_parquet``, ``query``, ... are refused) and no
  file path used as a table (``FROM '/etc/passwd'``) may appear anywhere in it. It raises
  :class:`SqlRefused` (a :class:`UserSqlError`, a ``ValueError``) with the reason and the fix,
  and :class:`UserSqlError` for SQL that does not parse. :func:`check_condition` does the same
  for a WHERE fragment spliced into an internal query (one statement only).
* :func:`open_locked` opens a database file read-only in its own DuckDB instance with
  :data:`LOCKED_SETTINGS` (no file system or network access, no extension install or load, a
  memory limit, no spilling to disk) and ``lock_configuration`` so SQL cannot undo them; the
  store's unmerged spool segments are shown first through views (only the spool folder stays
  readable, through ``allowed_directories``).
* :func:`run_locked` runs checked SQL on such a connection with a wall-clock limit (a watchdog
  thread calls ``connection.interrupt()`` at ``timeout_s``, or as soon as ``cancel()`` returns
  true, e.g. when an HTTP client went away) and caps on rows and Arrow bytes: a result over a
  cap is cut and flagged ``truncated`` (never an error). A timeout raises :class:`QueryTimeout`,
  a cancel :class:`QueryCancelled`, an SQL error :class:`UserSqlError`.
* :func:`run_locked_rows` does the same and returns Python rows (:class:`QueryRows`) without
  importing pyarrow when the column types allow it (start-up of ``agent-rl query``): the
  columns, rows and caps are always those of :func:`run_locked`
  (:func:`~agent_rl_plugin.store.result_fetch.fetch_rows`).
* :func:`run_user_query` does both on a database path, after bringing the store up to date as
  any reader does (:func:`~agent_rl_plugin.store.connection.open_reader`, opened and closed).
  The SQL is checked before anything is brought up to date or run; when there is nothing to
  bring up to date and the file opens at once, it is checked on the query's own locked
  connection (parsed there, never run) rather than on a second DuckDB instance.
  When this process already holds the file with another configuration (an in-process receiver,
  an open reader), the query runs on a private copy (mode 0600, in a 0700 temp folder, removed
  afterwards). When another process holds it,
  :class:`~agent_rl_plugin.store.errors.StoreLockedError` is raised (``agent-rl query`` asks
  the ``agent-rl serve`` holding it instead). :func:`run_user_query_rows` is the same with
  :func:`run_locked_rows`.
* :func:`run_own_query_rows` runs a command's own SQL (``traces list``; no user text in it, the
  user's values bound as ``params``) as :func:`run_user_query_rows` does, unchecked.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import duckdb

from agent_rl_plugin.store.connection import (
    extract_statements,
    is_read_only_sql,
    live_writer,
    open_reader,
    parse_on,
    parse_tree,
    sql_words,
)
from agent_rl_plugin.store.errors import StoreError, is_config_conflict, is_lock_error, translate_duckdb_error
from agent_rl_plugin.store.holders import remove_stale_notes
from agent_rl_plugin.store.result_fetch import fetch_arrow, fetch_rows, table_rows
from agent_rl_plugin.store.spool import SpoolNotPrivate, list_segments, remove_leftovers, spool_dir
from agent_rl_plugin.store.sql_errors import QueryCancelled, QueryTimeout, SqlRefused, UserSqlError, check_sql_size

if TYPE_CHECKING:  # pyarrow is imported where a result is fetched as Arrow, not by agent-rl query
    import pyarrow as pa

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MEMORY_LIMIT = "1GB"

#: Settings of every user-SQL connection; ``lock_configuration`` comes last and freezes them.
LOCKED_SETTINGS: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "temp_directory": "",
}

#: Table functions user SQL may call: generators and catalog listings, nothing that reads a file
#: or a URL or runs SQL from a string.
ALLOWED_TABLE_FUNCTIONS = frozenset(
    """
    range generate_series unnest json_each json_tree repeat repeat_row duckdb_columns
    duckdb_constraints duckdb_databases duckdb_dependencies duckdb_functions duckdb_indexes
    duckdb_keywords duckdb_schemas duckdb_sequences duckdb_tables duckdb_types duckdb_views
    pragma_table_info pragma_show pragma_storage_info pragma_database_size pragma_version
    pragma_platform pragma_collations pragma_metadata_info pragma_database_list pragma_show_tables
    pragma_user_agent pragma_functions
    """.split()
)
_PATH_CHARACTERS = set("/\\.:*?~$")
# When DuckDB cannot serialize a statement's tree, these words refuse it (file and SQL-string readers).
_FILE_WORDS = frozenset(
    "glob query query_table sniff_csv parquet_metadata parquet_schema parquet_file_metadata parquet_kv_metadata "
    "parquet_bloom_probe".split()
)
SQL_HINT = "tables and views: spans, rewards, rollouts, steps, llm_calls, tool_calls, events (see docs/schema.md)"


@dataclass
class QueryResult:
    """A query's Arrow ``table``; ``truncated`` by a cap (``reason``: rows or bytes); its time."""

    table: pa.Table
    truncated: bool = False
    reason: str | None = None
    elapsed_s: float = 0.0
    limits: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    @property
    def rows(self) -> list[tuple]:
        """The rows as tuples of Python values (the types a DuckDB cursor gives)."""
        return table_rows(self.table)


@dataclass
class QueryRows:
    """:class:`QueryResult`'s ``columns``, ``rows`` and the rest, as Python rows (:func:`run_locked_rows`)."""

    columns: list[str]
    rows: list[tuple]
    truncated: bool = False
    reason: str | None = None
    elapsed_s: float = 0.0
    limits: dict[str, Any] = field(default_factory=dict)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- the statement-level wall ---------------------------------------------------------------
def _refusals(tree: object) -> list[str]:
    """Why the parse tree ``tree`` is refused: table functions not allowed, file paths as tables."""
    found: list[str] = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "TABLE_FUNCTION":
                function = item.get("function") or {}
                name = str(function.get("function_name", "")).lower()
                if name not in ALLOWED_TABLE_FUNCTIONS:
                    found.append(f"table function {name}()")
            elif kind == "BASE_TABLE":
                name = str(item.get("table_name", ""))
                if _PATH_CHARACTERS.intersection(name):
                    found.append(f"a file as a table ({name!r})")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _statement_refusals(text: str) -> list[str]:
    tree = parse_tree(text)
    if tree is not None:
        return _refusals(tree)
    words = sql_words(text)
    return [f"{word}()" for word in words if word in _FILE_WORDS or word.startswith("read_") or word.endswith("_scan")]


def check_user_sql(sql: str) -> None:
    """Refuse ``sql`` unless every statement only reads and touches nothing but the database
    (see the module contract) and it is small enough to plan quickly (:func:`check_sql_size`).
    Raises :class:`UserSqlError`."""
    if not sql or not sql.strip():
        raise UserSqlError("the query is empty", "pass a SELECT, e.g. select * from rollouts")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes of a command line arrive as lone surrogates
        raise UserSqlError(
            f"the query is not UTF-8 text (character {exc.start + 1} is a byte that does not decode)",
            "pass the SQL and its values as UTF-8 text",
        ) from None
    check_sql_size(sql)
    try:
        statements = extract_statements(sql)
        read_only = is_read_only_sql(sql)
    except duckdb.Error as exc:
        raise UserSqlError(f"SQL error: {_first_line(exc)}", SQL_HINT) from None
    if not read_only:
        raise SqlRefused(
            "only read-only SQL runs here: this statement would change the database or files, so it was refused",
            "use SELECT (or DESCRIBE/SHOW/SUMMARIZE); WITH ... AS (DELETE/UPDATE/INSERT ...) is a write too",
        )
    refused: list[str] = []
    for statement in statements:
        if statement.type == duckdb.StatementType.SELECT:
            refused += _statement_refusals(statement.query)
        elif statement.type == duckdb.StatementType.EXPLAIN:
            refused += [r for s in extract_statements(statement.query) for r in _explained_refusals(s.query)]
    if refused:
        raise SqlRefused(
            f"user SQL may only read the database, not files, URLs or SQL strings: refused {', '.join(sorted(set(refused)))}",
            "query the tables and views of the store; to load files use `agent-rl ingest`",
        )


def _explained_refusals(text: str) -> list[str]:
    upper = text.lstrip().lower()
    for prefix in ("explain analyze", "explain analyse", "explain"):
        if upper.startswith(prefix):
            return _statement_refusals(text.lstrip()[len(prefix) :])
    return ["an EXPLAIN that could not be checked"]


def check_condition(condition: str, template: str) -> str:
    """Check a WHERE fragment ``condition`` by splicing it into ``template`` (which holds
    ``{where}``): one statement that passes :func:`check_user_sql`. Returns the spliced SQL."""
    sql = template.format(where=condition)
    try:
        count = len(extract_statements(sql))
    except duckdb.Error as exc:
        raise UserSqlError(f"SQL error in the condition: {_first_line(exc)}") from None
    if count != 1:
        raise SqlRefused("the condition must be one expression, not several statements")
    check_user_sql(sql)
    return sql


# --- the locked connection ------------------------------------------------------------------
def open_locked(
    path: str | os.PathLike[str],
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int = 2,
    spool_of: str | os.PathLike[str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """``path`` opened read-only in its own instance with :data:`LOCKED_SETTINGS` and the
    configuration locked. ``spool_of``: a database path whose unmerged spool segments are shown
    through temporary views first (:func:`~agent_rl_plugin.store.reading.overlay_unmerged`;
    only the spool folder stays readable, through ``allowed_directories``). Raises
    ``duckdb.Error`` as DuckDB does (a lock held by another process, a config conflict with a
    connection of this process, ...)."""
    config = {name: value for name, value in LOCKED_SETTINGS.items() if name != "enable_external_access"}
    connection = duckdb.connect(
        os.fspath(path), read_only=True, config=dict(config, memory_limit=memory_limit, threads=threads)
    )
    try:
        if spool_of is not None:
            if list_segments(spool_of):
                folder = spool_dir(spool_of).replace("'", "''")
                connection.execute(f"SET allowed_directories = ['{folder}']")
                from agent_rl_plugin.store.reading import overlay_unmerged  # only with a spool

                overlay_unmerged(connection, spool_of)
        connection.execute("SET enable_external_access = false")
        connection.execute("SET lock_configuration = true")
    except BaseException:
        connection.close()
        raise
    return connection


R = TypeVar("R")


def run_locked(
    connection: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cancel: Callable[[], bool] | None = None,
) -> QueryResult:
    """Run ``sql`` (already checked) on ``connection`` with the limits of the module contract."""
    limits = {"timeout_s": timeout_s, "max_rows": max_rows, "max_bytes": max_bytes}
    started = time.monotonic()
    table, reason = _guarded(connection, lambda: fetch_arrow(connection, sql, max_rows, max_bytes), timeout_s, cancel)
    return QueryResult(table, reason is not None, reason, time.monotonic() - started, limits)


def run_locked_rows(
    connection: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cancel: Callable[[], bool] | None = None,
    params: dict[str, Any] | None = None,
    plan_once: bool = False,
) -> QueryRows:
    """:func:`run_locked` with the result as Python rows, fetched without pyarrow when the
    column types allow it (see the module contract): the same columns, rows and caps. ``params``:
    values for ``$name`` parameters, bound by DuckDB; ``plan_once``: see ``fetch_rows``."""
    limits = {"timeout_s": timeout_s, "max_rows": max_rows, "max_bytes": max_bytes}
    started = time.monotonic()
    fetch = lambda: fetch_rows(connection, sql, max_rows, max_bytes, params, plan_once=plan_once)  # noqa: E731
    columns, rows, reason = _guarded(connection, fetch, timeout_s, cancel)
    return QueryRows(columns, rows, reason is not None, reason, time.monotonic() - started, limits)


def _guarded(
    connection: duckdb.DuckDBPyConnection, fetch: Callable[[], R], timeout_s: float, cancel: Callable[[], bool] | None
) -> R:
    """``fetch()`` under a watchdog that interrupts ``connection`` at ``timeout_s`` or when
    ``cancel()`` says so; its errors as :class:`UserSqlError` (see the module contract)."""
    started = time.monotonic()
    done = threading.Event()
    why: list[str] = []

    def watch() -> None:
        deadline = started + timeout_s
        while not done.wait(max(0.0, min(0.02, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                why.append("timeout")
            elif cancel is not None and cancel():
                why.append("cancel")
            else:
                continue
            connection.interrupt()
            return

    watchdog = threading.Thread(target=watch, name="agent-rl user sql watchdog", daemon=True)
    watchdog.start()
    try:
        return fetch()
    except Exception as exc:
        if why and why[0] == "timeout":
            raise QueryTimeout(
                f"the query ran longer than {timeout_s:g} s and was stopped",
                "narrow it (a WHERE, a LIMIT) or raise the time limit",
            ) from None
        if why:
            raise QueryCancelled("the query was cancelled (the client went away)") from None
        if isinstance(exc, duckdb.Error) or _arrow_error(exc):
            hint = (
                "the query needs more memory than user SQL may use: aggregate or narrow it"
                if isinstance(exc, duckdb.OutOfMemoryException)
                else SQL_HINT
            )
            raise UserSqlError(f"SQL error: {_first_line(exc)}", hint) from None
        raise
    finally:
        done.set()
        watchdog.join()


def _arrow_error(exc: BaseException) -> bool:
    """Whether ``exc`` is pyarrow's (only possible once pyarrow is imported)."""
    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(exc, pa.ArrowException)


def run_user_query(
    db_path: str | os.PathLike[str],
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    cancel: Callable[[], bool] | None = None,
    wait_s: float | None = None,
) -> QueryResult:
    """:func:`_run_user_query` with :func:`run_locked`: the result as an Arrow table."""

    def run(connection: duckdb.DuckDBPyConnection) -> QueryResult:
        return run_locked(connection, sql, timeout_s=timeout_s, max_rows=max_rows, max_bytes=max_bytes, cancel=cancel)

    return _run_user_query(db_path, sql, run, memory_limit=memory_limit, wait_s=wait_s)


def run_user_query_rows(
    db_path: str | os.PathLike[str],
    sql: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    cancel: Callable[[], bool] | None = None,
    wait_s: float | None = None,
) -> QueryRows:
    """:func:`run_user_query` with :func:`run_locked_rows`: Python rows (what ``agent-rl query`` prints)."""

    def run(connection: duckdb.DuckDBPyConnection) -> QueryRows:
        return run_locked_rows(
            connection, sql, timeout_s=timeout_s, max_rows=max_rows, max_bytes=max_bytes, cancel=cancel
        )

    return _run_user_query(db_path, sql, run, memory_limit=memory_limit, wait_s=wait_s)


_OVERLAID = "SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'spans'"


def run_own_query_rows(
    db_path: str | os.PathLike[str],
    sql: str,
    params: dict[str, Any] | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    wait_s: float | None = None,
    overlay_sql: str | None = None,
) -> QueryRows:
    """:func:`run_user_query_rows` for a command's own SQL (see the module contract);
    ``overlay_sql`` runs instead where unmerged segments are shown (``spans``: a view, no ``rowid``)."""

    def run(connection: duckdb.DuckDBPyConnection) -> QueryRows:
        statement = sql
        if overlay_sql is not None and connection.execute(_OVERLAID).fetchone() != (0,):
            statement = overlay_sql
        return run_locked_rows(  # plan_once: the package's statements give plain columns
            connection,
            statement,
            timeout_s=timeout_s,
            max_rows=max_rows,
            max_bytes=max_bytes,
            params=params,
            plan_once=True,
        )

    return _run_user_query(db_path, sql, run, memory_limit=memory_limit, wait_s=wait_s, check=False)


def _run_user_query(
    db_path: str | os.PathLike[str],
    sql: str,
    run: Callable[[duckdb.DuckDBPyConnection], R],
    *,
    memory_limit: str,
    wait_s: float | None,
    check: bool = True,
) -> R:
    """Check ``sql`` and run it on a locked read-only connection to ``db_path`` (see the module
    contract). The store is first brought up to date as for any reader (this process's recorder
    flushed, spool segments merged when possible, an old schema upgraded) by opening and closing
    :func:`~agent_rl_plugin.store.connection.open_reader`, unless there is nothing to bring up
    to date (:func:`_ready_without_reader`; an old schema found on the query's connection then
    still goes through open_reader). Raises :class:`UserSqlError` (refused, failed, timed out) or
    :class:`~agent_rl_plugin.store.errors.StoreError` (no database, locked for ``wait_s``, ``None``:
    ``READ_WAIT_S``). ``check`` false: ``sql`` is the package's own, not checked."""
    path = os.fspath(db_path)
    checked = _open_checked(path, sql, memory_limit, check)
    if checked is None:
        if check:
            check_user_sql(sql)
        ready = _ready_without_reader(path)
        if not ready:
            open_reader(path, snapshot=False, wait_s=wait_s).close()
    else:
        ready = True
    copy_dir: str | None = None

    def open_once() -> duckdb.DuckDBPyConnection:
        try:
            return open_locked(path, memory_limit=memory_limit, spool_of=path)
        except duckdb.Error as exc:  # another process merging right now: wait like any reader
            if is_lock_error(exc):
                raise (translate_duckdb_error(exc, path) or StoreError(str(exc), path)) from exc
            raise

    def open_waiting() -> duckdb.DuckDBPyConnection:
        from agent_rl_plugin.store.lease import READ_WAIT_S, with_wait  # here: lease brings the merge code

        return with_wait(path, open_once, READ_WAIT_S if wait_s is None else wait_s)

    try:
        try:
            connection = checked if checked is not None else open_waiting()
            if ready and _needs_upgrade(connection):  # an old schema: upgrade it as open_reader does
                connection.close()
                open_reader(path, snapshot=False, wait_s=wait_s).close()
                connection = open_waiting()
        except duckdb.Error as exc:
            if not is_config_conflict(exc) and "already attached" not in str(exc):
                translated = translate_duckdb_error(exc, path)
                raise (translated or StoreError(f"cannot open {path}: {exc}", path)) from exc
            # This process holds the file with other settings (an open reader, an in-process
            # receiver): query a private copy of what it holds.
            copy_dir = tempfile.mkdtemp(prefix="agent-rl-query-")  # 0700
            copy = copy_database(
                open_reader(path, snapshot=False, wait_s=wait_s), os.path.join(copy_dir, "copy.duckdb"), close=True
            )
            connection = open_locked(copy, memory_limit=memory_limit, spool_of=path)
        try:
            return run(connection)
        finally:
            connection.close()
    finally:
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)


def _open_checked(path: str, sql: str, memory_limit: str, check: bool = True) -> duckdb.DuckDBPyConnection | None:
    """The query's locked connection to ``path`` with ``sql`` checked on that connection's own
    parser (:func:`~agent_rl_plugin.store.connection.parse_on`), when the store needs nothing
    brought up to date (:func:`_nothing_to_bring_up`; its housekeeping follows the check) and
    the file opens at once: one DuckDB instance where checking on the private parser first and
    then opening starts two (start-up time of ``agent-rl query``). ``None`` when not, or when
    opening fails in any way: the caller then checks first and opens as before, so its errors,
    waits and their order are unchanged. Raises what :func:`check_user_sql` raises (after
    closing the connection): refused SQL is parsed, never run, and brings nothing up to date.
    ``check`` false: the package's own SQL, not checked."""
    if not _nothing_to_bring_up(path):
        return None
    try:
        connection = open_locked(path, memory_limit=memory_limit, spool_of=path)
    except Exception:  # noqa: BLE001 - locked, held by this process, unreadable: the usual way says so
        return None
    try:
        if check:
            with connection.cursor() as cursor, parse_on(cursor):
                check_user_sql(sql)
    except BaseException:
        connection.close()
        raise
    _housekeeping(path)
    return connection


def _nothing_to_bring_up(path: str) -> bool:
    """This process records nothing into ``path``, the file exists and its spool holds no segment."""
    if live_writer(path) is not None or not os.path.exists(path):
        return False
    try:
        return not list_segments(path)
    except SpoolNotPrivate:
        return False


def _ready_without_reader(path: str) -> bool:
    """Whether the store at ``path`` is up to date for reading without
    :func:`~agent_rl_plugin.store.connection.open_reader` (a database instance opened and closed
    for nothing: start-up time of ``agent-rl query``): this process records nothing into it, the
    file exists and its spool holds no segment. Then what open_reader would do here is done:
    leftovers of dead writers and stale holder notes are removed (``try_merge`` with nothing to
    merge); the schema is checked on the query's own connection (:func:`_needs_upgrade`)."""
    if not _nothing_to_bring_up(path):
        return False
    _housekeeping(path)
    return True


def _housekeeping(path: str) -> None:
    """``lease.try_merge(path, wait_s=0.0)`` without importing the merge code when the spool holds
    no segment: leftovers of dead writers and stale holder notes removed (what it does then)."""
    if list_segments(path):
        from agent_rl_plugin.store.lease import try_merge

        try_merge(path, wait_s=0.0)
        return
    remove_leftovers(path)
    remove_stale_notes(path)


def _needs_upgrade(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database behind ``connection`` has migrations recorded and some missing (what
    :func:`~agent_rl_plugin.store.connection.open_reader` upgrades before reading)."""
    from agent_rl_plugin.store.migrations import MIGRATIONS, MIGRATIONS_TABLE

    try:  # one statement, not applied_migrations' two (a catalog scan first): start-up of a command
        with connection.cursor() as cursor:  # its own results: none left unfinished on ``connection``
            done = {row[0] for row in cursor.execute(f"SELECT name FROM {MIGRATIONS_TABLE}").fetchall()}
    except duckdb.Error:  # no tracking table (nothing recorded, as applied_migrations says), or unreadable
        return False
    return bool(done) and any(migration.name not in done for migration in MIGRATIONS)


def copy_database(cursor: duckdb.DuckDBPyConnection, dest: str, *, close: bool = False) -> str:
    """Copy the database of ``cursor`` (everything committed) into the new file ``dest``, mode
    0600; returns ``dest``. Closes ``cursor`` when ``close``."""
    alias = "copy_" + os.urandom(8).hex()
    try:
        row = cursor.execute("SELECT current_database()").fetchone()
        assert row is not None  # a SELECT without FROM returns one row
        source = row[0]
        cursor.execute(f"ATTACH '{dest.replace(chr(39), chr(39) * 2)}' AS {alias}")
        try:
            cursor.execute(f'COPY FROM DATABASE "{source}" TO {alias}')
        finally:
            cursor.execute(f"DETACH {alias}")
    finally:
        if close:
            cursor.close()
    for name in (dest, dest + ".wal"):
        if os.path.exists(name):
            os.chmod(name, 0o600)
    return dest
