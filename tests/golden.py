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
