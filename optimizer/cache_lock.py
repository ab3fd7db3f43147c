"""A lock on a jar cache that several processes share. Spark resolves jars with Ivy, which has no lock of its
own: two processes resolving into one directory write the same files, and one reading it mid-retrieval takes
some jars without the rest (docs/DELTA-SPARK.md). So a fetch holds an advisory ``flock`` on
``<directory>.lock`` beside the cache, exclusive while resolving and shared while reading; a process that dies
releases it. The JVM a fetch starts to resolve does not hold it, and PySpark's ignores Ctrl-C: stopped that
way, a fetch's JVM may go on writing after the lock is free (the connector's ``resolving`` mark keeps
sessions off that cache, `optimizer.store_jars.cached_store_jars`). Where locks are unavailable (the file
cannot be made in an environment that is not writable, where nothing resolves either; a file system without
``flock``, as some NFS mounts; no ``fcntl``) the cache is used unlocked, as it was before the lock."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from optimizer.errors import SparkRuntimeError

# a resolution of Delta's jars or the S3A connector takes seconds to a few minutes; a holder past this is stuck
WAIT_SECONDS = 900.0
POLL_SECONDS = 0.2


@contextmanager
def locked(directory: Path, *, exclusive: bool, wait_seconds: float = WAIT_SECONDS) -> Iterator[None]:
    """Holds the lock of the cache `directory` for the block. Raises `SparkRuntimeError` naming the lock file
    when another process holds it for longer than `wait_seconds`."""
    path = directory.parent / f"{directory.name}.lock"
    handle = _open(path)
    try:
        if handle is not None and not _acquire(handle, exclusive, wait_seconds):
            raise SparkRuntimeError(
                f"another process has held {path} for {wait_seconds:.0f} s while fetching jars into {directory};"
                " stop it, or wait for it to finish"
            )
        yield
    finally:
        if handle is not None:
            os.close(handle)  # releases the lock


def _open(path: Path) -> int | None:
    """The lock file, made if missing (read-only where it exists but is not ours to write); None where it
    cannot be opened at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags, 0o666)
        except OSError:
            continue
    return None


def _acquire(handle: int, exclusive: bool, wait_seconds: float) -> bool:
    """Whether the lock was taken, or locks are unavailable here (True: go on unlocked); False after
    `wait_seconds` of another process holding it."""
    try:
        import fcntl
    except ImportError:
        return True
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(handle, mode)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
        except OSError:  # no flock on this file system
            return True
