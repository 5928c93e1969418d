"""resumefuzz's exception hierarchy.

``ResumefuzzError`` roots everything the tool raises on purpose.  ``UsageError`` and
``TargetUnavailable`` become a one-line message and exit status 2 on the command line; their
messages name the offending file, field, target or variant.  ``EngineError`` means the
machinery itself misbehaved (a ledger that disagrees with a worker's counter, a racer that never
reached its barrier): never a verdict about a framework; ``HarnessFailure``, its subclass, is an
adapter's failure on one example (counted by a campaign, which goes on).
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


class HarnessFailure(EngineError):
    """The adapter (or the engine's own code under it) failed on one operation of one example:
    an exception raised from adapter code, or a ``HarnessError``, rather than by the framework.

    A tool error *for that example*: a campaign discards the example and counts it (and ends
    the variant when they are too many); ``replay`` reports ERROR.  Never a finding.  ``op`` names
    the operation, ``error`` is ``"ExcType: first line"``, ``traceback`` the adapter's traceback.
    """

    def __init__(self, op: str, error: str, traceback: str = ""):
        super().__init__(f"harness error in {op}: {error}")
        self.op, self.error, self.traceback = op, error, traceback
