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
# The most replays an entry gets.  60, not 30, since 2026-12-05: LangGraph's functional API
# loses task 1's write to a SIGKILL in about 9 of 105 runs (sqlite-func-sync-head-copy), which
# takes 52 replays to see with 99 % probability; 30 would fail the regression test 7 % of the
# time, and the cheap replays of a rare finding are the ones that need the most.  100, not 60,
# since 2026-12-06: one CI run's 60 replays of that loss's `travel` entry all missed it (its
# three entries came back in 8-11 % of 200 replays each, idle and four at once); at 7 % sixty
# all miss 1.3 % of the time, a hundred 0.07 %, and 100 keep ``FALSE_ALARM`` down to a rate of
# 4.6 %.  Replays past an entry's ``trials_for`` run only while its status has not come up:
# their cost is paid by an entry whose finding went away (a test that fails anyway), at most
# 100 replays spread over the replay interpreters.
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
