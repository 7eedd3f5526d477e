"""Opening store files for reading and writing, shared by many processes; read-only SQL checks.

Contract:

* Recording processes never hold the file: they write spool segments beside it
  (:mod:`agent_rl_plugin.store.spool`), merged by whoever holds it next. Every opener here
  therefore first flushes this process's live recorder of that file (so everything recorded
  before the call is on disk), and waits a bounded time while another process holds the file.
* :func:`connect_writer` opens ``path`` read-write (creating it and its folder, waiting up to
  ``wait_s`` for the lock), applies the migrations, merges the spool segments and returns the
  connection: the caller holds the file until it closes it, so keep it short.
  :func:`ensure_schema` does the same and closes it, returning the migrations applied.
* :func:`open_reader` returns a connection for reading, which sees every span flushed before
  the call:

  - a ``read_only=True`` connection, after merging the spool segments when the lock can be had
    within a moment; segments it could not merge (another process reads the file) are shown
    through temporary views (:mod:`agent_rl_plugin.store.reading`). An older schema written by
    this package is upgraded first, which needs a moment of write access. While another process
    writes the file, it waits up to ``wait_s`` (default 5 s);
  - when an ``agent-rl serve`` receiver holds the file (announced in ``<db>.serve.json``), a
    cursor of its connection in its own process, and elsewhere, with ``snapshot`` true, a
    read-only connection to a consistent copy the receiver writes on request
    (:mod:`agent_rl_plugin.store.snapshots`; it costs a full copy of the file: ``agent-rl
    query`` uses the receiver's ``/query`` instead).

* Failures are :class:`~agent_rl_plugin.store.errors.StoreError`: no file ("no database at
  PATH..."), not a DuckDB file, or :class:`~agent_rl_plugin.store.lease.StoreBusy` (a
  :class:`~agent_rl_plugin.store.errors.StoreLockedError`) when another process held the lock
  for the whole wait (its PID, what it is doing and the fix are in the message).
* :func:`is_read_only_sql` says whether every statement of ``sql`` only reads.
"""

from __future__ import annotations

import json
import os
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import duckdb

from agent_rl_plugin.store.errors import StoreError, StoreLockedError
from agent_rl_plugin.store.holders import holding, note
from agent_rl_plugin.store.live_writers import (  # noqa: F401 - re-exported: the registry's old home
    WriterHandle,
    live_writer,
    register_writer,
    store_key,
    unregister_writer,
)
from agent_rl_plugin.store.spool import CHUNK_SEGMENTS, list_segments

# The lease, compaction, migrations, opening, reading and snapshots modules (and logging) are
# imported where they are used: the read-only SQL checks below and the locked user-SQL path of
# ``agent-rl query`` / ``traces list`` need none of them at start-up.


def __getattr__(name: str) -> Any:
    """``open_write_connection``, re-exported from :mod:`agent_rl_plugin.store.opening` (its old
    home), imported on first use."""
    if name == "open_write_connection":
        from agent_rl_plugin.store.opening import open_write_connection

        return open_write_connection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


NO_DATABASE = "no database at {path}: run an agent with agent-rl configured, or `agent-rl demo`"


def _flushed_cursor(path: str, flush_timeout_s: float) -> duckdb.DuckDBPyConnection | None:
    handle = live_writer(path)
    return None if handle is None else handle.reader_cursor(flush_timeout_s)


def connect_writer(
    path: str | os.PathLike[str],
    *,
    flush_timeout_s: float = 30.0,
    wait_s: float | None = None,
    what: str = "writing",
) -> duckdb.DuckDBPyConnection:
    """A read-write connection to ``path`` with every migration applied and the spool merged.
    Close it when done: other processes wait while it is open. ``what`` is what the holder note
    says (for other processes' lock messages). ``wait_s``: ``None`` is
    :data:`~agent_rl_plugin.store.lease.WRITE_WAIT_S`."""
    from agent_rl_plugin.store.compaction import merge_segments
    from agent_rl_plugin.store.lease import WRITE_WAIT_S, with_wait
    from agent_rl_plugin.store.opening import open_write_connection

    text = os.fspath(path)
    wait_s = WRITE_WAIT_S if wait_s is None else wait_s
    cursor = _flushed_cursor(text, flush_timeout_s)
    if cursor is not None:
        return cursor
    connection = with_wait(text, lambda: open_write_connection(text)[0], wait_s)
    try:
        merge_segments(connection, text)
    except BaseException:
        connection.close()
        raise
    note(text, what)
    return connection


def ensure_schema(path: str | os.PathLike[str]) -> list[str]:
    """Create ``path`` if needed and apply missing migrations; returns the names applied."""
    from agent_rl_plugin.store.lease import WRITE_WAIT_S, with_wait
    from agent_rl_plugin.store.opening import open_write_connection

    text = os.fspath(path)
    cursor = _flushed_cursor(text, 30.0)
    if cursor is not None:
        cursor.close()  # the receiver migrated on open
        return []
    with holding(text, "creating or upgrading the schema"):
        connection, applied = with_wait(text, lambda: open_write_connection(text), WRITE_WAIT_S)
    connection.close()
    return applied


def open_reader(
    path: str | os.PathLike[str],
    *,
    flush_timeout_s: float = 30.0,
    upgrade: bool = True,
    snapshot: bool = True,
    wait_s: float | None = None,
) -> duckdb.DuckDBPyConnection:
    """A connection for reading ``path`` (see the module contract). Close it when done.
    ``wait_s``: ``None`` is :data:`~agent_rl_plugin.store.lease.READ_WAIT_S`."""
    from agent_rl_plugin.store.lease import READ_WAIT_S, open_read_only, try_merge, write_lease
    from agent_rl_plugin.store.migrations import applied_migrations, pending_migrations
    from agent_rl_plugin.store.reading import overlay_unmerged
    from agent_rl_plugin.store.snapshots import announced_receiver, open_snapshot

    text = os.fspath(path)
    wait_s = READ_WAIT_S if wait_s is None else wait_s
    cursor = _flushed_cursor(text, flush_timeout_s)
    if cursor is not None:
        return cursor
    if live_writer(text) is not None and not os.path.exists(text):
        # This process records into it but nothing was written yet: an empty store, not an error.
        with write_lease(text, wait_s=wait_s, what="creating the database"):
            pass
    try:  # best effort, not waiting (and leftovers of dead writers removed): the overlay shows
        # what is not merged; the first reader of a file still being created waits for it (as
        # long as a reader waits for a lock when segments are waiting: an agent's merger may be
        # creating it, and the segments need the file to be shown).
        if os.path.exists(text):
            lease_wait_s = 0.0
        else:
            lease_wait_s = wait_s if list_segments(text) else min(1.0, wait_s)
        try_merge(text, wait_s=lease_wait_s, max_segments=CHUNK_SEGMENTS)
    except (StoreError, duckdb.Error, OSError) as exc:  # e.g. a full disk: reading still works
        import logging

        logging.getLogger("agent_rl_plugin.store").debug(
            "agent-rl: could not merge the spool of %s before reading: %s", text, exc
        )
    if not os.path.exists(text):
        raise StoreError(NO_DATABASE.format(path=text), text)
    served = snapshot and announced_receiver(text)  # it holds the file for good: do not wait
    try:
        connection = open_read_only(text, wait_s=0.0 if served else wait_s)
    except StoreLockedError:
        copy = open_snapshot(text) if snapshot else None
        if copy is None:
            raise
        return copy
    if upgrade:
        try:
            needs_upgrade = bool(applied_migrations(connection)) and bool(pending_migrations(connection))
        except duckdb.Error:
            needs_upgrade = False
        if needs_upgrade:
            connection.close()
            with write_lease(text, wait_s=wait_s, what="upgrading the schema"):
                pass
            connection = open_read_only(text, wait_s=wait_s)
    try:
        overlay_unmerged(connection, text)
    except BaseException:
        connection.close()
        raise
    note(text, "reading (an open_reader() connection)")
    return connection


# --- read-only SQL ------------------------------------------------------------------------
_READ_PRAGMAS = frozenset(
    {
        "collations",
        "database_list",
        "database_size",
        "functions",
        "metadata_info",
        "platform",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "storage_info",
        "table_info",
        "user_agent",
        "version",
    }
)
# Compiled on first use (:func:`_regex`): compiling them all costs about a millisecond at import,
# and the check of a SELECT whose parse tree DuckDB serializes needs none of them.
_PATTERNS: dict[str, tuple[str, int]] = {
    "pragma_name": (r"^\s*pragma\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE),
    "explain_prefix": (r"^\s*explain\s+(?:analy[sz]e\s+)?", re.IGNORECASE),
    "leading_comments": (r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL),
    # sql_words: strings, quoted names, comments and dollar-quoted text, else a bare word (group 1)
    "sql_tokens": (
        r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|/\*.*?(?:\*/|$)|\$\$.*?(?:\$\$|$)|([A-Za-z_][A-Za-z0-9_$]*)""",
        re.DOTALL,
    ),
}


def _regex(name: str) -> re.Pattern[str]:
    """The pattern ``name`` of :data:`_PATTERNS`, compiled (``re`` keeps the compiled patterns)."""
    pattern, flags = _PATTERNS[name]
    return re.compile(pattern, flags)


def is_read_only_sql(sql: str) -> bool:
    """True when every statement in ``sql`` only reads.

    Accepted: SELECT (incl. WITH, VALUES, FROM-first, DESCRIBE, SHOW, SUMMARIZE), EXPLAIN [ANALYZE]
    of a read-only statement, and PRAGMAs that only report (``table_info``, ``show_tables``,
    ``database_size``, ``version``, ...). Everything else (INSERT, UPDATE, DELETE, CREATE, DROP,
    ALTER, ATTACH, DETACH, COPY, EXPORT, IMPORT, SET, RESET, USE, LOAD/INSTALL, CALL, CHECKPOINT,
    VACUUM, transactions) is refused, and so is a SELECT that holds a data-modifying part anywhere
    (``WITH x AS (DELETE ... RETURNING *) SELECT ...``, also nested in subqueries: see
    :func:`modifies_data`); so is an empty string. SQL that does not parse raises the
    ``duckdb.ParserException`` (a ``duckdb.Error``).
    """
    statements = extract_statements(sql)
    if not statements:
        return False
    return all(_statement_reads_only(statement) for statement in statements)


def _statement_reads_only(statement: duckdb.Statement) -> bool:
    kind = statement.type
    if kind == duckdb.StatementType.SELECT:
        return not modifies_data(statement.query)
    text = _regex("leading_comments").sub("", statement.query)
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _regex("explain_prefix").sub("", text, count=1)
        if inner == text:
            return False
        try:
            return is_read_only_sql(inner)
        except duckdb.Error:
            return False
    if kind == duckdb.StatementType.PRAGMA:
        match = _regex("pragma_name").match(text)
        return match is not None and match.group(1).lower() in _READ_PRAGMAS
    return False


# Query nodes a reading SELECT is made of; anything else in the parse tree (DELETE_QUERY_NODE,
# INSERT_QUERY_NODE, UPDATE_QUERY_NODE, a COPY in a CTE, node types of future DuckDB versions)
# counts as data-modifying.
_READING_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
# Words that start a statement which writes, outside strings, quoted names and comments: the
# fallback when DuckDB cannot serialize a SELECT's parse tree (PIVOT statements, for one).
_WRITING_WORDS = frozenset(
    {
        "alter",
        "attach",
        "call",
        "checkpoint",
        "copy",
        "create",
        "delete",
        "detach",
        "drop",
        "export",
        "import",
        "insert",
        "install",
        "load",
        "merge",
        "pragma",
        "reset",
        "set",
        "truncate",
        "update",
        "use",
        "vacuum",
    }
)
_parser_lock = threading.Lock()
_parser: duckdb.DuckDBPyConnection | None = None
_parser_here = threading.local()  # .connection: parse_on()'s connection for this thread


@contextmanager
def parse_on(connection: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within the block, :func:`extract_statements` and :func:`parse_tree` in this thread parse on
    ``connection`` (a cursor of a locked, read-only user-SQL connection: nothing is executed but
    DuckDB's parser and ``json_serialize_sql``) instead of the private in-memory instance, which
    a command that opens such a connection anyway then does not start (start-up time)."""
    previous = getattr(_parser_here, "connection", None)
    _parser_here.connection = connection
    try:
        yield
    finally:
        _parser_here.connection = previous


def _parsing_connection() -> duckdb.DuckDBPyConnection:
    """The private in-memory connection that parses user SQL (made once; hold ``_parser_lock``)."""
    global _parser
    if _parser is None:
        _parser = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "lock_configuration": True,
            },
        )
    return _parser


def extract_statements(sql: str) -> list[duckdb.Statement]:
    """``duckdb.extract_statements(sql)``, parsed on the private connection of
    :func:`parse_tree`: the module-level function would also start DuckDB's default
    connection, a second database instance for nothing (start-up time of ``agent-rl query``).
    Raises ``duckdb.ParserException`` for SQL that does not parse."""
    here = getattr(_parser_here, "connection", None)
    if here is not None:
        return list(here.extract_statements(sql))
    with _parser_lock:
        return list(_parsing_connection().extract_statements(sql))


_trees: dict[str, dict] = {}  # the last parse trees by SQL text (check_user_sql asks twice per statement)
#: Longest SQL whose tree is kept: a served store takes SQL from users, and 8 trees of 1 MB
#: statements would stay in memory for good.
_TREE_CACHE_MAX_SQL = 20_000


def parse_tree(sql: str) -> dict | None:
    """DuckDB's own parse tree of one SELECT statement (``json_serialize_sql``) as a dict, or
    ``None`` when DuckDB cannot serialize it (not a SELECT, or a form such as PIVOT it does not
    serialize). Runs on a private in-memory connection with external access disabled; nothing
    is executed. The last few trees are kept by SQL text and shared: callers only read them."""
    tree = _trees.get(sql)
    if tree is None:
        tree = _parse_tree(sql)
        if tree is not None and len(sql) <= _TREE_CACHE_MAX_SQL:
            if len(_trees) >= 8:
                _trees.clear()
            _trees[sql] = tree
    return tree


def _parse_tree(sql: str) -> dict | None:
    here = getattr(_parser_here, "connection", None)
    try:
        if here is not None:
            row = here.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0]  # read to its end
        else:
            with _parser_lock:
                row = _parsing_connection().execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    except duckdb.Error:
        return None
    assert row is not None  # a SELECT without FROM returns one row
    try:
        tree = json.loads(row[0])
    except ValueError:
        return None
    if not isinstance(tree, dict) or tree.get("error"):
        return None
    return tree


def _query_node_types(node: object, found: set[str]) -> set[str]:
    """Every ``type`` ending in ``_NODE`` in the parse tree ``node`` (query nodes, at any depth)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_NODE"):
                found.add(kind)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def sql_words(sql: str) -> list[str]:
    """The bare words of ``sql`` (lower case), skipping strings, quoted names and comments."""
    return [match.group(1).lower() for match in _regex("sql_tokens").finditer(sql) if match.group(1)]


def modifies_data(sql: str) -> bool:
    """True when the SELECT statement ``sql`` holds a part that writes anywhere in it: a
    data-modifying CTE (``WITH x AS (DELETE FROM spans RETURNING *) SELECT * FROM x``, also
    INSERT/UPDATE/COPY, nested in subqueries or set operations). Decided on DuckDB's parse tree
    (only SELECT, set operations and CTE nodes are reading); when DuckDB cannot serialize the
    statement, conservatively on its words (any writing keyword outside strings and comments)."""
    tree = parse_tree(sql)
    if tree is None:
        return bool(_WRITING_WORDS.intersection(sql_words(sql)))
    return not _query_node_types(tree.get("statements", []), set()) <= _READING_NODES
