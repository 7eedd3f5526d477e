"""What user SQL raises (:mod:`agent_rl_plugin.store.user_sql` re-exports these), and the size
wall every user-SQL surface applies before parsing.

:func:`check_sql_size` refuses SQL that DuckDB could spend minutes **planning**, where no time
limit reaches (``connection.interrupt()`` stops execution, not planning: 30,000 ``UNION ALL``
planned for minutes): more than :data:`MAX_SQL_CHARS` characters, or more than
:data:`MAX_SET_OPERATIONS` UNION / INTERSECT / EXCEPT (counted as words, string literals
included: a conservative count). It raises :class:`SqlTooBig`.
"""

from __future__ import annotations

import re

from agent_rl_plugin.errors import AgentRLError

MAX_SQL_CHARS = 1_000_000
MAX_SET_OPERATIONS = 256
_SET_OPERATION = re.compile(r"\b(?:union|intersect|except)\b", re.IGNORECASE)


class UserSqlError(AgentRLError, ValueError):
    """User SQL refused or failed; ``str(error)`` says why, ``hint`` the fix."""


class SqlRefused(UserSqlError):
    """The SQL would write, or read files, URLs or SQL strings: refused before it ran."""


class SqlTooBig(SqlRefused):
    """The SQL is too long, or combines too many results, to be planned in bounded time."""


class QueryTimeout(UserSqlError):
    """The query ran past its time limit and was interrupted."""


class QueryCancelled(UserSqlError):
    """The query was interrupted because ``cancel()`` said so (the client went away)."""


def check_sql_size(sql: str) -> None:
    """Refuse ``sql`` when it is too big to plan in bounded time (see the module contract)."""
    if len(sql) > MAX_SQL_CHARS:
        raise SqlTooBig(
            f"the query is {len(sql):,} characters long; user SQL may be at most {MAX_SQL_CHARS:,}",
            "shorten it (select rows by a condition rather than by listing them)",
        )
    set_operations = len(_SET_OPERATION.findall(sql))
    if set_operations > MAX_SET_OPERATIONS:
        raise SqlTooBig(
            f"the query combines {set_operations} results with UNION/INTERSECT/EXCEPT; at most "
            f"{MAX_SET_OPERATIONS} are allowed",
            "combine fewer results, e.g. with IN (...) or a VALUES list",
        )
