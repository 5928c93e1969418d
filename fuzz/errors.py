"""resumefuzz's exception hierarchy.

``ResumefuzzError`` roots everything the tool raises on purpose.  ``UsageError`` and
``TargetUnavailable`` become a one-line message and exit status 2 on the command line; their
messages name the offending file, field, target or variant.  ``EngineError`` means the
machinery itself misbehaved (a ledger that disagrees with a worker's counter, a racer that never
reached its barrier): never a verdict about a framework; ``HarnessFailure``, its subclass, is an
adapter's failure on one example (counted by a campaign, which goes on).
The per-category failures a campaign raises live in ``fuzz/failures.py``.

``CampaignStopped`` (``Interrupted``, ``OutOfTime``, ``OutOfExamples``) is no error at all: it
ends a campaign early and cleanly.  It derives from ``KeyboardInterrupt`` because that is the one
exception Hypothesis lets through untouched: every ``Exception`` raised inside a test is a failure
to shrink, and any other ``BaseException`` raised mid-example is recorded in its data tree and
comes back as "Inconsistent data generation" (``Flaky``).  A signal or a spent budget must stop
the search at once, never become a finding.
"""


class ResumefuzzError(Exception):
    """Base of every error resumefuzz raises on purpose."""


class UsageError(ResumefuzzError):
    """Bad input: an unknown target or variant, a malformed trace or corpus file, a bad flag."""


class TargetUnavailable(ResumefuzzError):
    """The target's framework, backend or service is missing: loud, never a silent skip."""


class EngineError(ResumefuzzError):
    """The fuzzing machinery failed; the campaign's verdicts cannot be trusted."""


class OracleDisagreement(EngineError):
    """The model allowed a step that the model-free predicates (``refmodel.properties``) read as
    breaking a property: one of our two readings of the contract is wrong.  As Elle checks a
    history without a model, the run is "unknown", never a verdict on the framework."""


class HarnessFailure(EngineError):
    """The adapter (or the engine's own code under it) failed on one operation of one example:
    an exception raised from adapter code, or a ``HarnessError``, rather than by the framework.

    A tool error *for that example*: a campaign discards the example and counts it (and ends
    the variant when they are too many); ``replay`` reports ERROR.  Never a finding.  ``op`` names
    the operation, ``error`` is ``"ExcType: first line"``, ``traceback`` the adapter's traceback;
    ``ops``, once the runner has it, the case's operations up to this one (``refmodel`` ops): the
    example a tool error happened on, which a campaign shows with it.
    """

    def __init__(self, op: str, error: str, traceback: str = ""):
        super().__init__(f"harness error in {op}: {error}")
        self.op, self.error, self.traceback = op, error, traceback
        self.ops: tuple = ()

    def example(self) -> str:
        """The case's operations up to the failing one, as a JSON list (``""`` when unknown)."""
        import json

        return json.dumps([op.to_json() for op in self.ops]) if self.ops else ""


class CampaignStopped(KeyboardInterrupt):
    """Stop the campaign now (a signal, the time budget): keep what was found, write it, exit."""


class Interrupted(CampaignStopped):
    """SIGINT or SIGTERM arrived: the command stops cleanly, exit status 128 + the signal."""

    def __init__(self, signum: int):
        import signal

        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class OutOfTime(CampaignStopped):
    """The wall-clock deadline of ``--max-time`` passed (checked between and during operations)."""


class OutOfExamples(CampaignStopped):
    """The cap on examples run that ``--max-examples`` implies (``campaign.example_cap``)."""
