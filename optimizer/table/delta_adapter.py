"""The one place that knows how Delta's JVM members are called, per Delta release: probed by reflection.

deltaopt calls Delta's internals through py4j (`optimizer.table.delta_engine`, `optimizer.table.deltaspark`,
`optimizer.table.delta_writer`). A few of their shapes changed between the supported releases
(/work/shared findings; delta-io/delta at v3.2.1 … v4.4.0):

* ``DeltaLog.getSnapshotAt``: ``(long, Option)`` in 3.2, ``(long, Option, Option)`` in 3.3/4.0,
  ``(long, Option, Option, boolean)`` from 4.1; ``DeltaLog.update``: ``(boolean, Option)`` in 3.2, one more
  ``Option`` from 3.3;
* ``AddFile``'s constructor: 11 parameters up to 4.3, 13 in 4.4 (two trailing ``Option`` ones);
* ``DeltaOperations.Optimize``: 4 parameters in 3.2, 5 (``isFull``) from 3.3.

Which one a session has is read from the JVM's own classes (``getMethods``/``getConstructors``), never
from a version string, so vendor builds (``3.3.2-amzn-2``, Databricks' ``tahoe`` package) are judged by
what they are. The probe runs once per JVM and Delta package, when the first committer or engine is
built for a session: before any file is written. A member missing or of an unknown shape is one
`SparkRuntimeError` naming Delta's version and the member, with the supported matrix.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from optimizer.delta_jars import SUPPORTED  # the one statement of the supported matrix
from optimizer.errors import SparkRuntimeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# members whose shape is the same in every supported release: (class, member, parameter count)
REQUIRED: tuple[tuple[str, str, int], ...] = (
    ("DeltaLog", "forTable", 2),
    ("DeltaLog", "createDataFrame", 4),
    ("DeltaLog", "startTransaction", 2),
    ("OptimisticTransaction", "trackFilesRead", 1),
    ("OptimisticTransaction", "writeFiles", 4),
    ("OptimisticTransaction", "registerSQLMetrics", 2),
    ("OptimisticTransaction", "commit", 3),
    ("RowTracking", "isEnabled", 2),
    ("RowTracking", "preserveRowTrackingColumns", 2),
    ("RowTracking$", "addPreservedRowTrackingTagIfNotSet", 2),
    ("actions.AddFile", "removeWithTimestamp", 2),
    ("DeltaOptions", "<init>", 2),
)
# AddFile's leading parameters (simple type names); later releases append only Options
ADD_FILE_FIELDS: tuple[str, ...] = ("String", "Map", "long", "long", "boolean", "String", "Map")
ADD_FILE_FIELDS += ("DeletionVectorDescriptor", "Option", "Option", "Option")  # vector, 2 row ids, clustering
OPTIMIZE_FIELDS = ("Seq", "Seq", "boolean", "Option", "boolean")  # predicate, zOrderBy, auto, clusterBy, isFull


@dataclass(frozen=True)
class DeltaShapes:
    """How this JVM's Delta is called where releases differ (parameter types after the first, counts)."""

    package: str
    version: str
    snapshot_params: tuple[str, ...]  # getSnapshotAt's parameters after the version: Options, maybe a boolean
    update_params: int  # DeltaLog.update's parameter count (2 or 3)
    add_file_params: int  # AddFile's constructor parameter count (11, or 13 from 4.4)
    optimize_params: int  # DeltaOperations.Optimize's parameter count (4, or 5 with isFull)

    def snapshot_at(self, log: Any, version: int, none: Any) -> Any:
        """``log.getSnapshotAt(version)`` with Scala's defaults (None, false) for the other parameters."""
        return log.getSnapshotAt(version, *[False if t == "boolean" else none for t in self.snapshot_params])

    def update(self, log: Any, none: Any) -> Any:
        """``log.update()``: the latest snapshot, not a stale one."""
        return log.update(False, *[none] * (self.update_params - 1))

    def add_file(self, delta: Any, none: Any, fields: Sequence[Any]) -> Any:
        """``AddFile`` from its 11 fields common to every release; later ones (4.4) are None."""
        if len(fields) != len(ADD_FILE_FIELDS):
            raise ValueError(f"AddFile takes {len(ADD_FILE_FIELDS)} fields here, not {len(fields)}")
        return delta.actions.AddFile(*fields, *[none] * (self.add_file_params - len(fields)))

    def optimize(self, delta: Any, none: Any, predicate: Any, z_order_by: Any, cluster_by: Any) -> Any:
        """``DeltaOperations.Optimize`` of a manual, not full, OPTIMIZE (3.2 has no ``isFull``; parameters
        a later release appends are Options, None here)."""
        values = [predicate, z_order_by, False, cluster_by, False][: self.optimize_params]
        return getattr(delta, "DeltaOperations$Optimize")(*values, *[none] * (self.optimize_params - len(values)))


def _types(member: Any) -> tuple[str, ...]:
    return tuple(str(t.getName()) for t in member.getParameterTypes())


def _simple(types: Iterable[str]) -> tuple[str, ...]:
    return tuple(t.rsplit(".", 1)[-1] for t in types)


def _by_name(cls: Any) -> dict[str, list[Any]]:
    """`cls`'s public methods by name, its constructors under ``<init>`` (one py4j call per member)."""
    found: dict[str, list[Any]] = {"<init>": list(cls.getConstructors())}
    for method in cls.getMethods():
        found.setdefault(str(method.getName()), []).append(method)
    return found


class _Probe:
    """Reflection over one Delta package; `fail` raises the one-line error naming the member."""

    def __init__(self, load: Callable[[str], Any], package: str, version: str) -> None:
        self.load, self.package, self.version = load, package, version
        self.classes: dict[str, dict[str, list[Any]]] = {}

    def fail(self, member: str, found: Sequence[tuple[str, ...]] = ()) -> SparkRuntimeError:
        seen = "; found " + ", ".join(f"({', '.join(_simple(t))})" for t in found) if found else ""
        return SparkRuntimeError(
            f"Delta {self.version} ({self.package}) is not supported: {member} is missing or has another "
            f"shape{seen}; supported: {SUPPORTED}"
        )

    def members(self, cls: str, name: str) -> list[tuple[str, ...]]:
        """The parameter types of `cls`'s public members called `name`, shortest first: the Scala-public
        overload is the shortest (``private[delta]`` ones, public in bytecode, take more)."""
        if cls not in self.classes:
            try:
                self.classes[cls] = _by_name(self.load(f"{self.package}.{cls}"))
            except Exception as err:  # ClassNotFoundException through py4j
                raise self.fail(f"class {cls}") from err
        return sorted((_types(m) for m in self.classes[cls].get(name, [])), key=len)

    def require(self, cls: str, name: str, count: int) -> None:
        found = self.members(cls, name)
        if not any(len(t) == count for t in found):
            raise self.fail(f"{cls}.{name} with {count} parameters", found)

    def leading(self, cls: str, name: str, first: str, rest: set[str]) -> tuple[str, ...]:
        """The shortest overload's parameters after `first`, each of a type in `rest`."""
        found = self.members(cls, name)
        if not found or found[0][:1] != (first,) or not set(found[0][1:]) <= rest:
            raise self.fail(f"{cls}.{name}({first}, Option...)", found[:3])
        return found[0][1:]

    def constructor(self, cls: str, fields: tuple[str, ...], optional: int, extra: str) -> int:
        """The parameter count of `cls`'s constructor: `fields` (the last `optional` of them may be
        absent), then only parameters of type `extra`."""
        found = self.members(cls, "<init>")
        for types in found:
            simple = _simple(types)
            n = min(len(simple), len(fields))
            if n >= len(fields) - optional and simple[:n] == fields[:n] and set(simple[n:]) <= {extra}:
                return len(types)
        raise self.fail(f"{cls}({', '.join(fields)})", found)


def probe(load: Callable[[str], Any], package: str, version: str) -> DeltaShapes:
    """The call shapes of the Delta classes `load` returns (``Class.forName``, or stand-ins in tests);
    raises `SparkRuntimeError` naming `version` and the first member missing."""
    p = _Probe(load, package, version)
    for cls, name, count in REQUIRED:
        p.require(cls, name, count)
    return DeltaShapes(
        package=package,
        version=version,
        snapshot_params=p.leading("DeltaLog", "getSnapshotAt", "long", {"scala.Option", "boolean"}),
        update_params=1 + len(p.leading("DeltaLog", "update", "boolean", {"scala.Option"})),
        add_file_params=p.constructor("actions.AddFile", ADD_FILE_FIELDS, 0, "Option"),
        optimize_params=p.constructor("DeltaOperations$Optimize", OPTIMIZE_FIELDS, 1, "Option"),
    )


_PROBED: weakref.WeakKeyDictionary[Any, dict[str, DeltaShapes]] = weakref.WeakKeyDictionary()


def shapes_for(spark: SparkSession, package: str) -> DeltaShapes:
    """`probe` of `package` in `spark`'s JVM, once per JVM (cached on its py4j view)."""
    jvm = spark._jvm
    cached = _PROBED.setdefault(jvm, {})
    if package not in cached:
        cached[package] = probe(class_loader(jvm), package, delta_version(jvm, package))
    return cached[package]


def class_loader(jvm: Any) -> Callable[[str], Any]:
    """``Class.forName`` through the loader that sees ``spark.jars`` (the context class loader)."""
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return lambda name: jvm.java.lang.Class.forName(name, False, loader)


def delta_version(jvm: Any, package: str) -> str:
    """Delta's release as its jar's manifest states it (for messages; shapes never depend on it)."""
    try:
        found = class_loader(jvm)(f"{package}.DeltaLog").getPackage().getImplementationVersion()
        if found:
            return str(found)
        return str(jvm.io.delta.package.VERSION())
    except Exception:  # no manifest entry, no io.delta.package (Databricks): the version is only for messages
        return "of unknown version"
