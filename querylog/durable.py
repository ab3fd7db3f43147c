"""Durable, all-or-nothing file replacement, for the small local files that must survive a crash
(recorder spills and id, the service's per-table state)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write `path` through the yielded file: it is written and fsynced under a temporary name, then
    renamed over `path`, so a crash leaves either the old content or the new, never a torn file."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, mode) as sink:
        yield sink
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(temporary, path)
