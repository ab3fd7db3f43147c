"""The tests' JVM class-data archive (`tests.jvm_archive`): given where it applies, silent where it does not,
never half made."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import jvm_archive


def _real_options() -> str:
    """This environment's archive options; the tests that need them skip without one, and fail under
    ``DELTAOPT_JVM_ARCHIVE=required`` (`make test`, which makes it first)."""
    options = jvm_archive.jvm_options()
    if not options:
        if os.environ.get(jvm_archive.SWITCH) == "required":
            pytest.fail("make test made no JVM class-data archive (python -m tests.jvm_archive says why)")
        pytest.skip("no archive in this environment: `make test` makes it (python -m tests.jvm_archive)")
    return options


@pytest.fixture
def empty_prefix(monkeypatch, tmp_path) -> Path:
    """An environment whose archive directory is empty: `archive_path` under `tmp_path`."""
    jvm_archive._java_version()  # the key's JDK, read once before any test replaces subprocess
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path))
    return jvm_archive.archive_path()


def test_no_archive_means_no_options(empty_prefix):
    assert jvm_archive.jvm_options() == ""


def test_the_switch_turns_an_existing_archive_off(monkeypatch, empty_prefix):
    empty_prefix.parent.mkdir(parents=True)
    empty_prefix.write_bytes(b"")
    assert f"-XX:SharedArchiveFile={empty_prefix}" in jvm_archive.jvm_options()
    monkeypatch.setenv(jvm_archive.SWITCH, "off")
    assert jvm_archive.jvm_options() == ""


def test_an_archive_the_jvm_maps_is_not_made_again(monkeypatch, empty_prefix):
    empty_prefix.parent.mkdir(parents=True)
    empty_prefix.write_bytes(b"")

    def no_training(*args, **kwargs):
        raise AssertionError("trained although the archive exists")

    monkeypatch.setattr(jvm_archive, "_maps", lambda archive: True)
    monkeypatch.setattr(jvm_archive.subprocess, "Popen", no_training)
    assert jvm_archive.build() == empty_prefix


class _FailedTraining:
    """A training driver that leaves a partial archive and exits 1."""

    def __init__(self, command, **kwargs):
        self.pid = os.getpid()
        Path(jvm_archive.archive_path().with_suffix(f".{os.getpid()}.partial")).write_bytes(b"half")

    def wait(self, timeout=None):
        return 1


def test_a_failed_training_leaves_no_archive_and_says_so(monkeypatch, empty_prefix, capsys):
    """A training driver that fails (or a JDK without dynamic archives) costs the run its speed-up only: no
    archive, no partial file, one line naming the log; an archive the JVM no longer maps is made again."""
    empty_prefix.parent.mkdir(parents=True)
    empty_prefix.write_bytes(b"")  # one the JVM does not map
    monkeypatch.setattr(jvm_archive, "_maps", lambda archive: False)
    monkeypatch.setattr(jvm_archive.subprocess, "Popen", _FailedTraining)
    assert jvm_archive.build() is None
    assert [p.name for p in empty_prefix.parent.iterdir()] == [empty_prefix.with_suffix(".log").name]
    assert "not made (training exit 1" in capsys.readouterr().err
    assert jvm_archive.jvm_options() == ""


def test_the_key_follows_the_jars(monkeypatch, tmp_path):
    """Another jar (a PySpark or Delta upgrade in the same environment, or a jar replaced in place with the same
    size and time) is another archive: a JVM never maps one made from other classes."""
    from optimizer import delta_jars

    before = jvm_archive._key()
    extra = tmp_path / "extra.jar"
    extra.write_bytes(b"PK")
    cached = delta_jars.cached_jars() or []
    monkeypatch.setattr(delta_jars, "cached_jars", lambda: [*cached, extra])
    with_extra = jvm_archive._key()
    assert with_extra != before
    stat = extra.stat()
    extra.unlink()
    extra.write_bytes(b"PQ")  # same size; a new inode
    os.utime(extra, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert jvm_archive._key() != with_extra


def test_spark_submit_maps_spark_s_classes_from_the_archive(tmp_path):
    """The drivers' class path as spark-submit builds it matches the archive's: Spark's classes come from it,
    and nothing is said about it on either stream (the CLI's JVM shares its stdout)."""
    options = _real_options()
    loaded = tmp_path / "classes.log"
    submit = jvm_archive._spark_home() / "bin" / "spark-submit"
    plain = subprocess.run([str(submit), "--version"], capture_output=True, text=True, check=False)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{options} -Xlog:class+load=info:file={loaded}"}
    done = subprocess.run([str(submit), "--version"], capture_output=True, text=True, env=env, check=False)
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout)
    assert [line for line in done.stderr.splitlines() if "cds" in line.lower() or "archive" in line.lower()] == []
    source = {line.split()[1]: line.split("source: ")[-1] for line in loaded.read_text().splitlines()}
    # the class every driver starts in; classes the training driver never loaded are read from the jars
    assert source.get("org.apache.spark.deploy.SparkSubmit") == "shared objects file (top)"


def test_a_jvm_on_another_class_path_runs_without_a_word(tmp_path):
    """Where the archive does not match (another class path), the JVM loads from the jars and says nothing on
    either stream."""
    options = _real_options()
    plain = subprocess.run(["java", "-cp", str(tmp_path), "-version"], capture_output=True, text=True)
    done = subprocess.run(["java", *options.split(), "-cp", str(tmp_path), "-version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_an_archive_cut_short_is_not_mapped(tmp_path):
    """`build` probes an archive before it is used: a file cut short would stop every JVM that maps it."""
    options = _real_options()
    archive = Path(options.split("-XX:SharedArchiveFile=")[1].split()[0])
    assert jvm_archive._maps(archive)
    cut = tmp_path / "cut.jsa"
    with open(archive, "rb") as whole:
        cut.write_bytes(whole.read(1 << 20))
    assert not jvm_archive._maps(cut)
