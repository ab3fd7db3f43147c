"""Errors raised by the query-log package.

Bad *input* (a statement that does not parse, a garbage event-log line) is not an error to the caller:
it is quarantined with its reason. These exceptions signal problems the caller must handle.
"""

from __future__ import annotations


class QueryLogError(Exception):
    """Root of the query-log package's errors."""


class PredicateError(QueryLogError):
    """A predicate could not be parsed, attributed or normalised."""


class UnsafeExpressionError(PredicateError):
    """An expression uses a function or construct that is not on the evaluation allow-list."""


class LogTableError(QueryLogError):
    """The query-log table is missing, unreadable, or has an unsupported schema version."""


class ImportSourceError(QueryLogError):
    """An import source (SQL file, history export, event log) cannot be opened at all."""


class SchemaSourceError(QueryLogError):
    """A schema source (DDL or YAML file, Delta location, catalog) cannot be read or is malformed."""
