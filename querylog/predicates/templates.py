"""`scan_filters` memoised over statement templates: the same query with other literals is not re-parsed.

Logs repeat a few query templates with changing literals. Most of a statement's cost is sqlglot's
parse, ``qualify``, ``pushdown_predicates`` and the canonical passes, and none of them looks at the
value of a literal that is merely compared with a column. So `StatementTemplates` tokenises each
statement (a fraction of a parse), and for a template it has seen fills the literals into the scans
it derived once. A literal is a **slot** (its value is not part of the template) only where no pass
can depend on its value:

* it is compared with a plain column: ``col OP lit``, ``lit OP col`` (OP one of = <> < <= > >=) or
  ``col BETWEEN lit AND lit``, bare or typed (``DATE '...'``, ``CAST('...' AS TIMESTAMP)``);
* no other slot is compared with the same column in the same direction (``x > 5 AND x > 3`` is merged
  by ``simplify``, ``x = 1 OR x = 2`` becomes an IN list sorted by value: values matter there);
* it is a string, or a number in plain decimal notation (a number such as ``1e3`` makes the statement
  take the full path); it is written into the filled scans as sqlglot and the canonical passes write it.

Every other literal (IN lists, LIKE patterns, arithmetic, LIMIT, GROUP BY 1, function arguments) is
part of the template's key. A template's scans are derived from the statement with each slot replaced
by a sentinel, and are checked on the statement that derived it: filled with its own literals they
must equal the scans derived from it directly, or the template is never used (the full path serves
it). Scan filters are sets, so the order that values could give them is re-established after filling.
`tests/querylog/test_templates.py` replays the golden statements and adversarial shapes with varied
literals through both paths.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from querylog.errors import PredicateError
from querylog.predicates.attribute import Identity, JoinKey, QueryScans, Schema, TableScan, scan_filters, table_identity
from querylog.predicates.parse import DIALECT, parse_query
from querylog.predicates.truncate import check_statement_size

LITERAL_TOKENS = (TokenType.STRING, TokenType.NUMBER)
DIRECTIONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<",
    exp.GT: ">",
    exp.GTE: ">",
}
MIRRORED = {"=": "=", "<>": "<>", "<": ">", ">": "<"}
TYPED = (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?")
ARITHMETIC = (exp.Column, exp.Identifier, exp.Literal, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)
SENTINEL = re.compile(r"'dltslot(\d{4})x'|9753186420(\d{4})")


def _sentinel(kind: TokenType, index: int) -> str:
    """A literal's stand-in (as it appears in SQL and in canonical text): unique and recognisable."""
    return f"'dltslot{index:04d}x'" if kind == TokenType.STRING else f"9753186420{index:04d}"


def _rendered(token: Token) -> str | None:
    """How the canonical text writes this literal: sqlglot's own rendering (numbers as written: Spark
    types ``2.0`` a DECIMAL and ``2`` an INT); None for a number written in a form that could parse
    differently."""
    if token.token_type == TokenType.NUMBER:
        if not PLAIN_NUMBER.fullmatch(token.text):
            return None
        return exp.Literal.number(token.text).sql(DIALECT)
    return exp.Literal.string(token.text).sql(DIALECT)


# A canonical text cut at its slots: literal pieces and slot numbers, alternating.
Pieces = tuple[str | int, ...]


_JoinTemplate = tuple[str, str, str, tuple[Pieces, ...]]  # a JoinKey, its filters cut at their slots
_ScanTemplate = tuple[str, str, tuple[Pieces, ...], tuple[str, ...], tuple[_JoinTemplate, ...]]  # a TableScan


@dataclass(frozen=True)
class _Template:
    """A statement template's scans, as `QueryScans` with every canonical text cut at its slots."""

    scans: tuple[_ScanTemplate, ...]
    join_predicates: int
    unattributed: tuple[Pieces, ...]
    unresolved: tuple[str, ...]

    def fill(self, values: Sequence[str]) -> QueryScans:
        def text(pieces: Pieces) -> str:
            return "".join(values[p] if isinstance(p, int) else p for p in pieces)

        def texts(many: tuple[Pieces, ...]) -> tuple[str, ...]:
            return tuple(sorted({text(p) for p in many}))

        scans = tuple(
            TableScan(
                table,
                alias,
                texts(filters),
                columns,
                tuple(JoinKey(c, other, oc, texts(of)) for c, other, oc, of in joins),
            )
            for table, alias, filters, columns, joins in self.scans
        )
        return QueryScans(scans, self.join_predicates, tuple(text(p) for p in self.unattributed), self.unresolved)


def _cut(text: str) -> Pieces:
    pieces: list[str | int] = []
    position = 0
    for match in SENTINEL.finditer(text):
        pieces += [text[position : match.start()], int(match.group(1) or match.group(2))]
        position = match.end()
    pieces.append(text[position:])
    return tuple(p for p in pieces if p != "")


def _template(scans: QueryScans) -> _Template:
    return _Template(
        tuple(
            (
                s.table,
                s.alias,
                tuple(_cut(f) for f in s.filters),
                s.columns,
                tuple((k.column, k.other, k.other_column, tuple(_cut(f) for f in k.other_filters)) for k in s.joins),
            )
            for s in scans.scans
        ),
        scans.join_predicates,
        tuple(_cut(u) for u in scans.unattributed),
        scans.unresolved,
    )


def _operand(node: exp.Expr) -> exp.Expr:
    """The comparison operand a literal is: itself, or the typed literal (``DATE '...'``) around it."""
    parent = node.parent
    if isinstance(parent, exp.Cast) and parent.to.this in TYPED and parent.this is node:
        return parent
    return node


def _compared(expression: exp.Expr) -> bool:
    """A column, or arithmetic over columns and constants: no function whose rewrite could depend on
    the value it is compared with (``DATE_TRUNC(...) = DATE '...'`` becomes a range when aligned)."""
    return all(isinstance(n, ARITHMETIC) for n in expression.walk()) and expression.find(exp.Column) is not None


def _slot_direction(literal: exp.Literal) -> tuple[str, str] | None:
    """(compared expression, direction) when `literal` is compared with a column expression, else None."""
    operand = _operand(literal)
    parent = operand.parent
    if isinstance(parent, exp.Between) and _compared(parent.this):
        if parent.args.get("low") is operand:
            return parent.this.sql(DIALECT).lower(), ">"
        if parent.args.get("high") is operand:
            return parent.this.sql(DIALECT).lower(), "<"
        return None
    if type(parent) in DIRECTIONS and isinstance(parent, exp.Binary):
        direction = DIRECTIONS[type(parent)]
        if parent.expression is operand and _compared(parent.this):
            return parent.this.sql(DIALECT).lower(), direction
        if parent.this is operand and _compared(parent.expression):
            return parent.expression.sql(DIALECT).lower(), MIRRORED[direction]
    return None


def slot_positions(sql: str, tokens: Sequence[Token]) -> tuple[int, ...]:
    """Indices of the literal tokens of `sql` that are slots (see the module docstring), ascending."""
    try:
        query = parse_query(sql)
    except PredicateError:
        return ()
    by_start = {t.start: i for i, t in enumerate(tokens) if t.token_type in LITERAL_TOKENS}
    found: dict[tuple[str, str], list[int]] = {}
    for literal in query.find_all(exp.Literal):
        start = literal.meta.get("start") if literal.meta else None
        if start not in by_start:
            continue
        slot = _slot_direction(literal)
        if slot is not None:
            found.setdefault(slot, []).append(by_start[start])
    return tuple(sorted(i for positions in found.values() if len(positions) == 1 for i in positions))


@dataclass
class TemplateStats:
    """How statements were answered (filled + full = statements)."""

    filled: int = 0  # answered from a template
    derived: int = 0  # templates derived (each also runs the full path once, to check it)
    rejected: int = 0  # templates whose check failed: their statements take the full path
    full: int = 0  # statements that took the full path


@dataclass
class StatementTemplates:
    """`scan_filters` for one schema and identity, memoised over templates (see the module docstring)."""

    schema: Schema | None = None
    identity: Identity = table_identity
    capacity: int = 20_000  # shapes and templates kept; past it the memo starts afresh (a long-running recorder)
    stats: TemplateStats = dataclasses.field(default_factory=TemplateStats)

    def __post_init__(self) -> None:
        self._tokenizer = Dialect.get_or_raise(DIALECT).tokenizer_class()
        self._slots: dict[tuple[object, ...], tuple[int, ...]] = {}  # shape -> slot token indices, ascending
        self._templates: dict[tuple[object, ...], _Template | None] = {}  # None: its check failed
        self._once: set[tuple[object, ...]] = set()  # shapes and templates seen once (not derived yet)

    def __call__(self, sql: str) -> QueryScans:
        """The scans of `sql`, as `scan_filters` derives them. Raises `PredicateError`.

        Work is spent on what recurs: a statement shape seen for the first time, or a template seen
        for the first time, takes the full path; the second sighting derives the template (and checks
        it); later ones are filled in."""
        check_statement_size(sql)
        try:
            tokens = self._tokenizer.tokenize(sql)
        except SqlglotError:
            return self._full(sql)
        # comments are kept: sqlglot may carry them into a conjunct's text
        shape = tuple(
            (t.token_type, None if t.token_type in LITERAL_TOKENS else t.text, tuple(t.comments)) for t in tokens
        )
        slots = self._slots.get(shape)
        if slots is None:
            if self._remember(shape):
                return self._full(sql)
            slots = self._slots[shape] = slot_positions(sql, tokens)
        values: list[str] = []
        for index in slots:
            rendered = _rendered(tokens[index])
            if rendered is None:
                return self._full(sql)
            values.append(rendered)
        fixed = tuple(t.text for i, t in enumerate(tokens) if t.token_type in LITERAL_TOKENS and i not in slots)
        key = (shape, fixed)
        if key in self._templates:
            template = self._templates[key]
            if template is None:
                return self._full(sql)
            self.stats.filled += 1
            return template.fill(values)
        if self._remember(key):
            return self._full(sql)
        return self._derive(sql, tokens, slots, values, key)

    def _remember(self, key: tuple[object, ...]) -> bool:
        """True (and remembered) when `key` is seen for the first time."""
        if key in self._once:
            self._once.discard(key)
            return False
        if len(self._once) + len(self._templates) + len(self._slots) >= self.capacity:
            self._once.clear()
            self._templates.clear()
            self._slots.clear()
        self._once.add(key)
        return True

    def _full(self, sql: str) -> QueryScans:
        self.stats.full += 1
        return scan_filters(sql, self.schema, self.identity)

    def _derive(
        self, sql: str, tokens: Sequence[Token], slots: Sequence[int], values: Sequence[str], key: tuple[object, ...]
    ) -> QueryScans:
        """Derive the template from the statement with sentinels in its slots; keep it only if it gives
        this statement's own scans."""
        direct = self._full(sql)  # raises for a statement the full path rejects: no template then
        if SENTINEL.search(sql) or direct.dropped:  # own text could be mistaken for a slot; or it was cut
            self._templates[key] = None
            return direct
        pieces = []
        position = 0
        for index, token_index in enumerate(slots):
            token = tokens[token_index]
            pieces += [sql[position : token.start], _sentinel(token.token_type, index)]
            position = token.end + 1
        pieces.append(sql[position:])
        self.stats.derived += 1
        try:
            with_sentinels = scan_filters("".join(pieces), self.schema, self.identity) if slots else direct
            template: _Template | None = _template(with_sentinels)
        except PredicateError:
            template = None
        if template is None or template.fill(values) != direct:
            self.stats.rejected += 1
            template = None
        self._templates[key] = template
        return direct
