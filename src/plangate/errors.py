"""The exception tree of plangate.

Two roots, so callers can tell whose fault a failure is; every class plangate raises on purpose is drawn here,
with the module that defines it when that is not this one (``tests/test_errors.py`` checks the drawing against
the code)::

    PlangateError
    ├── UserError                        the caller misused the API or wrote bad input
    │   ├── ConditionSyntaxError         a condition expression does not parse (conditions/errors.py)
    │   ├── FormulaError                 a formula file, its schema, extends or cooking is wrong
    │   │   ├── FormulaNotFound          no formula of that name on the search path
    │   │   └── FormulaSchemaError       a formula that breaks the file format (formulas/_schema_errors.py)
    │   ├── VarTypeError                 a var's value that does not read as its type (formulas/variables.py)
    │   ├── ConfigError                  a setting, an option or an argument is invalid
    │   │   ├── ConfigFileError          plangate.toml cannot be used (config.py)
    │   │   ├── ToolDefinitionError      a tool cannot be built from what was given (tools/errors.py)
    │   │   ├── AggregateError           a query names what its source lacks (tools/data/aggregate.py)
    │   │   ├── SemanticError            a semantic layer that cannot be used (tools/data/semantic.py)
    │   │   └── ToolsDiffer              a run's tools are not this process's (runs/tools.py)
    │   ├── NotFoundError                a run, step or interaction id that does not exist (for this owner)
    │   ├── RunLeased                    another live process holds the run's lease (it advances the run)
    │   ├── InteractionError             a resolution that cannot be applied
    │   │   ├── StaleInteraction         the interaction is not the run's open one, or was already resolved
    │   │   └── FormulaChangedError      a run's formula file changed since it was cooked (formulas/retry.py)
    │   ├── UsageError                   an object used out of order (a one-shot stream iterated twice)
    │   ├── EventFormatError             data that is not a valid event of this format (events/wire.py)
    │   ├── ToolArgumentsError           a tool call's arguments break the tool's schema (tools/errors.py)
    │   ├── UnknownToolError             no tool of that name is registered (tools/errors.py)
    │   ├── QueryRefused                 the read-only SQL guard refused a query (tools/data/results.py)
    │   ├── ScheduleRefused              the week planner refused a change (tools/schedule/errors.py)
    │   ├── StepsFileError               a steps file for check-condition cannot be used (cli/_conditions.py)
    │   └── SourceError                  an owner's data source cannot be registered (server/_sources.py)
    └── RunError                         something failed while running
        ├── ModelBehaviorError           a model answered with something the protocol cannot use
        │   ├── DecisionParseError       a decision that does not decode (decisions/errors.py)
        │   └── ScriptExhaustedError     a scripted model ran out of responses (models/errors.py)
        ├── ModelProviderError           the model provider failed (models/errors.py, with its subtree)
        │   ├── ModelAuthenticationError
        │   ├── ModelRequestError
        │   ├── ModelRateLimitError
        │   └── ModelUnavailableError
        │       └── ModelTimeoutError
        ├── ToolError                    a tool failed in a way that is not an observation
        │   └── McpServerError           an MCP server cannot be started, initialised or listed (tools/mcp.py)
        ├── DataSourceError              a data source could not answer (tools/data/results.py)
        │   ├── QueryTimeout             a query ran past its time limit
        │   └── SourceForbidden          a source that may never be queried (the store, a privileged role)
        ├── ScopeError                   the data a question is about cannot be described (copilot/_scope.py)
        ├── BrokerError                  the workers' broker cannot be reached (workers/queue.py)
        └── StoreError                   the store cannot be read or written
            ├── SchemaVersionError       the store was written by a newer plangate
            ├── LeaseLost                a commit fenced by a lease that is no longer current (store/base.py)
            ├── WriteIntentConflict      the write of that key may have run already (store/base.py)
            └── DocumentConflict         a document changed since it was read (store/documents.py)

Control-flow signals are not errors, never derive from the classes above and are never caught as failures;
each is caught by the code that raised it (or, for ``Problem``, by the server's handler)::

    Signal
    ├── Problem                          a route answers with a problem document (server/_problems.py)
    ├── NoAnswer                         the terminal gave no answer to a question (cli/_prompts.py)
    ├── BudgetReached                    a metered call did not start: the budget is reached (runs/usage.py)
    ├── Unsatisfied                      an evaluation ends unsatisfied (conditions/_runtime.py)
    ├── RunEnded                         the run was ended under its scheduler (formulas/_commits.py)
    ├── _Unportable                      a schema the grammar's subset cannot express (models/_grammar.py)
    ├── _FormatRefused                   a server refused a structured-output format (models/openai.py)
    ├── _Refused                         JSON the protocol refuses (decisions/_json.py)
    ├── _Refused                         SQL the guard refuses (tools/sql_guard.py)
    ├── _DryRun                          a dry run's transaction rolled back once counted (store/retention.py)
    └── Stale                            a run changed since the store's last commit on it (store/_pg_sql.py)

Python's own exceptions are raised only where a Python protocol asks for them: ``TypeError`` for an argument
of the wrong type, ``KeyError`` from a mapping's lookup, ``ValueError`` inside a pydantic validator (pydantic
turns it into a ``ValidationError``). ``UsageError`` is also a ``RuntimeError`` and ``VarTypeError`` also a
``ValueError``, as the Python errors of the same kind are.
"""

from __future__ import annotations

import re
import sys


class PlangateError(Exception):
    """Base of every error plangate raises on purpose."""


class UserError(PlangateError):
    """The developer misused the API or wrote bad input (a formula, an expression, an option)."""


class RunError(PlangateError):
    """Something failed while running: a model, a tool or the store."""


class FormulaError(UserError):
    """A formula cannot be loaded, resolved, cooked or started.

    Attributes:
        path: where in the formula the problem is (``steps[2].needs``), or ``""``.
        source: the file the formula came from, when known.
    """

    def __init__(self, message: str, *, path: str = "", source: str | None = None) -> None:
        self.path = path
        self.source = source
        self.detail = message
        prefix = f"{path}: " if path else ""
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{prefix}{message}")


class FormulaNotFound(FormulaError):
    """No formula of that name exists on the search path."""


class ConfigError(UserError):
    """A setting, option or argument has an invalid value."""


class NotFoundError(UserError):
    """A run, step or interaction id that does not exist (or belongs to another owner)."""


class RunLeased(UserError):
    """Another live process holds the run's lease: it is advancing the run, so nothing here may. Nothing
    changed.

    Attributes:
        run_id: the run.
        holder: who holds its lease.
    """

    def __init__(self, message: str, *, run_id: str, holder: str | None) -> None:
        self.run_id = run_id
        self.holder = holder
        super().__init__(message)


class InteractionError(UserError):
    """A resolution that cannot be applied to an interaction."""


class StaleInteraction(InteractionError):
    """The interaction is not the run's open one, or it was already resolved. Nothing changed."""

    code = "stale_interaction"


class UsageError(UserError, RuntimeError):
    """An object used out of order: a one-shot stream iterated twice, a parser fed after it finished."""


class ModelBehaviorError(RunError):
    """A model produced output the protocol cannot use, after every tolerant-decoding rule."""


class ToolError(RunError):
    """A tool failed in a way that cannot be reported as an observation."""


class StoreError(RunError):
    """The store cannot be opened, read or written."""


class SchemaVersionError(StoreError):
    """The store (or a persisted state) was written by a newer version of plangate."""


class Signal(Exception):
    """Base of the control-flow signals: raised to leave nested code with a verdict or an answer, caught by
    the code that raised it. Not an error: nothing reports one as a failure."""


_DIGITS = re.compile(r"value has (\d+) digits")


def number_too_long(exc: ValueError) -> str:
    """What every reader of JSON or TOML says of a ``ValueError`` it met for anything but the syntax: an
    integer with more digits than Python converts (``sys.get_int_max_str_digits``), refused so that a large
    file cannot stall the process."""
    found = _DIGITS.search(str(exc))
    size = f"of {found.group(1)} digits" if found else "too long"
    return f"an integer {size}: at most {sys.get_int_max_str_digits()} digits are read"


__all__ = [
    "ConfigError",
    "FormulaError",
    "FormulaNotFound",
    "InteractionError",
    "ModelBehaviorError",
    "NotFoundError",
    "PlangateError",
    "RunError",
    "RunLeased",
    "SchemaVersionError",
    "Signal",
    "StaleInteraction",
    "StoreError",
    "ToolError",
    "UsageError",
    "UserError",
    "number_too_long",
]
