"""What a session's settings allow for one variant: how its workers are made and kept, and how
long every wait may take.

``Policy(adapter, variant, settings)`` joins the ``Settings`` the caller chose with the
``Tuning`` the adapter declares for the variant (asked once, on first use): a worker is
reused only where both allow it, an op's time
limit is the longer of the two.  The worker transport (``fuzz.transport``), the pool of idle
workers (``fuzz.pools``) and the case runner (``fuzz.cases``) all read it, so each rule is
decided in one place.  ``settings`` may be replaced while a session lives (a test moving the
deadline); what derives from the process mode or from reuse is fixed at its first use.
"""

from __future__ import annotations

import functools
import time

from adapters.protocol import Adapter, Variant

from .errors import OutOfTime


class Policy:
    """The session's settings read against one variant's tuning."""

    def __init__(self, adapter: Adapter, variant: Variant, settings):
        self.adapter, self.variant, self.settings = adapter, variant, settings

    @functools.cached_property
    def capabilities(self):
        """The variant's ``Capabilities``, asked of the adapter once."""
        return self.adapter.capabilities(self.variant)

    @functools.cached_property
    def tuning(self):
        """The variant's ``Tuning``, asked of the adapter once."""
        return self.adapter.tuning(self.variant)

    @functools.cached_property
    def reuse(self) -> bool:
        """Does a worker that closed its case normally stay for the next case?"""
        allowed = getattr(self.tuning, "reuse_worker", False)
        return bool(allowed) and self.settings.reuse and self.settings.mode == "fork"

    @functools.cached_property
    def cleans_up(self) -> bool:
        """Does a case of this variant need the adapter's ``cleanup`` after it?  Not when the
        adapter keeps the protocol's (which does nothing), nor when the variant says its
        workdir holds everything (``Tuning.needs_cleanup``): then no worker runs it, and
        none is forked to run it after a killed worker."""
        return type(self.adapter).cleanup is not Adapter.cleanup \
            and getattr(self.tuning, "needs_cleanup", True)

    @functools.cached_property
    def warm(self) -> bool:
        """Does a spare warm up (``Settings.warm_spares``)?  Only where workers are reused:
        there the adapter vouches that a case leaves nothing behind (``reuse_worker``), and a
        warmed spare is a worker that served one case, as a reused one is."""
        return self.reuse and self.settings.warm_spares

    @property
    def inprocess(self) -> bool:
        return self.settings.mode == "inprocess"

    # -- time limits ---------------------------------------------------------------------------

    def op_limit(self) -> float:
        """An op's time limit.  A variant whose ops wait on a framework timer (a server's grace
        period) declares a longer limit (``Tuning.op_timeout``); never a shorter one."""
        own = getattr(self.tuning, "op_timeout", None)
        return max(self.settings.op_timeout, own or 0.0)

    def op_time(self) -> float:
        """Seconds the next wait may take: the op time limit, capped by the time left."""
        limit = self.op_limit()
        if self.settings.deadline is None:
            return limit
        left = self.settings.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime()
        return min(limit, left)

    def out_of_time(self) -> bool:
        return self.settings.deadline is not None and time.monotonic() >= self.settings.deadline

    def grace(self) -> float:
        """Seconds to let a worker close or clean up; short once the deadline has passed."""
        if self.settings.deadline is None:
            return self.settings.op_timeout
        left = self.settings.deadline - time.monotonic()
        return min(self.settings.op_timeout, max(1.0, left))
