"""The exception tree of plangate.

Two roots, so callers can tell whose fault a failure is::

    PlangateError
    ├── UserError                      the caller misused the API or wrote bad input
    │   ├── ConditionSyntaxError       a condition expression does not parse (conditions/errors.py)
    │   ├── FormulaError               a formula file, its schema, extends or cooking is wrong
    │   │   └── FormulaNotFound        no formula of that name on the search path
    │   ├── ConfigError                a setting or an option is invalid
    │   ├── NotFoundError              a run, step or interaction id that does not exist (for this owner)
    │   ├── RunLeased                  another live process holds the run's lease (it advances the run)
    │   └── InteractionError           a resolution that cannot be applied
    │       └── StaleInteraction       the interaction is not the run's open one, or was already resolved
    └── RunError                       something failed while running
        ├── ModelBehaviorError         a model answered with something the protocol cannot use
        ├── ToolError                  a tool failed in a way that is not an observation
        └── StoreError                 the store cannot be read or written
            └── SchemaVersionError     the store was written by a newer plangate

Control-flow signals (a run suspended on a person) are not errors and never derive from these classes.
"""

from __future__ import annotations


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


class ModelBehaviorError(RunError):
    """A model produced output the protocol cannot use, after every tolerant-decoding rule."""


class ToolError(RunError):
    """A tool failed in a way that cannot be reported as an observation."""


class StoreError(RunError):
    """The store cannot be opened, read or written."""


class SchemaVersionError(StoreError):
    """The store (or a persisted state) was written by a newer version of plangate."""


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
    "StaleInteraction",
    "StoreError",
    "ToolError",
    "UserError",
]
