"""What one OPTIMIZE run reports, whoever rewrote the files (deltaopt's job or Delta's own commands)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from optimizer.config_types import LiquidMode
from optimizer.features import FeatureSet

if TYPE_CHECKING:
    from optimizer.table.rewrite_path import RewritePath


@dataclass(frozen=True)
class LiquidOutcome:
    """What a liquid table's run wanted and did with its clustering keys (the result's ``liquid``)."""

    mode: LiquidMode
    keys: list[str]
    wanted: list[str]
    changed: bool

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "keys": self.keys, "wanted": self.wanted, "changed": self.changed}


@dataclass(frozen=True)
class DeltaCommandResult:
    """What Delta's own commands did in one run (`clustering.by_delta`): the keys laid out by, what they
    cannot express, a liquid table's keys before and after, and what the commits' metrics say."""

    keys: list[str]
    not_applied: list[str]
    clustered: bool
    liquid: LiquidOutcome | None = None
    keys_before: list[str] = field(default_factory=list)
    keys_changed: bool = False
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    engine: str | None = None
    versions: list[int] = field(default_factory=list)

    def describe(self) -> str:
        """One line for progress and the result: what was applied, what Delta could not express."""
        keys = ", ".join(self.keys)
        left = f"; not expressible by Delta: {', '.join(self.not_applied)}" if self.not_applied else ""
        files = f"{self.files_in} -> {self.files_out} files"
        if self.liquid is None:
            return f"Delta's OPTIMIZE ZORDER BY ({keys or 'nothing: compaction only'}) rewrote {files}{left}"
        wanted = ", ".join(self.liquid.wanted) or "no column Delta can cluster by"
        if self.liquid.mode == "suggest":
            return (
                f"liquid table: clustering keys ({keys or 'none'}) left as they are (liquid: suggest); the workload "
                f"wants ({wanted}) (`--liquid set` makes them the keys); nothing was run{left}"
            )
        if self.liquid.mode == "keep":
            change = f"clustering keys ({keys or 'none'}) kept (liquid: keep; the workload wanted ({wanted}))"
        elif self.keys_changed:
            change = f"clustering keys ({', '.join(self.keys_before) or 'none'}) -> ({keys}) (liquid: set)"
        else:
            change = f"clustering keys ({keys}) kept: already the wanted ones"
        return f"liquid table: {change}, Delta's OPTIMIZE clustered {files}{left}"


@dataclass(frozen=True)
class OptimizeResult:
    run_id: str
    version: int | None  # committed version (None: nothing to do)
    files_in: int
    files_out: int
    bytes_in: int
    bytes_out: int
    rows: int
    distinct_vectors: int
    sop_partitions: int
    dimensions: tuple[str, ...]
    features: Mapping[str, object]
    seconds: Mapping[str, float] = field(default_factory=dict)
    output: Mapping[str, object] = field(default_factory=dict)  # codec and row-group size written with
    committed_by: str = ""  # delta-spark (Delta's transaction), delta-sql (Delta's own OPTIMIZE) or delta-rs; "": none
    properties: Mapping[str, str] = field(default_factory=dict)  # table properties set first (key statistics)
    health: Mapping[str, Any] = field(default_factory=dict)  # the keys' layout health before and after
    path: RewritePath | None = field(default=None, compare=False)  # how the table was rewritten
    command: DeltaCommandResult | None = field(default=None, compare=False)  # Delta's commands' run, if theirs

    def as_dict(self) -> dict[str, object]:
        """The run as JSON (the CLI's ``--json``, read back by remote executors): the path and Delta's
        command result are not part of it (``output`` says what Delta's commands did)."""
        out = asdict(replace(self, path=None, command=None))
        del out["path"], out["command"]
        return out

    @classmethod
    def nothing(cls, run_id: str, features: FeatureSet, properties: Mapping[str, str]) -> OptimizeResult:
        """A run that found no file to rewrite (it may still have set the keys' statistics properties)."""
        return cls(
            run_id=run_id,
            version=None,
            files_in=0,
            files_out=0,
            bytes_in=0,
            bytes_out=0,
            rows=0,
            distinct_vectors=0,
            sop_partitions=0,
            dimensions=(),
            features=features.as_dict(),
            properties=properties,
        )
