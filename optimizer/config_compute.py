"""Where the work runs: the service's own Spark, and the compute OPTIMIZE jobs run on (re-exported by
`optimizer.config`, where the whole configuration is read)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from optimizer.config_types import Duration, StrictModel

__all__ = ["DatabricksSettings", "ExecutionSettings", "SparkSettings"]


class SparkSettings(StrictModel):
    """Where Spark runs for the service itself (analysis, estimation, in-process jobs)."""

    master: str = Field("local[*]", description="Spark master URL; local[*] is the embedded default")
    connect_url: str | None = Field(None, description="Spark Connect URL (sc://host:15002); wins over master")
    app_name: str = "deltaopt"
    shuffle_partitions: int = Field(8, ge=1)
    driver_memory: str | None = Field(None, description="e.g. '4g'; only for a local master")
    delta: Literal["auto", "required", "off"] = Field(
        "auto",
        description="load the Delta Lake engine (jars cached by `make install`): auto uses it when it loads "
        "(a PySpark outside the supported matrix is refused), required fails without it, off never loads it",
    )
    delta_packages: bool | None = Field(None, description="deprecated spelling: true means delta: required")
    commit: Literal["auto", "delta-spark", "delta-rs"] = Field(
        "auto",
        description="who commits OPTIMIZE: Delta's own transaction when the session has the Delta engine "
        "(auto), or delta-rs from this process",
    )
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")

    @property
    def delta_mode(self) -> Literal["auto", "required", "off"]:
        return "required" if self.delta_packages else self.delta

    @model_validator(mode="after")
    def _connect_scheme(self) -> SparkSettings:
        if self.connect_url is not None and not self.connect_url.startswith("sc://"):
            raise ValueError(f"connect_url must start with 'sc://', got {self.connect_url!r}")
        return self


class DatabricksSettings(StrictModel):
    """Databricks Jobs API access. Credentials are read from the environment only, never from YAML."""

    host_env: str = Field("DATABRICKS_HOST", description="environment variable holding https://<workspace>")
    token_env: str = Field("DATABRICKS_TOKEN", description="environment variable holding a PAT/OAuth token")
    python_wheel: str | None = Field(None, description="dbfs:/ or /Volumes path of the deltaopt wheel")
    timeout: Duration = Field(3600, gt=0, description="how long a submitted run may take")
    poll_interval: Duration = Field(15, gt=0)
    existing_cluster_id: str | None = Field(None, description="run on this all-purpose cluster")
    new_cluster: dict[str, Any] | None = Field(
        None, description="a job cluster per run (the Jobs API's new_cluster: spark_version, node_type_id, ...)"
    )
    policy_id: str | None = Field(None, description="cluster policy for new_cluster")
    serverless: bool = Field(
        False,
        description="serverless jobs compute: no JVM access there, so the job is Delta's own OPTIMIZE ZORDER BY "
        "and only plain-column Z features are applied (and priced)",
    )

    @model_validator(mode="after")
    def _one_compute(self) -> DatabricksSettings:
        chosen = [k for k in ("existing_cluster_id", "new_cluster", "serverless") if getattr(self, k)]
        if len(chosen) > 1:
            raise ValueError(f"choose one of existing_cluster_id, new_cluster, serverless; got {chosen}")
        if self.policy_id and not self.new_cluster:
            raise ValueError("policy_id applies to new_cluster, which is not set")
        return self


class ExecutionSettings(StrictModel):
    """Where OPTIMIZE jobs run. ``auto`` follows the commitInfo of the commits that wrote the data."""

    mode: Literal["auto", "local", "connect", "databricks"] = "auto"
    connect_url: str | None = Field(None, description="Spark Connect URL of the writers' cluster")
    databricks: DatabricksSettings = Field(default_factory=DatabricksSettings)
