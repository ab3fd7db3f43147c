"""The YAML configuration: which tables to watch, their thresholds, where jobs run, logging.

Validated with pydantic (frozen models, ``extra="forbid"`` so a typo fails at load time). Every error is
re-raised as `ConfigError` with a message that names the key, the value found and what is expected,
e.g. ``tables[0].thresholds.max_z_features: got 9; Input should be less than or equal to 8``.

Sizes accept integers (bytes) or strings such as ``"128MiB"``/``"1GB"``; durations accept seconds or
strings such as ``"90s"``, ``"5m"``, ``"7d"``. `deploy/config.example.yaml` documents every key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from optimizer.config_compute import DatabricksSettings as DatabricksSettings  # re-exported
from optimizer.config_compute import ExecutionSettings as ExecutionSettings
from optimizer.config_compute import SparkSettings as SparkSettings
from optimizer.config_types import Duration, LiquidMode, StrictModel
from optimizer.errors import ConfigError
from optimizer.thresholds import READERS as READERS  # re-exported
from optimizer.thresholds import Thresholds as Thresholds


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
