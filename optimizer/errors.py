"""Errors raised by the optimizer and cost model.

One small hierarchy so callers can catch precisely: the CLI and the service catch `DeltaOptError` (and
the lower packages' roots, `querylog.errors.QueryLogError` and `costmodel.errors.CostModelError`: the
`KNOWN` tuple), report the message and keep going with the next table.
"""

from __future__ import annotations

from costmodel.errors import CostModelError
from querylog.errors import QueryLogError


class DeltaOptError(Exception):
    """Root of the optimizer's errors."""


class ConfigError(DeltaOptError):
    """The YAML configuration is unreadable or invalid; the message names key, value and expectation."""


class SparkRuntimeError(DeltaOptError):
    """A SparkSession could not be built or reached."""


class TableAccessError(DeltaOptError):
    """A Delta table could not be read or written."""


class TableNotFoundError(TableAccessError):
    """No Delta table exists at the given location."""


class UnsupportedTableError(TableAccessError):
    """The table uses a Delta feature deltaopt cannot honour (e.g. deletion vectors); nothing was done."""


class RewriteValidationError(TableAccessError):
    """A rewrite was refused before committing: a file is missing, not active, or has the wrong schema."""


class CommitConflictError(TableAccessError):
    """A concurrent commit removed files this rewrite needs; the rewrite gave up and committed nothing."""


class CommitOutcomeUnknownError(TableAccessError):
    """A commit attempt failed and the log could not say whether it landed; every written file is kept."""


class FeatureError(DeltaOptError):
    """A clustering feature cannot be evaluated: not on the allow-list, unparseable, or refused by Spark."""


class ClusteringError(DeltaOptError):
    """The OPTIMIZE job could not build the requested layout."""


class JobSubmissionError(DeltaOptError):
    """A job could not be sent to the cluster chosen to run it."""


KNOWN: tuple[type[Exception], ...] = (DeltaOptError, QueryLogError, CostModelError)  # errors with a clear message


# Python's own kinds of error: a wrong call in deltaopt, whose traceback must stay wherever a failure from
# Spark becomes one line or a warning. PySpark's own argument checks raise errors of these kinds too
# (PySparkTypeError, PySparkValueError...), though they are PySparkExceptions.
PYTHON_BUGS: tuple[type[Exception], ...] = (
    TypeError,
    ValueError,
    AttributeError,
    NameError,
    LookupError,
    AssertionError,
    ImportError,
    NotImplementedError,
)
