"""Segment files: how a recording process hands spans to a database it does not hold.

DuckDB lets one process write a file, and a process that holds it blocks every other process,
readers included. So a recording process never holds the database: its writer thread appends
each batch as a **segment**, a pair of Parquet files in the spool folder ``<db>.spool/`` beside
the database, and any process that briefly gets the lock merges the segments into the database
(:mod:`agent_rl_plugin.store.compaction`). Readers see the database plus the segments not merged
yet (:mod:`agent_rl_plugin.store.reading`).

Contract:

* :func:`write_segment` is atomic and durable: the rewards file (if any) and then the spans file
  are each written to a ``.tmp-`` name, fsynced, and renamed into place, and the folder is
  fsynced. A segment exists once its spans file does; a reader never sees a half-written file.
  Files are created 0600 in a 0700 folder, and a folder that is not private (another user's,
  a link, or writable by others) is refused: its files would be merged into the database. The pyarrow writer runs no DuckDB and no Python
  scan inside DuckDB, so it works at interpreter exit with every DuckDB version.
* Names sort in write order within a process and roughly across processes:
  ``<time ns>-<pid>-<sequence>``; a name is never reused (time, pid and a per-process counter).
* :func:`list_segments` returns the complete segments, oldest first. A rewards file without its
  spans file (a writer died between the two renames) is not a segment; :func:`remove_leftovers`
  deletes such orphans and ``.tmp-`` files once they are ten minutes old (by age, not by
  process id: another PID namespace cannot tell a live writer from a dead one).
* :func:`split_readable` tells segments whose Parquet footers read from the others, which
  :func:`quarantine` moves to ``<spool>/quarantine/``.
* :func:`remove_spool_if_empty` removes the folder when nothing is left in it (a writer racing
  with it recreates it).
* :func:`remove_file` retries a few times (Windows refuses to delete a file another process has
  open) and reports whether the file is gone.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_rl_plugin.errors import AgentRLError

if TYPE_CHECKING:  # pyarrow is imported where segments are written or read, not by readers of the store
    import pyarrow as pa

SPOOL_SUFFIX = ".spool"
SPANS_SUFFIX = ".spans.parquet"
REWARDS_SUFFIX = ".rewards.parquet"
TEMP_PREFIX = ".tmp-"
#: A temp or orphan file older than this is a dead writer's and is removed (a live writer
#: renames its files within milliseconds).
LEFTOVER_AGE_S = 600.0

_sequence = itertools.count()
_sequence_lock = threading.Lock()


#: Segments merged in one transaction (bounds the SQL text and the memory of one INSERT).
CHUNK_SEGMENTS = 256


@dataclass(frozen=True)
class Segment:
    """One complete segment: ``name`` (unique, sortable), its spans file and rewards file."""

    name: str
    spans_path: str
    rewards_path: str | None


def spool_dir(db_path: str | os.PathLike[str]) -> str:
    """The spool folder of a database: ``<db>.spool`` (absolute)."""
    return os.path.abspath(os.fspath(db_path)) + SPOOL_SUFFIX


def _new_name() -> str:
    with _sequence_lock:
        number = next(_sequence)
    return f"{time.time_ns():020d}-{os.getpid()}-{number:08d}"


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows cannot open folders; renames are durable there
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _open_new(temp: str) -> int:
    for attempt in range(3):
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except FileNotFoundError:  # the empty folder was just removed by remove_spool_if_empty
            if attempt == 2:
                raise
            os.makedirs(os.path.dirname(temp), mode=0o700, exist_ok=True)
    raise AssertionError("unreachable")  # pragma: no cover


def _write_parquet(table: pa.Table, final_path: str) -> None:
    """Encode in memory (pyarrow's C++ code, no Python callbacks), then write the bytes with a
    few ``os.write`` calls: handing pyarrow a Python file object makes it call back into Python
    for every chunk, and each call waits for the GIL, which a busy agent thread holds for up to
    the switch interval: seconds per segment under load."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder, base = os.path.split(final_path)
    temp = os.path.join(folder, TEMP_PREFIX + base)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=1)
    data = memoryview(sink.getvalue())
    fd = _open_new(temp)
    try:
        try:
            while data:
                written = os.write(fd, data)
                data = data[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, final_path)
    except BaseException:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise


class SpoolNotPrivate(AgentRLError, PermissionError):
    """The spool folder exists but another user owns it or others may write into it."""


def ensure_spool(db_path: str | os.PathLike[str]) -> str:
    """Create the spool folder (0700) if needed; returns its path. Refuses (``SpoolNotPrivate``)
    a folder that another user owns or that others can write: whatever lands in the spool is
    merged into the database, so nobody else may put files there."""
    folder = spool_dir(db_path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    check_private(folder)
    return folder


def check_private(folder: str) -> None:
    """Raise ``SpoolNotPrivate`` unless ``folder`` is ours and writable by us alone (POSIX)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # pragma: no cover - Windows: ACLs, not modes
        return
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or info.st_uid != getuid() or info.st_mode & 0o022:
        raise SpoolNotPrivate(
            f"the spool folder {folder} is not private (a link, owned by uid {info.st_uid}, or writable "
            f"by others: mode {stat.S_IMODE(info.st_mode):o}); its files would be merged into the "
            f"database, so it is not used. Fix: remove it, or keep the database in a folder of your own"
        )


def write_segment(db_path: str | os.PathLike[str], spans: pa.Table, rewards: pa.Table | None = None) -> Segment:
    """Write ``spans`` (and ``rewards``) as one new segment of ``db_path`` (see the contract).

    Raises ``OSError`` when the disk cannot take it (nothing is left behind then)."""
    folder = ensure_spool(db_path)
    name = _new_name()
    spans_path = os.path.join(folder, name + SPANS_SUFFIX)
    rewards_path = None
    if rewards is not None and rewards.num_rows:
        rewards_path = os.path.join(folder, name + REWARDS_SUFFIX)
        _write_parquet(rewards, rewards_path)
    try:
        _write_parquet(spans, spans_path)
    except BaseException:
        if rewards_path is not None:
            remove_file(rewards_path)
        raise
    _fsync_dir(folder)
    return Segment(name, spans_path, rewards_path)


def list_segments(db_path: str | os.PathLike[str]) -> list[Segment]:
    """The complete segments of ``db_path``, oldest first (empty when there is no spool; a
    folder that is not private raises ``SpoolNotPrivate``: nothing in it is merged)."""
    folder = spool_dir(db_path)
    try:
        entries = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    check_private(folder)
    files = set(entries)
    segments = []
    for entry in entries:
        if entry.startswith(TEMP_PREFIX) or not entry.endswith(SPANS_SUFFIX):
            continue
        try:
            if not stat.S_ISREG(os.lstat(os.path.join(folder, entry)).st_mode):
                continue  # a link or a folder is not a segment we wrote
        except OSError:
            continue
        name = entry[: -len(SPANS_SUFFIX)]
        rewards = name + REWARDS_SUFFIX
        segments.append(
            Segment(name, os.path.join(folder, entry), os.path.join(folder, rewards) if rewards in files else None)
        )
    segments.sort(key=lambda s: s.name)
    return segments


def remove_file(path: str, attempts: int = 5, pause_s: float = 0.05) -> bool:
    """Delete ``path``, retrying (Windows refuses while another process has it open).
    ``True`` when the file is gone afterwards."""
    for attempt in range(attempts):
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if attempt + 1 < attempts:
                time.sleep(pause_s * (attempt + 1))
    return not os.path.exists(path)


def remove_segment(segment: Segment) -> bool:
    """Delete a merged segment's files (rewards last: a spans file alone is never an orphan)."""
    gone = remove_file(segment.spans_path)
    if segment.rewards_path is not None:
        gone = remove_file(segment.rewards_path) and gone
    return gone


def remove_leftovers(db_path: str | os.PathLike[str], *, max_age_s: float = LEFTOVER_AGE_S) -> int:
    """Delete ``.tmp-`` files and orphan rewards files older than ``max_age_s``; returns how
    many were removed. By age only: a writer's process id says nothing to a process in another
    PID namespace (containers sharing a volume), which would delete a live writer's files.
    Complete segments are never touched."""
    folder = spool_dir(db_path)
    try:
        entries = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    files = set(entries)
    removed = 0
    now = time.time()
    for entry in entries:
        temp = entry.startswith(TEMP_PREFIX)
        orphan = entry.endswith(REWARDS_SUFFIX) and entry[: -len(REWARDS_SUFFIX)] + SPANS_SUFFIX not in files
        if not (temp or orphan):
            continue
        path = os.path.join(folder, entry)
        try:
            old = now - os.lstat(path).st_mtime > max_age_s
        except OSError:
            continue
        if old:
            removed += remove_file(path)
    return removed


QUARANTINE = "quarantine"


def split_readable(segments: list[Segment]) -> tuple[list[Segment], list[tuple[Segment, str]]]:
    """(segments whose Parquet footers read, [(segment, why) for the others]): a truncated or
    foreign file must not stop every merge and every reader."""
    import pyarrow.parquet as pq

    good, bad = [], []
    for segment in segments:
        try:
            for path in (segment.spans_path, segment.rewards_path):
                if path is not None:
                    pq.read_metadata(path)
        except Exception as exc:  # noqa: BLE001 - any reason it cannot be read
            bad.append((segment, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
        else:
            good.append(segment)
    return good, bad


def quarantine(db_path: str | os.PathLike[str], segment: Segment) -> str:
    """Move an unreadable segment into ``<spool>/quarantine/`` (kept for inspection, never
    merged or read again); returns that folder."""
    folder = os.path.join(spool_dir(db_path), QUARANTINE)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for path in (segment.spans_path, segment.rewards_path):
        if path is not None:
            try:
                os.replace(path, os.path.join(folder, os.path.basename(path)))
            except FileNotFoundError:
                pass
    return folder


def remove_spool_if_empty(db_path: str | os.PathLike[str]) -> bool:
    """Remove the spool folder (and its ``holders`` folder) when nothing is in them, so a
    quiet database leaves no folder beside it; ``True`` when it is gone. A writer that creates a
    segment at that moment recreates the folder."""
    folder = spool_dir(db_path)
    for path in (os.path.join(folder, "holders"), folder):
        try:
            os.rmdir(path)
        except FileNotFoundError:
            continue
        except OSError:  # not empty: in use
            return False
    return True
