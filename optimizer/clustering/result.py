"""What one OPTIMIZE run reports, whoever rewrote the files (deltaopt's job or Delta's own commands)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from optimizer.features import FeatureSet


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

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

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
