"""Tables built once per test run and copied into each test that wants one (`copy_of`).

Building a Delta table costs Spark jobs and commits; copying its directory costs milliseconds. Delta's log
names data files relative to the table's directory, so a copy is a table of its own at its own path (Spark's
and Delta's caches are keyed by path), and every user gets a fresh copy: no test sees another's changes.
The root directory is the run's (`tests/conftest.py` sets it from pytest's temporary directories)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

_root: list[Path] = []


def use_root(root: Path | None) -> None:
    """Where this run keeps its templates (None: no run is active)."""
    _root.clear()
    if root is not None:
        _root.append(root)


def copy_of(name: str, dest: Path, build: Callable[[Path], object]) -> Path:
    """A copy, at `dest`, of the template `name`, which `build(directory)` makes once per run. The template
    is built aside (at a path that does not exist yet) and renamed into place, so a build that fails
    half-way is never copied."""
    if not _root:
        raise RuntimeError("no template root: tests/conftest.py's session fixture sets it")
    source = _root[0] / name
    if not source.exists():
        building = _root[0] / f".building-{name}"
        shutil.rmtree(building, ignore_errors=True)
        build(building)
        building.rename(source)
    shutil.copytree(source, dest, dirs_exist_ok=True)
    return dest
