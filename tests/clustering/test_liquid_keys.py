"""A liquid table's clustering keys are the user's choice (issue 45, 6b): `liquid: keep | suggest | set`.

Each test makes a liquid table with delta-spark (``CLUSTER BY (a)``) and asks for a layout on `b`:
``keep`` (the default) runs Delta's OPTIMIZE by the table's own keys and names what the workload
wanted, ``suggest`` changes nothing and names the wanted keys, ``set`` makes them the keys. Rows are
compared as Delta reads them (count and an order-insensitive hash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.table import open_table
from optimizer.table.fingerprint import fingerprint
from tests.clustering.liquid import liquid_table

pytestmark = pytest.mark.spark

WANTED = FeatureSet.from_dict({"z": ["b"], "sop": ["a IN (1, 2)"]})


@pytest.fixture
def liquid(spark, tmp_path: Path) -> str:
    """A small liquid table clustered by `a`, written in three appends (several files to cluster): a copy
    of a template built once per run (`tests.clustering.liquid`)."""
    return liquid_table(spark, str(tmp_path / "liquid"))


def keys(spark, path: str) -> list[str]:
    """The table's clustering keys as Delta reports them."""
    return list(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["clusteringColumns"])


def operations(spark, path: str) -> list[str]:
    return [h["operation"] for h in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]


def test_keep_is_the_default_keeps_the_keys_and_names_what_the_workload_wanted(spark, liquid):
    rows, before = fingerprint(spark.read.format("delta").load(liquid)), operations(spark, liquid)

    result = optimize(spark, open_table(liquid), WANTED, 16_000)

    assert keys(spark, liquid) == ["a"]
    assert "CLUSTER BY" not in operations(spark, liquid)[len(before) :]
    assert fingerprint(spark.read.format("delta").load(liquid)) == rows
    assert result.output["liquid"] == {"mode": "keep", "keys": ["a"], "wanted": ["b"], "changed": False}
    assert result.dimensions == ("a",) and result.properties == {}
    summary = str(result.output["clustering"])
    assert "clustering keys (a) kept" in summary and "wanted (b)" in summary
    assert result.version is not None and operations(spark, liquid)[-1] == "OPTIMIZE"  # Delta's, by `a`


def test_suggest_changes_nothing_and_names_the_wanted_keys(spark, liquid):
    rows, version = fingerprint(spark.read.format("delta").load(liquid)), open_table(liquid).snapshot().version

    result = optimize(spark, open_table(liquid), WANTED, 16_000, liquid="suggest")

    assert keys(spark, liquid) == ["a"] and open_table(liquid).snapshot().version == version
    assert fingerprint(spark.read.format("delta").load(liquid)) == rows
    assert result.version is None and result.output["liquid"]["wanted"] == ["b"]
    assert "suggest" in str(result.output["clustering"]) and "(b)" in str(result.output["clustering"])


def test_set_makes_the_plain_column_features_the_keys(spark, liquid):
    rows = fingerprint(spark.read.format("delta").load(liquid))

    result = optimize(spark, open_table(liquid), WANTED, 16_000, liquid="set")

    assert keys(spark, liquid) == ["b"]
    assert operations(spark, liquid)[-2:] == ["CLUSTER BY", "OPTIMIZE"]
    assert fingerprint(spark.read.format("delta").load(liquid)) == rows
    assert result.properties == {"clusterBy": "b"} and result.output["liquid"]["changed"] is True


def test_the_command_line_takes_liquid_and_refuses_a_bad_value(spark, liquid, capsys):
    from optimizer.cli.main import main

    assert main(["optimize", "--table", liquid, "--z", "b", "--liquid", "suggest", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"]["liquid"]["wanted"] == ["b"] and keys(spark, liquid) == ["a"]

    assert main(["optimize", "--table", liquid, "--z", "b"]) == 0  # default keep
    assert "clustering keys (a) kept" in capsys.readouterr().out and keys(spark, liquid) == ["a"]

    with pytest.raises(SystemExit) as stopped:
        main(["optimize", "--table", liquid, "--z", "b", "--liquid", "maybe"])
    assert stopped.value.code == 2
    assert "--liquid: invalid choice: 'maybe'" in capsys.readouterr().err


def test_the_configuration_takes_liquid_per_table_over_the_service_default():
    from optimizer.config import parse_config
    from optimizer.errors import ConfigError

    config = parse_config(
        {
            "service": {"liquid": "suggest"},
            "tables": [{"name": "a", "path": "/a"}, {"name": "b", "path": "/b", "liquid": "set"}],
        }
    )
    assert [config.liquid_for(t) for t in config.tables] == ["suggest", "set"]
    assert parse_config({"tables": [{"name": "a", "path": "/a"}]}).liquid_for(config.table("a")) == "keep"

    with pytest.raises(ConfigError) as bad:
        parse_config({"tables": [{"name": "a", "path": "/a", "liquid": "maybe"}]})
    lines = str(bad.value).splitlines()
    assert len(lines) == 2 and lines[1].strip().startswith("tables[0].liquid: got 'maybe'")
    assert "'keep'" in lines[1] and "'set'" in lines[1]
