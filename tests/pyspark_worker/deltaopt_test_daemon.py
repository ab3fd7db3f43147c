"""The test session's PySpark daemon (``spark.python.daemon.module``, set in tests/conftest.py): PySpark's own
`pyspark.daemon`, with zip archives on the import path re-read only when they changed.

Every Python task begins with ``importlib.invalidate_caches()`` (`pyspark.worker_util.setup_spark_files` in
PySpark 4, `pyspark.worker.main` in 3.5), and on Python 3.11 and 3.12 that makes each zip importer read its
archive's whole directory again, pyspark.zip's (3 MB) among them, where PySpark is installed from pip: 79% of
the Python workers' CPU in a profiled default run (py-spy, 286 s at 10 Hz for one of the two test sessions;
about 0.1 s a task). An archive whose file is the same (device, inode, size, modification and change times)
has the same directory, so it is not read again; any other is, as before. The tests add no archives (no
``addPyFile``); the only ones on the path are PySpark's and py4j's, which a run never changes.

What differs from PySpark's daemon: this module is ``__main__`` (run by the JVM as ``python -m
deltaopt_test_daemon`` with this directory on the workers' PYTHONPATH; a name of its own, so a ``tests``
package in the directory pytest runs from cannot shadow it), and the workers can import from this directory.
The manager, the worker module and the tasks are PySpark's."""

from __future__ import annotations

import importlib
import os
import runpy
import zipimport

_reread = zipimport.zipimporter.invalidate_caches


def _stamp(archive: str) -> tuple[int, ...] | None:
    try:
        found = os.stat(archive)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _invalidate_when_changed(self: zipimport.zipimporter) -> None:
    """`zipimporter.invalidate_caches`, skipped while the archive is the file last read (each importer keeps
    its own directory, an importer of a path inside the archive too, so each keeps its own stamp)."""
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
