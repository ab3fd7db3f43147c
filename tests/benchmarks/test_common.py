"""Report helpers shared by the benchmarks."""

from __future__ import annotations

from benchmarks.common import short_key_lists


def test_long_key_lists_shrink_to_their_size_and_short_lists_stay():
    long = ", ".join(str(k) for k in range(400))
    text = f'{{"sop": ["l_suppkey IN ({long})", "l_shipmode IN (\'AIR\', \'MAIL\')"]}}'
    assert short_key_lists(text) == '{"sop": ["l_suppkey IN (<400 keys>)", "l_shipmode IN (\'AIR\', \'MAIL\')"]}'


def test_the_experts_columns_break_ties_by_name_whatever_order_the_scans_list_them_in():
    from benchmarks.delta_peers import expert_columns

    scans = [("b = 1", "a > 2"), ("a < 3", "b = 2"), ("c = 1",), ("c = 2",), ("z IN (1)",)]
    assert expert_columns(scans, 3) == ("a", "b", "c")
    assert expert_columns([s[::-1] for s in reversed(scans)], 3) == ("a", "b", "c")
    assert expert_columns(scans, 2) == ("a", "b")  # a, b and c tie at 2 scans each: the first two by name
