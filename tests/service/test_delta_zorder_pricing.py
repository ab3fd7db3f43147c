"""Where only SQL reaches the cluster (Spark Connect, Databricks serverless), Delta's OPTIMIZE ZORDER BY runs
a plain table's job: the tick prices what it can apply as Delta writes it, as the liquid path does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from optimizer.verdict import Verdict
from tests.service.test_service import NOW, service  # noqa: F401 - the service fixture

pytestmark = pytest.mark.spark
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


def test_delta_s_zorder_is_priced_as_delta_runs_it_not_as_deltaopt_s_job(service, monkeypatch):  # noqa: F811
    """Over every file of the table, the clustered ones too (its ZORDER BY cannot be pointed at files), with
    Delta's maxFileSize, Spark's Parquet codec and its rows unsorted within files (review 63b's C3): the
    estimate used to price deltaopt's ZSTD files, sorted along the curve, of the new data only."""
    from optimizer.clustering.by_delta import delta_expressible
    from optimizer.estimate import liquid as liquid_module
    from optimizer.service import jobs as jobs_module
    from optimizer.service import merge as merge_module
    from optimizer.service import tick as tick_module
    from optimizer.table import open_table
    from tests.service.test_service import log_queries, make_table

    ctx, table_path, _ = service
    spark = ctx.spark()
    first = tick_module.tick(ctx.config.tables[0], ctx, NOW)  # deltaopt's job clusters the first files
    assert first.action is Verdict.OPTIMIZE, first.reason
    make_table(spark, table_path, rows=20000, start=10**6, files=4)  # about the first run's size: a merge pays
    log_queries(table_path + "_querylog", count=10, now=NOW + timedelta(minutes=1))

    priced: list[dict[str, object]] = []
    real = liquid_module.estimate

    def spy(context, **kwargs):  # type: ignore[no-untyped-def]
        priced.append({"thresholds": context.thresholds, **kwargs})
        return real(context, **kwargs)

    for module in (tick_module, jobs_module):  # as a Connect or serverless executor is
        monkeypatch.setattr(module, "sql_only", lambda job: True)
    monkeypatch.setattr(jobs_module, "estimate", spy)  # deltaopt's own layout of the new files
    monkeypatch.setattr(liquid_module, "estimate", spy)  # Delta's ZORDER BY (`by_delta_zorder`)
    monkeypatch.setattr(merge_module, "estimate", spy)  # a merge would price young runs as deltaopt's job
    previous = spark.conf.get(MAX_FILE_SIZE, None)
    spark.conf.set(MAX_FILE_SIZE, "200000")
    try:
        record = tick_module.tick(ctx.config.tables[0], ctx, NOW + timedelta(minutes=2))
    finally:
        spark.conf.unset(MAX_FILE_SIZE) if previous is None else spark.conf.set(MAX_FILE_SIZE, previous)
    assert record.merge is None, "Delta's ZORDER BY rewrites the young runs anyway: nothing to merge"
    ((call),) = priced
    thresholds = call["thresholds"]
    assert call["applies"] is delta_expressible
    every = open_table(table_path).snapshot(record.decision.version).files  # type: ignore[union-attr]
    assert len(every) > 4 and {f.path for f in call["files"]} == {f.path for f in every}  # type: ignore[attr-defined]
    assert thresholds.target_file_size == 200_000 and thresholds.codec == "snappy"  # type: ignore[attr-defined]
    assert not thresholds.sorted_within_files  # type: ignore[attr-defined]
    assert record.decision is not None and record.decision.benefit is not None, record.reason
    assert record.decision.new.new_bytes == sum(f.size for f in every)
    assert (
        f"Delta's ZORDER BY rewrites every file: its new data counts all {len(every)}, 4 unclustered" in record.reason
    )
    compression = record.decision.benefit.compression
    assert compression is not None and compression.codec_after == "SNAPPY"
    assert ctx.config.tables[0].thresholds.codec != "snappy", "the table's own job writes another codec"


def test_the_estimate_command_prices_the_job_its_table_s_executor_runs(service, capsys):  # noqa: F811
    """`deltaopt estimate` prices what the service's tick would: with jobs on a Spark Connect server (only SQL
    reaches it), Delta's ZORDER BY over every file; with the service's own Spark, deltaopt's layout of the new
    files. Choosing the executor starts nothing (the server named here does not exist)."""
    import json

    import yaml

    from optimizer.cli import main
    from optimizer.table import open_table
    from tests.service.test_service import log_queries

    _, table_path, tmp_path = service
    config = tmp_path / "deltaopt.yaml"
    log_queries(table_path + "_querylog", now=datetime.now(UTC))  # the CLI decides on the real clock
    files = len(open_table(table_path).snapshot().files)
    assert main(["estimate", "--config", str(config), "--json"]) == 0
    own = json.loads(capsys.readouterr().out)
    assert "Delta's ZORDER BY" not in own["reason"] and own["new_files"] == files

    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, "execution": {"mode": "connect", "connect_url": "sc://nowhere:1"}}))
    assert main(["estimate", "--config", str(config), "--json"]) == 0
    delta = json.loads(capsys.readouterr().out)
    assert f"Delta's ZORDER BY rewrites every file: its new data counts all {files}" in delta["reason"]
    assert delta["benefit"]["compression"]["codec_after"] == "SNAPPY", "as Delta writes, not deltaopt's codec"
