"""Configuration: defaults, overrides, and errors that name the key, the value and the expectation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optimizer.config import load_config, parse_config
from optimizer.config_types import parse_duration, parse_size
from optimizer.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "config.example.yaml"


def test_example_config_is_valid_and_documents_defaults():
    config = load_config(EXAMPLE)
    table = config.table("lineitem")
    assert table.thresholds.min_new_bytes == 256 * 2**20  # overridden
    assert table.thresholds.max_z_features == 4  # from defaults
    assert table.thresholds.workload_window == 7 * 86400
    assert table.query_log_path == "/data/tpch/lineitem_querylog"
    assert table.interval == 300


def test_table_thresholds_override_defaults_key_by_key():
    config = parse_config(
        {
            "defaults": {"max_z_features": 3, "target_file_size": "64MiB"},
            "tables": [{"name": "t", "path": "/x", "thresholds": {"max_z_features": 2}}],
        }
    )
    thresholds = config.tables[0].thresholds
    assert thresholds.max_z_features == 2
    assert thresholds.target_file_size == 64 * 2**20


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (
            {"tables": [{"name": "t", "path": "/x", "thresholds": {"max_z_features": 9}}]},
            ["tables[0].thresholds.max_z_features", "9", "less than or equal to 8"],
        ),
        (
            {"tables": [{"name": "t", "path": "/x", "interval": "soon"}]},
            ["tables[0].interval", "'soon'", "duration"],
        ),
        (
            {"defaults": {"target_file_size": "12 parsecs"}},
            ["defaults.target_file_size", "'12 parsecs'", "size"],
        ),
        (
            {"tables": [{"name": "t", "path": "/x", "pathh": "/y"}]},
            ["tables[0].pathh", "Extra inputs are not permitted"],
        ),
        ({"spark": {"connect_url": "http://host:15002"}}, ["spark", "sc://"]),
        ({"tables": [{"name": "a", "path": "/x"}, {"name": "a", "path": "/y"}]}, ["unique", "'a'"]),
        ({"execution": {"mode": "ssh"}}, ["execution.mode", "'ssh'", "'auto'"]),
        ({"defaults": {"min_sop_frequency": 0}}, ["defaults.min_sop_frequency", "greater than 0"]),
    ],
)
def test_bad_values_are_named(data, fragments):
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.yaml")
    message = str(caught.value)
    assert message.startswith("cfg.yaml: invalid configuration")
    for fragment in fragments:
        assert fragment in message


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("tables:\n  - name: t\n    path: [unclosed\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d+"):
        load_config(path)


def test_missing_file_and_wrong_top_level(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


def test_unknown_table_name():
    with pytest.raises(ConfigError, match="no table named 'zzz'"):
        parse_config({"tables": [{"name": "t", "path": "/x"}]}).table("zzz")


def test_a_table_join_role_is_fact_or_dimension_and_unset_by_default():
    """How join derivation reads a table as a source (`optimizer.joins`): unset leaves it to the log's proof."""
    tables = [
        {"name": "a", "path": "/a"},
        {"name": "f", "path": "/f", "join_role": "fact"},
        {"name": "d", "path": "/d", "join_role": "dimension"},
    ]
    config = parse_config({"tables": tables})
    assert [t.join_role for t in config.tables] == [None, "fact", "dimension"]
    with pytest.raises(ConfigError) as caught:
        parse_config({"tables": [{"name": "t", "path": "/x", "join_role": "hub"}]}, source="cfg.yaml")
    message = str(caught.value)
    assert message.startswith("cfg.yaml: invalid configuration")
    assert message.splitlines()[1:] == ["  tables[0].join_role: got 'hub'; Input should be 'fact' or 'dimension'"]


@pytest.mark.parametrize(("text", "expected"), [("128MiB", 128 * 2**20), ("1GB", 10**9), (42, 42), ("2 kib", 2048)])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("5m", 300.0), ("7d", 604800.0), (12, 12.0), ("250ms", 0.25)])
def test_durations(text, expected):
    assert parse_duration(text) == expected


def test_a_table_is_named_by_path_or_by_catalog_name_and_storage_options_merge():
    config = parse_config(
        {
            "storage_options": {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "https://a"},
            "tables": [
                {"name": "a", "table": "sales.orders"},
                {"name": "b", "path": "s3a://lake/b", "storage_options": {"AWS_ENDPOINT_URL": "https://b"}},
            ],
        }
    )
    named, pathed = config.tables
    assert named.table == "sales.orders" and named.path == ""
    assert pathed.storage_options == {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "https://b"}  # own wins
    for table, expected in [
        ({"name": "c"}, "either path"),
        ({"name": "c", "path": "/x", "table": "s.t"}, "either path"),
        ({"name": "c", "table": "s.t; DROP TABLE x"}, "tables[0].table"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(expected)):
            parse_config({"tables": [table]})
