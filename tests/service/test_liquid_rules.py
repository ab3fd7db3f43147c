"""A liquid table's rules without Spark: which files Delta's OPTIMIZE rewrites (its ZCube rules), and
what a tick decides from the two estimates, the liquid setting and the streak (`service.liquid.decide`)."""

from __future__ import annotations

import pytest

from optimizer.estimate.liquid import keys_layout
from optimizer.estimate.record import Decision, NewData
from optimizer.service.liquid import LiquidPlan, Operation, Streak, decide
from optimizer.table.zcubes import ClusteredFile, liquid_rewrite
from optimizer.verdict import Verdict


def cubed(path: str, size: int, cube: str | None = None, keys: tuple[str, ...] = ("a",), provider: str = "liquid"):
    """A file of ZCube `cube` clustered by `keys` (None: no OPTIMIZE clustered it)."""
    if cube is None:
        return ClusteredFile(path, size)
    return ClusteredFile(path, size, provider, cube, keys)


FILES = [
    cubed("new", 10),
    cubed("small-1", 10, "A"),
    cubed("small-2", 10, "A"),
    cubed("sealed-1", 60, "B"),
    cubed("sealed-2", 60, "B"),
    cubed("other-keys", 10, "C", keys=("b",)),
    cubed("other-provider", 10, "D", provider="zorder"),
]


def paths(files: list[ClusteredFile]) -> set[str]:
    return {f.path for f in files}


def test_optimize_rewrites_new_files_and_cubes_below_min_cube_size_by_the_same_keys():
    assert paths(liquid_rewrite(FILES, ["a"], min_cube_size=100)) == {"new", "small-1", "small-2"}


def test_full_also_rewrites_files_clustered_by_other_keys():
    assert paths(liquid_rewrite(FILES, ["a"], min_cube_size=100, full=True)) == {
        "new",
        "small-1",
        "small-2",
        "other-keys",
        "other-provider",
    }


def test_a_cube_alone_is_left_as_it_is_and_two_small_cubes_are_merged():
    one = [f for f in FILES if f.cube == "A"]
    assert liquid_rewrite(one, ["a"], min_cube_size=100) == []
    two = [*one, cubed("small-3", 10, "E")]
    assert paths(liquid_rewrite(two, ["a"], min_cube_size=100)) == {"small-1", "small-2", "small-3"}


def test_the_min_cube_size_seals_a_cube_at_its_size():
    assert paths(liquid_rewrite(FILES, ["a"], min_cube_size=120)) == {"new", "small-1", "small-2"}
    assert "sealed-1" in paths(liquid_rewrite(FILES, ["a"], min_cube_size=121))


def estimate_of(keys: tuple[str, ...], net: float, optimize: bool = True) -> Decision:
    """A decision as the estimate returns it: Delta's OPTIMIZE by `keys` netting `net` cluster-seconds."""
    action = Verdict.OPTIMIZE if optimize else Verdict.SKIP
    new = NewData("events", 3, 4, 4_000, 1)
    return Decision(new, action, f"net {net}", net=net, features=keys_layout(keys))


def plan(mode: str, current: float, change: float, streak: int, wanted: tuple[str, ...] = ("x",)) -> LiquidPlan:
    return LiquidPlan(
        mode,  # type: ignore[arg-type]
        ("id",),
        "",
        Streak(wanted, streak),
        current=estimate_of(("id",), current, optimize=current > 0),
        change=estimate_of(wanted, change),
    )


def test_set_changes_the_keys_once_the_workload_wanted_them_long_enough_and_they_pay():
    decided = decide(plan("set", 10.0, 50.0, 3), ticks=3, margin=0.2)
    assert decided.operation is Operation.KEY_SELECTION and decided.decision is decided.change
    assert "keys changed" in decided.reason


def test_set_keeps_the_keys_while_the_streak_is_short():
    decided = decide(plan("set", 10.0, 50.0, 2), ticks=3, margin=0.2)
    assert decided.operation is Operation.CLUSTERING and decided.decision is decided.current
    assert "2 of the 3 ticks" in decided.reason


def test_set_keeps_the_keys_when_the_change_does_not_net_the_margin_more():
    decided = decide(plan("set", 10.0, 11.9, 5), ticks=3, margin=0.2)
    assert decided.operation is Operation.CLUSTERING and "not 20% more" in decided.reason
    assert decide(plan("set", 10.0, 12.1, 5), ticks=3, margin=0.2).operation is Operation.KEY_SELECTION


@pytest.mark.parametrize("mode", ["keep", "suggest"])
def test_keep_and_suggest_never_change_the_keys_and_name_the_wanted_ones(mode):
    decided = decide(plan(mode, 10.0, 500.0, 50), ticks=3, margin=0.2)
    assert decided.operation is (Operation.CLUSTERING if mode == "keep" else None)
    assert "wants keys (x) over (id)" in decided.reason and f"liquid: {mode}" in decided.reason
    assert decided.as_dict()["wanted"] == ["x"] and decided.as_dict()["keys"] == ["id"]


def test_the_table_s_own_keys_run_only_when_their_optimize_pays():
    same = plan("set", -5.0, 50.0, 9, wanted=("id",))
    assert decide(same, ticks=3, margin=0.2).operation is None
    paying = plan("set", 5.0, 50.0, 9, wanted=("ID",))  # Delta's keys compare case-insensitively here
    assert decide(paying, ticks=3, margin=0.2).operation is Operation.CLUSTERING


def test_a_streak_counts_ticks_wanting_the_same_keys_running():
    streak = Streak().after(("x",)).after(("x",))
    assert streak == Streak(("x",), 2)
    assert streak.after(("y", "x")) == Streak(("y", "x"), 1)


def test_delta_s_layout_is_a_hilbert_curve_from_two_keys():
    assert keys_layout(("a",)).curve == "z" and keys_layout(("a", "b")).curve == "hilbert"


def test_a_key_change_runs_full_only_when_re_clustering_every_file_nets_more():
    from optimizer.service.liquid import with_full

    changing = plan("set", 10.0, 50.0, 3)
    more = decide(with_full(changing, estimate_of(("x",), 80.0)), ticks=3, margin=0.2)
    assert more.operation is Operation.KEY_SELECTION
    assert more.full and more.decision is more.full_change and "with FULL" in more.reason
    less = decide(with_full(changing, estimate_of(("x",), 40.0)), ticks=3, margin=0.2)
    assert not less.full and less.decision is less.change and "without FULL" in less.reason
    assert less.as_dict()["full_change"]["net"] == 40.0


def test_a_change_that_pays_only_with_full_is_made_with_full():
    """New data alone is too little to pay for new keys (the liquid benchmark's shift: the change netted
    -5.4 cluster-s on the new data while re-clustering the table by the old keys netted +3.0); every file
    by the new keys pays: the change is weighed at that price."""
    from optimizer.service.liquid import with_full

    shifted = plan("set", 3.0, -5.4, 3)
    assert decide(shifted, ticks=3, margin=0.2).operation is Operation.CLUSTERING
    changed = decide(with_full(shifted, estimate_of(("x",), 30.0)), ticks=3, margin=0.2)
    assert changed.operation is Operation.KEY_SELECTION and changed.full and changed.decision is changed.full_change
    kept = decide(with_full(plan("set", 3.0, -5.4, 1), estimate_of(("x",), 30.0)), ticks=3, margin=0.2)
    assert kept.operation is Operation.CLUSTERING and not kept.full  # the streak still too short: no FULL job


def test_a_full_request_reaches_the_command_a_cluster_runs():
    from optimizer.features import FeatureSet
    from optimizer.service.executors import OptimizeRequest, optimize_command

    request = OptimizeRequest("/t", FeatureSet(), 1, "run", 0, liquid="set", full=True)
    assert "--full" in optimize_command(request)
    assert "--full" not in optimize_command(OptimizeRequest("/t", FeatureSet(), 1, "run", 0))


class _Conf:
    """A session's runtime configuration: only what was set (`spark.conf.get(key, None)`)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


def test_min_cube_size_defaults_to_100_gib_whatever_max_file_size_is_set_to():
    """Delta's default minCubeSize is 100 x maxFileSize's *default* (a constant), not 100 x the session's
    maxFileSize: a session writing 128 MiB files still re-clusters cubes up to 100 GiB."""
    from types import SimpleNamespace

    from optimizer.table.zcubes import MAX_FILE_SIZE_KEY, MIN_CUBE_SIZE_KEY, min_cube_size

    gib = 1024**3
    smaller_files = SimpleNamespace(conf=_Conf({MAX_FILE_SIZE_KEY: str(128 * 1024**2)}))
    assert min_cube_size(smaller_files) == 100 * gib  # type: ignore[arg-type]
    assert min_cube_size(SimpleNamespace(conf=_Conf({}))) == 100 * gib  # type: ignore[arg-type]
    configured = SimpleNamespace(conf=_Conf({MIN_CUBE_SIZE_KEY: "12345"}))
    assert min_cube_size(configured) == 12345  # type: ignore[arg-type]


class _Committer:
    """Delta's SQL committer on a liquid table clustered by (id) in a session whose Delta has no FULL: its
    parser fails on ``OPTIMIZE ... FULL`` (Delta 3.2's grammar has no FULL)."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.spark = object()
        self.table = SimpleNamespace(uri="file:/t")
        self.set: list[list[str]] = []

    def clustering_columns(self) -> tuple[str, ...]:
        return tuple(self.set[-1]) if self.set else ("id",)

    def set_clustering(self, keys) -> None:  # type: ignore[no-untyped-def]
        self.set.append(list(keys))

    def optimize(self, request):  # type: ignore[no-untyped-def]
        from optimizer.errors import TableAccessError

        if request.full:
            raise TableAccessError("[PARSE_SYNTAX_ERROR] Syntax error at or near 'FULL'")
        raise AssertionError("the test runs OPTIMIZE FULL only")


def test_full_on_a_delta_without_it_is_refused_before_the_key_change_commits(monkeypatch):
    from types import SimpleNamespace

    from optimizer.clustering.by_delta import apply_with_delta
    from optimizer.errors import UnsupportedTableError
    from optimizer.table import zcubes

    monkeypatch.setattr(zcubes, "session_release", lambda spark: (3, 2), raising=False)
    committer = _Committer()
    path = SimpleNamespace(liquid_table=True, liquid="set")

    with pytest.raises(UnsupportedTableError, match="OPTIMIZE FULL") as refused:
        apply_with_delta(committer, path, keys_layout(("x",)), {"runId": "r"}, 3, full=True)  # type: ignore[arg-type]

    assert committer.set == [] and "3.2" in str(refused.value) and "nothing was changed" in str(refused.value)


def test_a_cube_is_sealed_by_its_logical_size_as_delta_weighs_it_with_deletion_vectors():
    """Delta weighs a cube by ``estLogicalFileSize`` (the bytes left once a deletion vector's rows are
    gone): a cube of 120 bytes on disk, half its rows deleted, is below a minCubeSize of 100 and is
    re-clustered with the new data."""
    tags = {"ZCUBE_ID": "A", "ZCUBE_ZORDER_BY": '["a"]'}
    half_deleted = [
        ClusteredFile.of_tags(f"cube-{i}", 60, "liquid", tags, records=1_000, deleted=500) for i in range(2)
    ]
    assert all(f.cube == "A" for f in half_deleted)
    files = [cubed("new", 10), *half_deleted]
    assert paths(liquid_rewrite(files, ["a"], min_cube_size=100)) == {"new", "cube-0", "cube-1"}
    intact = [ClusteredFile.of_tags(f"cube-{i}", 60, "liquid", tags, records=1_000) for i in range(2)]
    assert paths(liquid_rewrite([cubed("new", 10), *intact], ["a"], min_cube_size=100)) == {"new"}


@pytest.mark.parametrize("local", [True, False])
def test_a_key_change_is_priced_over_the_files_delta_rewrites_for_the_new_keys(monkeypatch, local):
    """Back to keys the table had before: Delta's OPTIMIZE after the change re-clusters the new files *and*
    the cubes below minCubeSize already clustered by those keys; with FULL, every file but the sealed cubes
    of those keys. Both estimates are priced over exactly those files; FULL only for a job on the
    service's own session (`local`), whose Delta is known."""
    from types import SimpleNamespace

    from optimizer.service import liquid

    tagged = [
        cubed("new", 10),
        cubed("a-small", 10, "A1", keys=("a",)),
        cubed("a-sealed", 200, "A2", keys=("a",)),
        cubed("b-1", 10, "B1", keys=("b",)),
        cubed("b-2", 10, "B2", keys=("b",)),
    ]
    priced: dict[tuple[str, ...], list[set[str]]] = {}

    def by_keys(context, keys, files, **_):  # type: ignore[no-untyped-def]
        priced.setdefault(tuple(keys), []).append({f.path for f in files})
        return estimate_of(tuple(keys), 100.0 if tuple(keys) == ("a",) else 1.0)

    monkeypatch.setattr(liquid, "DeltaSql", lambda spark, uri: SimpleNamespace(clustering_columns=lambda: ("b",)))
    monkeypatch.setattr(liquid, "clustered_files", lambda spark, uri, version: tagged)
    monkeypatch.setattr(liquid, "min_cube_size", lambda spark: 100)
    monkeypatch.setattr(liquid, "supports_full", lambda spark: True)
    monkeypatch.setattr(liquid, "by_keys", by_keys)
    monkeypatch.setattr(liquid, "by_workload", lambda context, files, **_: estimate_of(("a",), 50.0))
    thresholds = SimpleNamespace(min_new_bytes=1, liquid_key_ticks=1, liquid_key_margin=0.0)
    context = SimpleNamespace(
        spark=object(), table=SimpleNamespace(spark_uri=lambda _: "file:/t/"), thresholds=thresholds
    )
    snapshot = SimpleNamespace(version=7, files=[SimpleNamespace(path=f.path, size=f.size) for f in tagged])

    plan = liquid.plan_liquid(  # `local`: a job on the service's own session, FULL priced too
        context,  # type: ignore[arg-type]
        snapshot,  # type: ignore[arg-type]
        {},
        mode="set",
        streak=Streak(),
        full_allowed=local,
    )

    assert plan.operation is Operation.KEY_SELECTION, plan.reason
    assert priced[("b",)] == [{"new", "b-1", "b-2"}]  # the table's keys: the new file and its small cubes
    with_full = [{"new", "a-small", "b-1", "b-2"}] if local else []
    assert priced[("a",)] == [{"new", "a-small"}, *with_full]  # the change; with FULL where it can run


def test_deltaopt_decisions_names_the_operation_as_databricks_history_does():
    from optimizer.service.logged import LoggedDecision

    changed = decide(plan("set", 10.0, 50.0, 3), ticks=3, margin=0.2)
    record = {"ts": "2024-06-01T12:00:00+00:00", "table": "events", "action": "optimize", "reason": changed.reason}
    logged = LoggedDecision.from_dict({**record, "liquid": changed.as_dict()})
    assert logged.liquid is not None
    assert logged.liquid.line() == ("liquid (set): AUTO_CLUSTERING_COLUMN_SELECTION; keys (id), the workload wants (x)")
    assert LoggedDecision.from_dict(record).liquid is None  # a plain table's line has none


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({}, ("snappy", 128 << 20, 1 << 30, False)),  # Delta's defaults, whatever deltaopt's own output is
        (
            {
                "spark.sql.parquet.compression.codec": "ZSTD",
                "spark.hadoop.parquet.block.size": "1048576",
                "spark.databricks.delta.optimize.maxFileSize": "5000000",
                "spark.databricks.io.skipping.mdc.sortWithinFiles": " True ",
            },
            ("zstd", 1 << 20, 5_000_000, True),
        ),
    ],
)
def test_delta_s_optimize_is_priced_as_delta_writes_its_files(conf, expected):
    """A liquid OPTIMIZE is Delta's writer: the estimate must not credit it with deltaopt's ZSTD and file
    size (the benchmark found every CLUSTERING estimate pricing SNAPPY -> ZSTD that Delta never wrote), nor
    with rows sorted within files unless Delta is set to sort them."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from optimizer.analysis.context import TableContext
    from optimizer.config import Thresholds
    from optimizer.estimate.liquid import as_delta_writes

    spark = SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: conf.get(key, default)))
    ours = Thresholds(codec="zstd", target_file_size=64 << 20)
    context = TableContext(spark, None, "t", None, ours, datetime.now(UTC))  # type: ignore[arg-type]

    delta = as_delta_writes(context, compare_layouts=False).thresholds

    output = delta.output
    assert (output.codec, output.row_group_bytes, delta.target_file_size, delta.sorted_within_files) == expected
    assert delta.file_count == "down" and ours.file_count == "nearest"  # Delta: max(1, bytes / maxFileSize)
    assert delta.estimate_compression is True  # compaction and codec are still priced: only the order is not
    assert delta.compare_layouts is False and ours.codec == "zstd"  # the table's own thresholds untouched


@pytest.mark.parametrize(
    ("value", "release", "sorts"),
    [
        (None, (4, 0), False),  # Delta's default
        ("false", (4, 0), False),
        ("TRUE", (4, 0), True),
        (" true ", None, True),  # a release unknown (Spark Connect): as the conf says
        ("true", (3, 3), False),  # before Delta 4.0 the conf does not exist and no file is sorted
    ],
)
def test_delta_sorts_a_files_rows_only_where_its_conf_says_so_on_a_release_that_has_it(value, release, sorts):
    from optimizer.estimate.liquid import SORT_WITHIN_FILES_KEY, sorts_within_files

    conf = {SORT_WITHIN_FILES_KEY: value} if value is not None else {}
    assert sorts_within_files(_Conf(conf), release) is sorts
