"""The tests' JVM class-data archive (`tests.jvm_archive`): given where it applies, absent where it cannot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import jvm_archive


def test_no_archive_means_no_options(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path))
    assert jvm_archive.jvm_options() == ""


def test_the_switch_turns_an_existing_archive_off(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path))
    made = jvm_archive.archive_path()
    made.parent.mkdir(parents=True)
    made.write_bytes(b"")
    assert f"-XX:SharedArchiveFile={made}" in jvm_archive.jvm_options()
    monkeypatch.setenv(jvm_archive.SWITCH, "off")
    assert jvm_archive.jvm_options() == ""


def test_an_existing_archive_is_not_made_again(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path))
    made = jvm_archive.archive_path()
    made.parent.mkdir(parents=True)
    made.write_bytes(b"")

    def no_training(*args, **kwargs):
        raise AssertionError("trained although the archive exists")

    jvm_archive._java_version()  # the key's JDK, read once
    monkeypatch.setattr(jvm_archive.subprocess, "run", no_training)
    assert jvm_archive.build() == made


def test_the_key_follows_the_jars(monkeypatch, tmp_path):
    """Another jar (a PySpark or Delta upgrade in the same environment) is another archive: a JVM never maps
    one made from other classes (the JVM would refuse it, silently, and the run would only be slower)."""
    from optimizer import delta_jars

    before = jvm_archive._key()
    extra = tmp_path / "extra.jar"
    extra.write_bytes(b"PK")
    cached = delta_jars.cached_jars() or []
    monkeypatch.setattr(delta_jars, "cached_jars", lambda: [*cached, extra])
    assert jvm_archive._key() != before


def test_spark_submit_maps_spark_s_classes_from_the_archive(tmp_path):
    """The drivers' class path as spark-submit builds it matches the archive's: Spark's classes come from it."""
    options = jvm_archive.jvm_options()
    if not options:
        pytest.skip("no archive in this environment: `make test` makes it (python -m tests.jvm_archive)")
    loaded = tmp_path / "classes.log"
    import pyspark

    submit = Path(pyspark.__file__).with_name("bin") / "spark-submit"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{options} -Xlog:class+load=info:file={loaded}"}
    done = subprocess.run([str(submit), "--version"], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    source = {line.split()[1]: line.split("source: ")[-1] for line in loaded.read_text().splitlines()}
    # the class every driver starts in; classes the training driver never loaded are read from the jars
    assert source.get("org.apache.spark.deploy.SparkSubmit") == "shared objects file (top)", source.get(
        "org.apache.spark.deploy.SparkSubmit"
    )
    assert not any("cds" in line.lower() for line in done.stderr.splitlines()), done.stderr[-500:]


def test_a_jvm_on_another_class_path_runs_without_a_word(tmp_path):
    """Where the archive does not match (another class path), the JVM loads from the jars and says nothing."""
    options = jvm_archive.jvm_options()
    if not options:
        pytest.skip("no archive in this environment: `make test` makes it (python -m tests.jvm_archive)")
    plain = subprocess.run(["java", "-cp", str(tmp_path), "-version"], capture_output=True, text=True)
    done = subprocess.run(["java", *options.split(), "-cp", str(tmp_path), "-version"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (plain.returncode, plain.stderr)


def test_a_failed_training_leaves_no_archive_and_says_so(monkeypatch, tmp_path, capsys):
    """A training driver that fails (or a JDK without dynamic archives) costs the run its speed-up only: no
    archive, no partial file mapped later, one line naming the log."""
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path))
    jvm_archive._java_version()

    def failing(command, **kwargs):
        Path(str(jvm_archive.archive_path().with_suffix(f".{os.getpid()}.partial"))).write_bytes(b"half")
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(jvm_archive.subprocess, "run", failing)
    assert jvm_archive.build() is None
    assert [p.name for p in jvm_archive.archive_path().parent.iterdir()] == [
        jvm_archive.archive_path().with_suffix(".log").name
    ]
    assert "not made (training exit 1" in capsys.readouterr().err
    assert jvm_archive.jvm_options() == ""
