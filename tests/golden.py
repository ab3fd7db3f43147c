"""Golden-file cases in the spirit of sqlglot's optimizer fixtures.

A file holds blocks separated by blank lines. Each block starts with ``# title: ...``; an optional
``# sql: relative/path.sql`` names the input file, otherwise the block's plain lines are the input;
lines starting with ``> `` are the expected output, one item per line; other ``# key: value`` lines
are the case's settings (`Case.meta`). A block of comments alone is a note on the file. Adding a case
is adding a block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Case:
    title: str
    source: str
    expected: tuple[str, ...]
    meta: dict[str, str] = field(default_factory=dict)


def load_cases(name: str) -> list[Case]:
    path = FIXTURES / name
    cases = []
    for block in path.read_text().split("\n\n"):
        lines = [line for line in block.strip().splitlines() if line.strip()]
        if not lines or (all(line.startswith("#") for line in lines) and not lines[0].startswith("# title: ")):
            continue
        if not lines[0].startswith("# title: "):
            raise ValueError(f"{path}: block does not start with '# title:': {lines[0]!r}")
        title = lines[0][len("# title: ") :]
        source_lines = [line for line in lines[1:] if not line.startswith(("> ", "# "))]
        sql_file = [line for line in lines[1:] if line.startswith("# sql: ")]
        source = (FIXTURES / sql_file[0][len("# sql: ") :]).read_text() if sql_file else "\n".join(source_lines)
        expected = tuple(line[2:] for line in lines[1:] if line.startswith("> "))
        meta = dict(line[2:].split(": ", 1) for line in lines[1:] if line.startswith("# ") and ": " in line)
        cases.append(Case(title, source, expected, meta))
    return cases


UPDATE = "DELTAOPT_UPDATE_GOLDEN"  # set to 1 to rewrite golden files from what the code gives now


def json_shape(value: object, path: str = "") -> list[str]:
    """The shape of a JSON value as sorted ``path: type`` lines (lists by their first element), so a
    golden file holds a record's schema, not its numbers."""
    if isinstance(value, dict):
        lines = [f"{path or '.'}: object"]
        for key in sorted(value):
            lines += json_shape(value[key], f"{path}.{key}")
        return lines
    if isinstance(value, list):
        return [f"{path}: array", *(json_shape(value[0], f"{path}[]") if value else [])]
    kind = {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}[type(value)]
    return [f"{path}: {kind}"]


def masked(text: str, *literals: str) -> list[str]:
    """`text`'s lines with every run of digits as ``#`` and each of `literals` (paths) as ``<...>``."""
    import re

    for i, literal in enumerate(literals):
        text = text.replace(literal, f"<{i}>")
    return [re.sub(r"\d+", "#", line).rstrip() for line in text.splitlines()]


def check_golden(name: str, lines: list[str]) -> None:
    """`lines` equal the golden file `fixtures/<name>` (rewritten instead when DELTAOPT_UPDATE_GOLDEN=1)."""
    import os

    path = FIXTURES / name
    if os.environ.get(UPDATE) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    expected = path.read_text().splitlines()
    assert lines == expected, f"{name} changed (if intended, rerun with {UPDATE}=1 and review the diff)"
