"""The YAML configuration: which tables to watch, their thresholds, where jobs run, logging.

Validated with pydantic (frozen models, ``extra="forbid"`` so a typo fails at load time). Every error is
re-raised as `ConfigError` with a message that names the key, the value found and what is expected,
e.g. ``tables[0].thresholds.max_z_features: got 9; Input should be less than or equal to 8``.

Sizes accept integers (bytes) or strings such as ``"128MiB"``/``"1GB"``; durations accept seconds or
strings such as ``"90s"``, ``"5m"``, ``"7d"``. `deploy/config.example.yaml` documents every key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from optimizer.config_compute import DatabricksSettings as DatabricksSettings  # re-exported
from optimizer.config_compute import ExecutionSettings as ExecutionSettings
from optimizer.config_compute import SparkSettings as SparkSettings
from optimizer.config_types import ByteSize, Duration, LiquidMode, StrictModel
from optimizer.errors import ConfigError
from optimizer.table.output import OutputSettings

READERS = ("standard", "deltaopt")


def parse_readers(value: Any) -> Any:
    """``standard`` / ``deltaopt`` as one reader taking every query; a mapping gives shares."""
    return {value: 1.0} if isinstance(value, str) else value


def _shares(value: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(value) - set(READERS))
    if unknown:
        raise ValueError(f"unknown reader(s) {unknown}: readers are {', '.join(READERS)}")
    total = sum(value.values())
    if not value or total <= 0 or any(v < 0 for v in value.values()):
        raise ValueError(f"reader shares must be non-negative and not all zero, got {value}")
    return {k: v / total for k, v in value.items()}


Readers = Annotated[dict[str, float], BeforeValidator(parse_readers)]


class Thresholds(StrictModel):
    """Per-table knobs of the analyser, estimator and clustering job (thesis ch. 4-5 names in brackets)."""

    min_new_bytes: ByteSize = Field(1 << 30, description="unclustered bytes before an estimate is made")
    min_comparison_points: int = Field(5, ge=1, description="theta: distinct literals for a Z candidate")
    min_sop_frequency: float = Field(
        0.05, gt=0, le=1, description="gamma: share of the (weighted) queries a SOP feature must reach"
    )
    max_z_features: int = Field(4, ge=1, le=8, description="Z-order dimensions, SOP id not counted")
    max_sop_features: int = Field(24, ge=1, le=64, description="SOP clustering features")
    max_joined_features: int = Field(
        2,
        ge=0,
        le=4,
        description="dimension attributes filtered through a join that may become Z dimensions of this fact table "
        "(looked up by a join when it is laid out; the estimate compares layouts with and without them); 0: none",
    )
    z_correlation_epsilon: float = Field(0.05, gt=0, lt=0.5, description="epsilon of the sort-index")
    sop_correlation_phi: float = Field(0.8, gt=0, le=1, description="phi: mean-square contingency edge")
    target_file_size: ByteSize = Field(128 << 20, description="size of the files OPTIMIZE writes")
    sample_rows: int = Field(100_000, ge=100, description="rows sampled for correlations and benefit")
    sample_scan_bytes: ByteSize = Field(
        2 << 30,
        description="most new data a decision's sample reads: past it, evenly spaced files in commit order "
        "(at least 8) are read instead of every file; 0: every file",
    )
    cost_per_mb_read: float = Field(
        0.01, gt=0, description="cost units (cluster seconds) to scan one MB; cost model uses the same units"
    )
    workload_window: Duration = Field(7 * 86400, gt=0, description="how far back the analyser reads the log")
    recency_half_life: Duration = Field(
        3 * 86400, gt=0, description="a query this old counts half as much as one issued now"
    )
    benefit_horizon: Duration = Field(
        7 * 86400, gt=0, description="future period over which saved scan bytes are counted"
    )
    log_gap: Duration = Field(
        86400,
        gt=0,
        description="a silence in the log longer than this (and than 20 median inter-arrivals) is time the log "
        "was not recording, left out of the query rate",
    )
    realised_min_jobs: int = Field(
        3,
        ge=0,
        description="once this many of a table's jobs with an estimate were measured on the scans after them, its "
        "new benefit estimates are scaled by what those jobs realised / what their estimates expected (clamped "
        "to 0.25-4x; the record keeps the raw figure); 0: off",
    )
    realised_half_life: float = Field(
        8.0,
        ge=0,
        description="jobs: in that factor, a job's realised and estimated figures weigh half as much once this "
        "many newer jobs with an estimate were measured, so the factor follows what the table's recent jobs "
        "realise when its data or workload change; 0: every job weighs the same for good",
    )
    estimate_compression: bool = Field(
        True, description="write the sample in both layouts to price how much better clustered data compresses"
    )
    sorted_within_files: bool = Field(
        True,
        description="the rewrite sorts each file's rows by its layout, as deltaopt's job does: the estimate then "
        "prices row groups along the layout and the compression of sorted rows; the service sets it off where it "
        "prices Delta's own OPTIMIZE, which sorts within files only with "
        "spark.databricks.io.skipping.mdc.sortWithinFiles (Delta 4.0 and later, off by default)",
    )
    codec: Literal["zstd", "snappy", "gzip", "lz4", "lz4_raw", "none", "uncompressed"] = Field(
        "zstd", description="Parquet codec OPTIMIZE writes (the table's delta.parquet.compression.codec wins)"
    )
    codec_level: int | None = Field(None, ge=1, le=22, description="codec level (zstd 1-22, gzip 1-9)")
    row_group_size: ByteSize = Field(16 << 20, gt=0, description="Parquet row-group size OPTIMIZE writes")
    stats_for_clustering_keys: bool = Field(
        True,
        description="make the clustering keys' columns collect min/max (extend delta.dataSkippingStatsColumns or "
        "raise delta.dataSkippingNumIndexedCols before the rewrite) so standard readers can skip on them; off: "
        "the estimate prices what standard readers get without them",
    )
    compare_layouts: bool = Field(
        True, description="estimate Z-only, SOP-only and fewer-Z variants too, and keep the best net benefit"
    )
    readers: Readers = Field(
        default_factory=lambda: {"standard": 1.0},
        description="who reads the table: standard (engines that skip files by Delta min/max of bare columns "
        "and row groups by Parquet footers: Spark, Databricks, Trino, DuckDB; docs/READERS.md), deltaopt (reads "
        "through deltaopt's pruning), or shares of both; layouts are scored by the skipping those readers do",
    )
    liquid_key_ticks: int = Field(
        3,
        ge=1,
        description="a liquid table's keys change (liquid: set) only after this many ticks running in which the "
        "workload wanted the same new keys (hysteresis: a stable workload never flaps)",
    )
    liquid_key_margin: float = Field(
        0.2,
        ge=0,
        description="and only when Delta's OPTIMIZE by the new keys nets this share more than by the table's own "
        "(of the larger of that net and 1 cluster-second)",
    )
    selection: Literal["benefit", "frequency"] = Field(
        "benefit",
        description="benefit: theta and gamma only pre-filter candidates and a greedy search adds the one with the "
        "highest estimated marginal net benefit while it pays; frequency: the thesis's gates decide",
    )
    min_candidate_share: float = Field(
        0.01, gt=0, le=1, description="benefit search pre-filter: share of the (weighted) queries a candidate needs"
    )
    search_candidates: int = Field(
        6, ge=1, le=64, description="most Z and most SOP candidates (by frequency) the benefit search estimates"
    )
    search_estimates: int = Field(
        64,
        ge=1,
        description="no new round of the benefit search starts once it has estimated this many layouts (the "
        "first round, one per candidate, always runs; a layout with Z and SOP features is scored in both "
        "orders); the features so far stand (a bound in work, not time: the same features on any load)",
    )
    search_seconds: Duration | None = Field(
        None,
        gt=0,
        description="optional wall-clock bound on the benefit search as well (the choice then depends on the "
        "machine's load); none by default",
    )
    recluster_bytes_per_tick: ByteSize = Field(
        1 << 30,
        description="most bytes of clustered files one tick may re-cluster: files under an older feature set "
        "(drift) or earlier runs merged with new data (0: off)",
    )
    recluster_bytes_per_day: ByteSize = Field(8 << 30, description="most bytes re-clustered per 24 h")
    recluster_check_interval: Duration = Field(
        6 * 3600,
        description="how often files laid out under the latest chosen features are re-estimated for drift "
        "(files under other features are estimated on every tick that does not optimise new data)",
    )

    @field_validator("readers")
    @classmethod
    def _reader_shares(cls, value: dict[str, float]) -> dict[str, float]:
        return _shares(value)

    @property
    def output(self) -> OutputSettings:
        """How OPTIMIZE writes Parquet (before the table's own codec property is applied)."""
        source = "configuration" if "codec" in self.model_fields_set else "default"
        return OutputSettings(self.codec, self.codec_level, self.row_group_size, source)


class TableSettings(StrictModel):
    """One watched table: by its location (``path``) or by its name in the session's catalog (``table``)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    path: str = Field("", description="table location (local path or URI); resolved from `table` when that is set")
    table: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$",
        description="name in the Spark session's catalog (schema.table or catalog.schema.table) instead of a path",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="object-store settings for this table (credentials, endpoint, region), over the top-level "
        "storage_options; delta-rs keys (AWS_ENDPOINT_URL, AWS_REGION, ...)",
    )
    single_writer: bool = Field(
        False,
        description="no other writer commits while deltaopt runs (writers scheduled around it): makes Delta's "
        "single-driver log store on S3 / Blob safe for deltaopt's commit; otherwise it is refused there",
    )
    query_log: str | None = Field(None, description="query-log table; default '<path>_querylog' beside it")
    table_id: str | None = Field(None, description="identity used in query-log rows; default: name")
    interval: Duration = Field(300, gt=0, description="seconds between ticks")
    paused: bool = False
    join_role: Literal["fact", "dimension"] | None = Field(
        None,
        description="how join derivation reads this table as a source: fact (never, unless "
        "--derive-through-facts) or dimension (always); default: a fact where its Delta statistics prove "
        "the join column repeats a key, else a dimension",
    )
    dry_run: bool | None = Field(None, description="override service.dry_run for this table")
    liquid: LiquidMode | None = Field(None, description="override service.liquid for this table")
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @model_validator(mode="after")
    def _path_or_table(self) -> TableSettings:
        if bool(self.path) == bool(self.table):
            raise ValueError("set either path (the table's location) or table (its catalog name)")
        return self

    @property
    def query_log_path(self) -> str:
        return self.query_log or self.path.rstrip("/") + "_querylog"

    @property
    def identity(self) -> str:
        return self.table_id or self.name


class DiscoverySettings(StrictModel):
    """Tables found rather than listed: every Delta table under a storage prefix or in a catalog schema,
    re-listed while the service runs. A table listed under ``tables`` (same name or location) keeps its
    own settings; discovered ones take ``defaults``. Query logs (``*_querylog``) are never watched."""

    prefix: str | None = Field(None, description="a location whose Delta tables (up to 3 levels down) are watched")
    schema_name: str | None = Field(
        None,
        alias="schema",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$",
        description="a catalog schema (sales or catalog.sales) whose Delta tables are watched",
    )
    relist: Duration = Field(300, gt=0, description="how often the prefix or schema is listed again")
    interval: Duration = Field(300, gt=0, description="seconds between ticks of a discovered table")

    @model_validator(mode="after")
    def _one_source(self) -> DiscoverySettings:
        if bool(self.prefix) == bool(self.schema_name):
            raise ValueError("set either prefix (a storage location) or schema (a catalog schema)")
        return self


class BudgetSettings(StrictModel):
    """The fleet's compute budget (`optimizer.service.fleet`): jobs start in rank order (net benefit per
    cluster-second) while their estimated cluster-seconds fit what is left this hour and today."""

    cluster_seconds_per_hour: float | None = Field(None, gt=0, description="none: no hourly limit")
    cluster_seconds_per_day: float | None = Field(None, gt=0, description="none: no daily limit")
    aging: Duration = Field(3600, gt=0, description="waiting this long adds a candidate's own rank once more")


class ServiceSettings(StrictModel):
    state_dir: str = Field("deltaopt-state", description="per-table state (log position, runs)")
    cost_model: str | None = Field(None, description="calibrated cost model JSON; default <state_dir>/costmodel.json")
    decisions_table: str | None = Field(None, description="Delta table of decisions; default <state_dir>/decisions")
    metrics_port: int | None = Field(None, ge=1, le=65535, description="serve Prometheus /metrics here")
    metrics_address: str = Field("0.0.0.0", description="address the metrics endpoint listens on")
    decisions_flush: Duration = Field(60, description="decision rows are committed in batches this far apart")
    max_concurrent_jobs: int = Field(1, ge=1, description="OPTIMIZE jobs running at once, fleet-wide")
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    workers: int = Field(4, ge=1, description="threads that tick tables; more tables wait their turn")
    max_concurrent_estimates: int = Field(2, ge=1, description="estimates (Spark samples) running at once")
    jitter: Duration = Field(10)
    dry_run: bool = False
    liquid: LiquidMode = Field(
        "keep",
        description="a liquid-clustered table's clustering keys are the user's: keep (never changed; Delta's OPTIMIZE "
        "clusters by them), suggest (never changed; the record names the keys the workload wants), set (a job "
        "makes the plain-column Z features the keys, ALTER TABLE ... CLUSTER BY)",
    )

    @property
    def decisions_path(self) -> str:
        return self.decisions_table or str(Path(self.state_dir) / "decisions")

    @property
    def fleet_path(self) -> str:
        """The fleet queue's ledger and waiting list, for ``deltaopt status``."""
        return str(Path(self.state_dir) / "fleet.json")

    @property
    def cost_model_path(self) -> str:
        return self.cost_model or str(Path(self.state_dir) / "costmodel.json")


class SchemaSettings(StrictModel):
    """Where the schemas of tables that logged queries join come from (`optimizer.catalog`), so every
    column resolves to its table; the watched tables' own schemas are always used."""

    file: str | None = Field(None, description="SQL DDL (CREATE TABLE ...) or YAML {table: {column: type}}")
    locations: tuple[str, ...] = Field((), description="directories holding Delta tables, searched 3 levels down")
    spark_catalog: bool = Field(False, description="also read the tables of the Spark session's catalog")


class LoggingSettings(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = Field("text", description="text for humans, json for log shippers")
    decision_log: str | None = Field(
        None, description="JSON-lines file of decisions; default <state_dir>/decisions.jsonl"
    )


class Config(StrictModel):
    version: Literal[1] = 1
    spark: SparkSettings = Field(default_factory=SparkSettings)
    defaults: Thresholds = Field(default_factory=Thresholds)
    tables: tuple[TableSettings, ...] = ()
    discover: tuple[DiscoverySettings, ...] = Field((), description="prefixes and catalog schemas to watch")
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="object-store settings every table uses unless it sets its own"
    )
    schemas: SchemaSettings = Field(default_factory=SchemaSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        """Per-table ``thresholds`` override the top-level ``defaults`` key by key."""
        if not isinstance(data, dict):
            return data
        defaults = data.get("defaults") or {}
        tables = data.get("tables")
        if isinstance(defaults, dict) and isinstance(tables, list):
            storage = data.get("storage_options") or {}
            merged = []
            for table in tables:
                if isinstance(table, dict):
                    own = table.get("thresholds") or {}
                    if isinstance(own, dict):
                        table = {**table, "thresholds": {**defaults, **own}}
                    options = table.get("storage_options") or {}
                    if isinstance(storage, dict) and isinstance(options, dict) and storage:
                        table = {**table, "storage_options": {**storage, **options}}
                merged.append(table)
            data = {**data, "tables": merged}
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        names = [t.name for t in self.tables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"table names must be unique, repeated: {duplicates}")
        return self

    def liquid_for(self, table: TableSettings) -> LiquidMode:
        """What deltaopt may do with `table`'s clustering keys should it be (or become) liquid-clustered."""
        return table.liquid or self.service.liquid

    def table(self, name: str) -> TableSettings:
        for table in self.tables:
            if table.name == name:
                return table
        raise ConfigError(f"tables: no table named {name!r}; configured: {[t.name for t in self.tables]}")

    @property
    def decision_log_path(self) -> str:
        return self.logging.decision_log or str(Path(self.service.state_dir) / "decisions.jsonl")


def _describe(error: dict[str, Any]) -> str:
    loc = ""
    for part in error["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    value = error.get("input")
    shown = repr(value) if not isinstance(value, dict) else "a mapping"
    return f"{loc or '<top level>'}: got {shown}; {error['msg']}"


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate an already-loaded mapping. Raises `ConfigError` naming every bad key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        lines = [_describe(dict(e)) for e in err.errors(include_url=False)]
        raise ConfigError(f"{source}: invalid configuration\n  " + "\n  ".join(lines)) from err


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML file. Raises `ConfigError` for a missing file, bad YAML or bad values."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read configuration: {err.strerror or err}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from err
    return parse_config(data, source=str(path))
