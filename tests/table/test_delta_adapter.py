"""Delta's JVM members reached through one adapter that probes their shapes by reflection (issue 46):
the real session's shapes, each supported release's shapes from stand-in class listings, and a Delta
lacking a member refused in one line before `optimize` writes anything."""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from typing import Any

import pytest

from optimizer import errors
from optimizer.table import delta_adapter
from optimizer.table.delta_adapter import DeltaShapes, probe

P = "org.apache.spark.sql.delta"
OPT, SEQ, MAP, STR = "scala.Option", "scala.collection.immutable.Seq", "scala.collection.immutable.Map", "String"
ADD_11 = (STR, MAP, "long", "long", "boolean", STR, MAP, f"{P}.actions.DeletionVectorDescriptor", OPT, OPT, OPT)


@dataclass(frozen=True)
class FakeType:
    """Stands in for ``java.lang.Class`` as a parameter type."""

    name: str

    def getName(self) -> str:
        return self.name


@dataclass(frozen=True)
class FakeMember:
    """Stands in for ``java.lang.reflect.Method`` / ``Constructor``."""

    name: str
    types: tuple[str, ...]

    def getName(self) -> str:
        return self.name

    def getParameterTypes(self) -> list[FakeType]:
        return [FakeType(t) for t in self.types]


@dataclass
class FakeClass:
    """Stands in for a ``java.lang.Class`` listed by reflection."""

    methods: list[FakeMember] = field(default_factory=list)
    constructors: list[FakeMember] = field(default_factory=list)

    def getMethods(self) -> list[FakeMember]:
        return self.methods

    def getConstructors(self) -> list[FakeMember]:
        return self.constructors


def listing(snapshot: tuple[tuple[str, ...], ...], update: tuple[str, ...], add: tuple[str, ...], optimize: int):
    """Delta's classes as reflection lists them, with the release-specific shapes given."""
    spark, conf, catalog = "org.apache.spark.sql.SparkSession", "org.apache.spark.sql.internal.SQLConf", OPT
    log = [FakeMember("forTable", (spark, STR)), FakeMember("createDataFrame", ("x",) * 4)]
    log += [FakeMember("startTransaction", (catalog, OPT)), FakeMember("update", update)]
    log += [FakeMember("getSnapshotAt", types) for types in snapshot]
    txn = [FakeMember("trackFilesRead", (SEQ,)), FakeMember("writeFiles", ("d", OPT, "boolean", SEQ))]
    txn += [FakeMember("writeFiles", ("d",)), FakeMember("registerSQLMetrics", (spark, MAP))]
    txn += [FakeMember("commit", (SEQ, "op", MAP)), FakeMember("commit", (SEQ, "op"))]
    tracking = [FakeMember("isEnabled", ("p", "m")), FakeMember("preserveRowTrackingColumns", ("d", "s"))]
    removing = [FakeMember("removeWithTimestamp", ("long", "boolean"))]
    operation = (SEQ, SEQ, "boolean", OPT, "boolean")[:optimize]
    return {
        f"{P}.DeltaLog": FakeClass(log),
        f"{P}.OptimisticTransaction": FakeClass(txn),
        f"{P}.RowTracking": FakeClass(tracking),
        f"{P}.RowTracking$": FakeClass([FakeMember("addPreservedRowTrackingTagIfNotSet", ("s", MAP))]),
        f"{P}.actions.AddFile": FakeClass(removing, [FakeMember("<init>", add)]),
        f"{P}.DeltaOptions": FakeClass([], [FakeMember("<init>", (MAP, conf))]),
        f"{P}.DeltaOperations$Optimize": FakeClass([], [FakeMember("<init>", operation)]),
    }


SNAP_41 = ("long", OPT, OPT, "boolean")  # 4.1+: enforceTimeTravelWithinDeletedFileRetention
RELEASES = {  # what javap shows of each release (versions findings, section 2a)
    "3.2.1": listing((("long", OPT), ("long", OPT, OPT)), ("boolean", OPT), ADD_11, 4),
    "4.0.1": listing((("long", OPT, OPT), ("long", OPT, OPT, OPT)), ("boolean", OPT, OPT), ADD_11, 5),
    "4.3.1": listing((SNAP_41, ("long", OPT, OPT, OPT, "boolean")), ("boolean", OPT, OPT), ADD_11, 5),
    "4.4.0": listing((SNAP_41,), ("boolean", OPT, OPT), (*ADD_11, OPT, OPT), 5),
}


def loader(classes: dict[str, FakeClass]):
    def load(name: str) -> FakeClass:
        if name not in classes:
            raise LookupError(f"ClassNotFoundException: {name}")
        return classes[name]

    return load


class Recorder:
    """A py4j object standing in for DeltaLog / the Delta package: records the arguments of each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "actions":
            return self
        return lambda *args: self.calls.append((name, args)) or name


@pytest.mark.parametrize(
    ("release", "snapshot_args", "update_args", "add_extra", "optimize_args"),
    [
        ("3.2.1", ("N",), ("N",), 0, 4),
        ("4.0.1", ("N", "N"), ("N", "N"), 0, 5),
        ("4.3.1", ("N", "N", False), ("N", "N"), 0, 5),
        ("4.4.0", ("N", "N", False), ("N", "N"), 2, 5),
    ],
)
def test_each_release_is_called_as_its_classes_say(release, snapshot_args, update_args, add_extra, optimize_args):
    shapes = probe(loader(RELEASES[release]), P, release)
    log, delta = Recorder(), Recorder()
    shapes.snapshot_at(log, 7, "N")
    shapes.update(log, "N")
    shapes.add_file(delta, "N", tuple(range(11)))
    shapes.optimize(delta, "N", "pred", "z", "N")
    assert log.calls == [("getSnapshotAt", (7, *snapshot_args)), ("update", (False, *update_args))]
    assert delta.calls[0] == ("AddFile", (*range(11), *("N",) * add_extra))
    assert delta.calls[1] == ("DeltaOperations$Optimize", ("pred", "z", False, "N", False)[:optimize_args])


@pytest.mark.parametrize(
    ("cls", "member", "named"),
    [
        ("OptimisticTransaction", "commit", "OptimisticTransaction.commit with 3 parameters"),
        ("DeltaLog", "getSnapshotAt", "DeltaLog.getSnapshotAt(long, Option...)"),
        ("RowTracking$", "addPreservedRowTrackingTagIfNotSet", "RowTracking$.addPreservedRowTrackingTagIfNotSet"),
    ],
)
def test_a_release_without_a_member_is_refused_in_one_line_naming_it(cls, member, named):
    classes = listing((("long", OPT, OPT),), ("boolean", OPT, OPT), ADD_11, 5)
    listed = classes[f"{P}.{cls}"]
    listed.methods = [m for m in listed.methods if m.name != member]
    with pytest.raises(errors.SparkRuntimeError) as refused:
        probe(loader(classes), P, "9.9.9")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Delta 9.9.9 ({P}) is not supported: {named}")
    assert "Spark 3.5 + Delta 3.2/3.3 (Scala 2.12)" in message and "Spark 4.2 + Delta 4.4" in message


def test_an_unknown_constructor_or_class_is_refused_too():
    classes = listing((("long", OPT, OPT),), ("boolean", OPT, OPT), (*ADD_11[:10], "long"), 5)
    with pytest.raises(errors.SparkRuntimeError, match=r"actions.AddFile\(String, Map, .*found \(String"):
        probe(loader(classes), P, "9.9.9")
    del classes[f"{P}.DeltaOptions"]
    with pytest.raises(errors.SparkRuntimeError, match="is not supported: class DeltaOptions is missing"):
        probe(loader(classes), P, "9.9.9")


# The session's Delta: 4.0.1 in the default environment, the pair's in `make test-matrix`'s (tests/matrix)
SESSION_DELTA = os.environ.get("DELTAOPT_MATRIX_PAIR", "4.0.5/4.0.1").split("/")[1]
LIVE_SHAPES = {  # release line -> (getSnapshotAt's parameters after the version, update's, AddFile's, Optimize's)
    "3.2": ((OPT,), 2, 11, 4),
    "3.3": ((OPT, OPT), 3, 11, 5),
    "4.0": ((OPT, OPT), 3, 11, 5),
    "4.2": ((OPT, OPT, "boolean"), 3, 11, 5),
    "4.3": ((OPT, OPT, "boolean"), 3, 11, 5),
    "4.4": ((OPT, OPT, "boolean"), 3, 13, 5),
}


@pytest.mark.spark
def test_the_session_probe_finds_its_deltas_shapes(delta_spark):
    shapes = delta_adapter.shapes_for(delta_spark, P)
    line = ".".join(SESSION_DELTA.split(".")[:2])
    assert shapes == DeltaShapes(P, SESSION_DELTA, *LIVE_SHAPES[line])
    assert delta_adapter.shapes_for(delta_spark, P) is shapes  # probed once per JVM
    from optimizer.runtime import runtime_info

    assert f"Delta engine loaded ({SESSION_DELTA})" in runtime_info(delta_spark).describe()


class Hiding:
    """A real ``java.lang.Class`` whose reflection leaves out the methods named `hidden`."""

    def __init__(self, cls: Any, hidden: str) -> None:
        self.cls, self.hidden = cls, hidden

    def getMethods(self) -> list[Any]:
        return [m for m in self.cls.getMethods() if m.getName() != self.hidden]

    def getConstructors(self) -> Any:
        return self.cls.getConstructors()

    def getPackage(self) -> Any:
        return self.cls.getPackage()


@pytest.mark.spark
def test_optimize_with_a_delta_lacking_a_member_fails_before_any_file_is_written(delta_spark, tmp_path, monkeypatch):
    from optimizer.clustering import optimize
    from optimizer.features import FeatureSet, ZFeature
    from optimizer.table import open_table

    path = str(tmp_path / "t")
    delta_spark.range(2000).selectExpr("id", "id % 13 AS x").repartition(4).write.format("delta").save(path)
    before, log_before = sorted(os.listdir(path)), sorted(os.listdir(os.path.join(path, "_delta_log")))
    real = delta_adapter.class_loader

    def hiding_commit(jvm: Any):
        load = real(jvm)
        return lambda name: Hiding(load(name), "commit") if name.endswith(".OptimisticTransaction") else load(name)

    monkeypatch.setattr(delta_adapter, "_PROBED", weakref.WeakKeyDictionary())  # a JVM not probed yet
    monkeypatch.setattr(delta_adapter, "class_loader", hiding_commit)
    table = open_table(path)
    with pytest.raises(errors.SparkRuntimeError) as refused:
        optimize(delta_spark, table, FeatureSet(z=(ZFeature("x"),)), 1 << 30)
    assert str(refused.value).startswith(
        f"Delta {SESSION_DELTA} ({P}) is not supported: OptimisticTransaction.commit with 3"
    )
    assert sorted(os.listdir(path)) == before  # nothing staged under the table
    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == log_before
    assert table.snapshot().version == 0
