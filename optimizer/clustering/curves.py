"""Space-filling curves over range ids: one long per row whose order lays the rows out.

Each curve exists twice, as a Spark expression (the rewrite computes every row's key in the JVM: no
Python UDF, so it runs alike on clusters and over Spark Connect) and as numpy over the driver's sample
(whose keys give the file cuts), and the two must agree bit for bit.

* **Z-order** (`interleave`): bit t of dimension i goes to position t * d + i. Cheap, but the curve
  jumps: consecutive keys can be far apart at every power of two, so a file's rows may span distant
  boxes. A bit pattern (`FeatureSet.precision`, `key_bit_order`) may give some dimensions more of the
  leading bits instead: the workload's narrow, frequent filters get finer cuts (learned Z-order).
* **Hilbert** (`with_hilbert`, `hilbert_ids`): consecutive keys are neighbours on the grid (they differ
  by 1 in exactly one dimension), so a run of keys, a file or a row group, is a compact box with fewer,
  narrower min/max ranges. Delta's liquid clustering orders by a Hilbert curve over range ids for its
  2-4 keys; this is the same kind of curve (orientation may differ). Computed as a state machine
  (Hamilton, "Compact Hilbert indices", 2006: the state is the sub-cube's entry point and direction):
  per level from the top, the level's d bits form a cell number and one table gives, for (state, cell),
  the next state and the level's d-bit Hilbert digit, packed as ``next_state << d | digit``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from optimizer.errors import ClusteringError
from optimizer.features import KEY_BITS, Curve

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

HILBERT_MAX_DIMENSIONS = 5  # its table has d * 2^(d-1) states of 2^d cells: 2,560 entries at 5
LEVELS_PER_COLUMN = 4  # Hilbert levels nested in one expression (`with_hilbert`)
CURVE_NAMES: dict[Curve, str] = {"z": "Z-order", "hilbert": "Hilbert curve"}  # in progress lines and records


def check_curve(curve: Curve, dimensions: int, precision: Sequence[int] = ()) -> None:
    """Refuse, in one line, a curve that cannot order `dimensions` dimensions, or a bit pattern it
    cannot follow (before any work)."""
    if curve == "hilbert" and dimensions > HILBERT_MAX_DIMENSIONS:
        raise ClusteringError(
            f"the Hilbert curve orders at most {HILBERT_MAX_DIMENSIONS} dimensions; this layout has {dimensions}"
        )
    if precision and curve != "z":
        raise ClusteringError(f"a bit pattern applies to Z-order only, not to the {CURVE_NAMES[curve]}")
    wrong = sorted({i for i in precision if not 0 <= i < dimensions})
    if wrong:
        raise ClusteringError(f"the bit pattern names dimension(s) {wrong}; this layout has {dimensions}")


def curve_ids(
    curve: Curve, ids: Sequence[np.ndarray], bits: Sequence[int], *, precision: Sequence[int] = ()
) -> np.ndarray:
    """The keys `with_curve_key` computes in Spark, over arrays of range ids (one per dimension)."""
    return hilbert_ids(ids, bits) if curve == "hilbert" else interleave_ids(ids, bits, precision)


def with_curve_key(
    frame: DataFrame,
    name: str,
    ids: Sequence[Column],
    bits: Sequence[int],
    *,
    curve: Curve,
    scratch: str,
    precision: Sequence[int] = (),
) -> DataFrame:
    """`frame` with the curve's key of the range ids `ids` (of `bits` bits each) in column `name`;
    columns under the prefix `scratch` are used on the way and dropped. `precision` is Z-order's bit
    pattern (`key_bit_order`); the feature set refuses one on a Hilbert curve."""
    if curve == "hilbert":
        return with_hilbert(frame, name, ids, bits, scratch=scratch)
    return frame.withColumn(name, interleave(ids, bits, precision))


def key_bit_order(bits: Sequence[int], precision: Sequence[int] = ()) -> list[tuple[int, int]]:
    """(dimension, bit of its range id) at each key position, least significant first.

    Round-robin (no `precision`): bit t of dimension i at position t * d + i, a dimension with fewer bits
    dropping out of the higher rounds. With `precision` (dimension indexes, most significant first), the
    top key bits are those: each entry takes its dimension's highest bit not yet placed, an entry past
    the bits the dimension's range ids have (fewer ranges than the pattern was chosen for) is passed
    over, and the bits the pattern leaves keep their round-robin order below it. Refused in one line
    when the key would not fit in a long."""
    round_robin = [(i, t) for t in range(max(bits, default=0)) for i in range(len(bits)) if t < bits[i]]
    if len(round_robin) > KEY_BITS:
        raise ClusteringError(f"Z-value needs {len(round_robin)} bits; at most {KEY_BITS} fit in a long")
    if not precision:
        return round_robin
    given = [0] * len(bits)
    leading: list[tuple[int, int]] = []  # most significant first
    for i in precision:
        if given[i] < bits[i]:
            given[i] += 1
            leading.append((i, bits[i] - given[i]))
    placed = set(leading)
    return [p for p in round_robin if p not in placed] + leading[::-1]


def interleave(ids: Sequence[Column], bits: Sequence[int], precision: Sequence[int] = ()) -> Column:
    """The Z-value: the ids' bits at the positions `key_bit_order` gives (round-robin by default, so
    every dimension gets equal weight at every level of the curve)."""
    from pyspark.sql import functions as F

    key = F.lit(0).cast("long")
    for position, (i, t) in enumerate(key_bit_order(bits, precision)):
        bit = F.shiftright(ids[i], t).bitwiseAND(F.lit(1))
        key = key.bitwiseOR(F.shiftleft(bit, position))
    return key


def interleave_value(ids: Sequence[int], bits: Sequence[int], precision: Sequence[int] = ()) -> int:
    """The Z-value `interleave` computes in Spark, for one row in Python (`interleave_ids` for many)."""
    return int(interleave_ids([np.array([i], dtype=np.int64) for i in ids], bits, precision)[0])


def interleave_ids(ids: Sequence[np.ndarray], bits: Sequence[int], precision: Sequence[int] = ()) -> np.ndarray:
    """`interleave_value` over arrays of range ids."""
    key = np.zeros(len(ids[0]), dtype=np.int64)
    for position, (i, t) in enumerate(key_bit_order(bits, precision)):
        key |= ((ids[i] >> t) & 1) << position
    return key


def hilbert_levels(bits: Sequence[int]) -> int:
    """The bits every dimension gets on the Hilbert curve (it needs as many for each): the most any
    has. A dimension with fewer has its ids shifted to the high end (``id << (levels - bits)``), which
    keeps their order. Refused in one line when the key would not fit in a long."""
    check_curve("hilbert", len(bits))
    levels = max(bits)
    if levels * len(bits) > KEY_BITS:
        raise ClusteringError(
            f"a Hilbert key over {len(bits)} dimensions of {levels} bits needs {levels * len(bits)} bits;"
            f" at most {KEY_BITS} fit in a long"
        )
    return levels


@functools.cache
def hilbert_table(dimensions: int) -> tuple[int, ...]:
    """The Hilbert state machine for `dimensions` dimensions: entry ``state << d | cell`` holds
    ``next_state << d | digit``. States are numbered as first reached from state 0 (entry point 0,
    direction 0), so only reachable ones (d * 2^(d-1)) are listed."""
    d = dimensions
    numbers: dict[tuple[int, int], int] = {(0, 0): 0}
    order = [(0, 0)]
    table: list[int] = []
    for state in order:  # grows while the loop walks it: a breadth-first walk of the reachable states
        for cell in range(1 << d):
            digit, following = _hilbert_step(state, cell, d)
            if following not in numbers:
                numbers[following] = len(order)
                order.append(following)
            table.append(numbers[following] << d | digit)
    return tuple(table)


def _hilbert_step(state: tuple[int, int], cell: int, d: int) -> tuple[int, tuple[int, int]]:
    """One level of Hamilton's algorithm: in the sub-cube entered at corner `entry` along axis
    `direction`, the cell's Hilbert digit (the inverse Gray code of the cell in the sub-cube's frame)
    and the state of the chosen sub-cube."""
    entry, direction = state
    local = _rotate_right(cell ^ entry, direction + 1, d)
    digit = _gray_inverse(local)
    following_entry = entry ^ _rotate_left(_subcube_entry(digit), direction + 1, d)
    following_direction = (direction + _subcube_direction(digit, d) + 1) % d
    return digit, (following_entry, following_direction)


def _rotate_right(value: int, by: int, d: int) -> int:
    by %= d
    return ((value >> by) | (value << (d - by))) & ((1 << d) - 1)


def _rotate_left(value: int, by: int, d: int) -> int:
    return _rotate_right(value, d - by % d, d)


def _gray_inverse(gray: int) -> int:
    value, shifted = gray, gray >> 1
    while shifted:
        value ^= shifted
        shifted >>= 1
    return value


def _trailing_ones(value: int) -> int:
    count = 0
    while value & 1:
        value >>= 1
        count += 1
    return count


def _subcube_entry(digit: int) -> int:
    """The corner where the curve enters sub-cube `digit` (Hamilton's e(i))."""
    if digit == 0:
        return 0
    even = 2 * ((digit - 1) // 2)
    return even ^ (even >> 1)


def _subcube_direction(digit: int, d: int) -> int:
    """The axis along which the curve leaves sub-cube `digit`'s entry (Hamilton's d(i))."""
    if digit == 0:
        return 0
    return _trailing_ones(digit - 1 if digit % 2 == 0 else digit) % d


def hilbert_ids(ids: Sequence[np.ndarray], bits: Sequence[int]) -> np.ndarray:
    """The Hilbert keys `with_hilbert` computes in Spark, over arrays of range ids."""
    d = len(ids)
    levels = hilbert_levels(bits)
    table = np.array(hilbert_table(d), dtype=np.int64)
    shifted = [np.asarray(column, dtype=np.int64) << (levels - b) for column, b in zip(ids, bits, strict=True)]
    state = np.zeros(len(shifted[0]), dtype=np.int64)
    key = np.zeros(len(shifted[0]), dtype=np.int64)
    for level in range(levels - 1, -1, -1):
        cell = np.zeros_like(state)
        for i, column in enumerate(shifted):
            cell |= ((column >> level) & 1) << i
        entry = table[(state << d) | cell]
        key = (key << d) | (entry & ((1 << d) - 1))
        state = entry >> d
    return key


def hilbert_value(ids: Sequence[int], bits: Sequence[int]) -> int:
    """The Hilbert key of one point in Python (`hilbert_ids` for many)."""
    return int(hilbert_ids([np.array([i], dtype=np.int64) for i in ids], bits)[0])


def with_hilbert(frame: DataFrame, name: str, ids: Sequence[Column], bits: Sequence[int], *, scratch: str) -> DataFrame:
    """`frame` with the Hilbert key of `ids` in column `name`: per level from the top, the table entry
    (`hilbert_table`) of the previous entry's state and the level's cell, its digit appended to the key.
    A level's entry nests the previous one, so `LEVELS_PER_COLUMN` levels at a time are one expression
    (Spark's generated code computes each shared entry once), then the state and the key so far become
    columns (under the prefix `scratch`, dropped at the end) the next levels start from. Measured on 2M
    TPC-H rows, 4 dimensions of 6 bits: about as fast as Z-order; one column per level took 3x as long
    (a projection per level, copying every row), and all levels nested in one expression ran the code
    generator out of memory at 31 levels."""
    from pyspark.sql import functions as F

    d = len(ids)
    levels = hilbert_levels(bits)
    # one literal of the whole table (a Spark Connect client sends it as an array of literals)
    table = F.lit(np.array(hilbert_table(d), dtype=np.int64))
    shifted = [F.shiftleft(c.cast("long"), levels - b) for c, b in zip(ids, bits, strict=True)]
    state = F.lit(0).cast("long")
    key = F.lit(0).cast("long")
    for level in range(levels - 1, -1, -1):
        cell = F.lit(0).cast("long")
        for i, column in enumerate(shifted):
            cell = cell.bitwiseOR(F.shiftleft(F.shiftright(column, level).bitwiseAND(F.lit(1)), i))
        index = (F.shiftleft(state, d).bitwiseOR(cell) + 1).cast("int")  # ANSI sessions cast no long to int
        entry = F.element_at(table, index)
        key = F.shiftleft(key, d).bitwiseOR(entry.bitwiseAND(F.lit((1 << d) - 1)))
        state = F.shiftright(entry, d)
        if level and (levels - level) % LEVELS_PER_COLUMN == 0:
            frame = frame.withColumns({f"{scratch}state": state, f"{scratch}key": key})
            state = F.col(f"{scratch}state")
            key = F.col(f"{scratch}key")
    return frame.withColumn(name, key).drop(f"{scratch}state", f"{scratch}key")
