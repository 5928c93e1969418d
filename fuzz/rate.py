"""How often a timing-dependent finding comes back: ``Rate(k, n)``, k of n replays.

A failure that depends on timing (a free race, a collection at the wrong moment) is measured
over replays rather than judged once; its rate travels with it (``Finding.reproduced``: None
for a finding that came back every time it was run), sizes its regression test's trials
(``trials``), and decides which candidate the minimizer keeps (``needed``).  A reproduction
script's fresh runs are counted the same way (``Reproduction.reproduces``).  One value, so that
every reader agrees on what "sometimes", "never" and "every time" mean.

On disk and in ``--json`` output a finding's rate stays the object ``{"k": k, "n": n}`` (the
trace schema's ``finding/reproduced``): ``from_json`` and ``to_json`` are the only places that
spell it.  (A script's count keeps its own fields, ``reproduced`` and ``runs``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Replays that measure a rate: the campaign's of a failure Hypothesis could not reproduce every
# time, and the minimizer's of each timing-dependent candidate.
TRIALS = 5

FALSE_ALARM = 0.01  # chance that trials of a still-present timing-dependent finding all miss it
# The most replays an entry gets: enough that ``FALSE_ALARM`` holds down to a rate of about 5 %,
# the rarest the corpus holds (LangGraph's SIGKILL loss); why 100 and what it costs:
# docs/decisions/0004-replays-of-a-timing-dependent-finding.md.
MAX_TRIALS = 100


@dataclass(frozen=True)
class Rate:
    """A measured reproduction rate: ``k`` of ``n`` runs."""

    k: int
    n: int

    @classmethod
    def from_json(cls, doc: dict) -> Rate:
        """``{"k": k, "n": n}`` (``KeyError`` when a field is missing)."""
        return cls(doc["k"], doc["n"])

    def to_json(self) -> dict:
        return {"k": self.k, "n": self.n}

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    @property
    def never(self) -> bool:
        """It did not come back in any of the runs."""
        return self.k == 0

    @property
    def always(self) -> bool:
        """It came back in every run."""
        return self.k >= self.n

    @property
    def partial(self) -> bool:
        """It came back in some of the runs, not all: timing-dependent, as measured."""
        return 0 < self.k < self.n

    def pooled(self, other: Rate) -> Rate:
        """Both measures as one: k and n summed."""
        return Rate(self.k + other.k, self.n + other.n)

    def missed(self) -> Rate:
        """The rate of the runs it did not come back in: a fix's, for a recorded finding."""
        return Rate(self.n - self.k, self.n)

    def trials(self) -> int:
        """Replays that show a finding that came back at this rate at least once, but with
        chance ``FALSE_ALARM`` (at most ``MAX_TRIALS``); 1 when it came back every time or
        never (nothing to wait for)."""
        if self.always or self.never:
            return 1
        miss = 1 - self.k / self.n
        return min(MAX_TRIALS, max(2, math.ceil(math.log(FALSE_ALARM) / math.log(miss))))

    def lower_bound(self, z: float = 1.96) -> float:
        """The Wilson score interval's lower end (95% by default)."""
        if self.n == 0:
            return 0.0
        p = self.k / self.n
        centre = p + z * z / (2 * self.n)
        spread = z * math.sqrt(p * (1 - p) / self.n + z * z / (4 * self.n * self.n))
        return max(0.0, (centre - spread) / (1 + z * z / self.n))

    def needed(self, runs: int) -> int:
        """Reproductions a candidate needs in ``runs`` runs to count as reproducing."""
        return max(1, math.ceil(self.lower_bound() * runs - 1e-9))
