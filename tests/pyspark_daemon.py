"""The test session's PySpark daemon (``spark.python.daemon.module``, set in tests/conftest.py): PySpark's own
`pyspark.daemon`, with zip archives on the import path re-read only when they changed.

Every Python task begins with ``importlib.invalidate_caches()`` (`pyspark.worker_util.setup_spark_files`), and
on Python 3.11 that makes each zip importer read its archive's whole directory again, pyspark.zip's (3 MB)
among them, where PySpark is installed from pip. That was 79% of the Python workers' CPU in a profiled default run
(py-spy, 286 s at 10 Hz for one of the two test sessions). An archive whose size and modification time are
unchanged has the same directory, so it is not read again; a changed one is, as before. Nothing else differs:
the same manager, the same worker module, the same tasks."""

from __future__ import annotations

import importlib
import os
import runpy
import zipimport

_reread = zipimport.zipimporter.invalidate_caches


def _stamp(archive: str) -> tuple[int, int] | None:
    try:
        found = os.stat(archive)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def _invalidate_when_changed(self: zipimport.zipimporter) -> None:
    """`zipimporter.invalidate_caches`, skipped while the archive is the one last read."""
    stamp = _stamp(self.archive)
    if stamp is not None and getattr(self, "_read_at", None) == stamp:
        return
    _reread(self)
    self._read_at = stamp  # type: ignore[attr-defined]


zipimport.zipimporter.invalidate_caches = _invalidate_when_changed  # type: ignore[method-assign]

if __name__ == "__main__":
    importlib.import_module("pyspark.worker")  # what the daemon imports first, so its forked workers inherit
    importlib.invalidate_caches()  # the archives' stamps, taken once here rather than in every worker
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
