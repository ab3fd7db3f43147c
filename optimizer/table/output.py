"""How deltaopt writes Parquet: codec, codec level and row-group size, chosen on purpose.

Every byte a rewrite stores is read by every query that keeps the file, so the output is written as
compactly as the best writers do (ZSTD by default, as delta-rs does) and cut into several row groups
per file: engines that read Parquet row-group statistics (Spark, DuckDB, Trino) then skip row groups
inside a file too, and the Z-order within a file makes those statistics selective.

The codec is, in order: the table's own ``delta.parquet.compression.codec`` property (its owner's
choice, which other writers honour too), else the configuration's ``codec``, else ZSTD. The same
settings drive the OPTIMIZE job and the estimator's scratch writes, so estimated and real bytes agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from optimizer.errors import ConfigError

TABLE_CODEC_PROPERTY = "delta.parquet.compression.codec"
# codec names as users write them -> Spark's Parquet writer names
CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4": "lz4",
    "lz4_raw": "lz4_raw",
    "none": "none",
    "uncompressed": "none",
}
LEVEL_KEYS = {"zstd": "parquet.compression.codec.zstd.level", "gzip": "zlib.compress.level"}


@dataclass(frozen=True)
class OutputSettings:
    """Parquet writer settings of a rewrite."""

    codec: str = "zstd"
    level: int | None = None  # codec level where the codec has one (zstd 1-22, gzip 1-9)
    row_group_bytes: int = 16 << 20  # parquet.block.size: several row groups per 128 MiB file
    source: str = "default"  # where the codec came from: table property, configuration, default

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ConfigError(f"codec: got {self.codec!r}; expected one of {sorted(CODECS)}")

    @property
    def spark_codec(self) -> str:
        """The codec as Spark's Parquet writer names it (``uncompressed`` is ``none``)."""
        return CODECS[self.codec]

    def writer_options(self) -> dict[str, str]:
        """Options for Spark's Parquet writer (passed to parquet-mr through the Hadoop configuration)."""
        codec = self.spark_codec
        options = {"compression": codec, "parquet.block.size": str(self.row_group_bytes)}
        if self.level is not None and codec in LEVEL_KEYS:
            options[LEVEL_KEYS[codec]] = str(self.level)
        return options

    def describe(self) -> str:
        level = f" level {self.level}" if self.level is not None else ""
        return f"{self.spark_codec.upper()}{level} ({self.source}), row groups of {self.row_group_bytes >> 20} MiB"

    def as_dict(self) -> dict[str, object]:
        return {
            "codec": self.spark_codec,
            "level": self.level,
            "row_group_bytes": self.row_group_bytes,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> OutputSettings:
        level = data.get("level")
        return cls(
            codec=str(data.get("codec", "zstd")),
            level=int(str(level)) if level is not None else None,
            row_group_bytes=int(str(data.get("row_group_bytes", 16 << 20))),
            source=str(data.get("source", "default")),
        )


def resolve_output(configured: OutputSettings, table_configuration: Mapping[str, str | None]) -> OutputSettings:
    """`configured`, with the codec replaced by the table's own property when it has a known one."""
    wanted = (table_configuration.get(TABLE_CODEC_PROPERTY) or "").strip().lower()
    if wanted and wanted in CODECS:
        level = configured.level if CODECS[wanted] == CODECS[configured.codec] else None
        return OutputSettings(wanted, level, configured.row_group_bytes, f"table property {TABLE_CODEC_PROPERTY}")
    return configured
