"""resumefuzz's exception hierarchy.

``ResumefuzzError`` roots everything the tool raises on purpose.  ``UsageError`` and
``TargetUnavailable`` become a one-line message and exit status 2 on the command line; their
messages name the offending file, field, target or variant.  ``EngineError`` means the
machinery itself misbehaved (a ledger that disagrees with a worker's counter, a racer that never
reached its barrier): never a verdict about a framework.
The per-category failures a campaign raises live in ``fuzz/failures.py``.
"""


class ResumefuzzError(Exception):
    """Base of every error resumefuzz raises on purpose."""


class UsageError(ResumefuzzError):
    """Bad input: an unknown target or variant, a malformed trace or corpus file, a bad flag."""


class TargetUnavailable(ResumefuzzError):
    """The target's framework, backend or service is missing: loud, never a silent skip."""


class EngineError(ResumefuzzError):
    """The fuzzing machinery failed; the campaign's verdicts cannot be trusted."""
