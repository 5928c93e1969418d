"""Hypothesis settings profiles for campaigns: ``dev``, ``ci`` and ``nightly``.

Hypothesis loads its own ``ci`` profile whenever ``CI`` is set (derandomized, no database).  A
nightly job runs under CI too, and would silently re-run the same inputs every night and keep
nothing.  So a campaign never inherits the loaded profile: it always builds its settings from one
of these, which fix every field that matters, chosen by ``--profile`` or ``RESUMEFUZZ_PROFILE``
(default: ``ci`` when ``CI`` is set, ``dev`` otherwise).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
)

from .errors import UsageError

PROFILES = ("dev", "ci", "nightly")
DATABASE_DIR = Path(".hypothesis") / "resumefuzz"

_COMMON = dict(
    deadline=None,  # operations run in worker processes; their time is the op time limit's job
    suppress_health_check=list(HealthCheck),
    stateful_step_count=12,
    print_blob=True,
    report_multiple_bugs=False,
    # The explain phase re-runs the failing example many times to comment on it; with real
    # frameworks in worker processes that costs minutes and the shrink report says more.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def database(kind: str, key: str | None = None):
    """The example database: local directory, shared through Redis when RESUMEFUZZ_REDIS_URL is
    set (Hypothesis's documented recipe: a MultiplexedDatabase of the two).

    ``key`` (``"<target>/<variant>"``) gives each target variant its own entries: the machine's
    source, and so Hypothesis's own key, is the same for every target, and a campaign replays
    the database first, so without it one target would start by re-running another's failures.
    """
    if kind == "none":
        return None
    part = _database_part(key)
    local = DirectoryBasedExampleDatabase(str(DATABASE_DIR / part if part else DATABASE_DIR))
    url = os.environ.get("RESUMEFUZZ_REDIS_URL")
    if not url:
        return local
    import redis
    from hypothesis.extra.redis import RedisExampleDatabase

    prefix = b"resumefuzz:" + (part.encode() + b":" if part else b"")
    shared = RedisExampleDatabase(redis.Redis.from_url(url), key_prefix=prefix)
    return MultiplexedDatabase(local, shared)


def database_key(target: str, variant: str, suppressed=frozenset()) -> str:
    """The example database key of a run of ``variant`` with ``suppressed`` categories discarded.

    A run with a category suppressed is another test to Hypothesis: the failure an earlier run
    saved is no failure there, and its reuse phase deletes what no longer fails.  Under one key
    the run after a finding deleted that finding's saved example, so a campaign that went on
    searching kept nothing for the next machine (CI of 2215f79: two campaigns sharing Redis left
    it empty).  Each suppression set has its own key: the next campaign's first run replays the
    first finding, its second run (that category suppressed) the second, and so on.
    """
    key = f"{target}/{variant}"
    return key + (f"/without:{','.join(sorted(suppressed))}" if suppressed else "")


class KeyedDatabase(ExampleDatabase):
    """``db`` seen through a key of its own: every Hypothesis key is prefixed with ``key``.

    For a database the campaign does not build (``resumefuzz.pytest`` runs under the user's
    profile and so the user's database): Hypothesis keys a state machine's entries by the
    machine's source, which is the same for every target variant and every suppression set
    (``database_key``), so without a prefix one variant's run would replay, and
    delete as no longer failing, another's saved failures.
    """

    def __init__(self, db: ExampleDatabase, key: str) -> None:
        super().__init__()
        self.db = db
        self.prefix = _database_part(key).encode() + b":"

    def __repr__(self) -> str:
        return f"KeyedDatabase({self.db!r}, prefix={self.prefix!r})"

    def save(self, key: bytes, value: bytes) -> None:
        self.db.save(self.prefix + key, value)

    def fetch(self, key: bytes):
        return self.db.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.db.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.db.move(self.prefix + src, self.prefix + dest, value)


def _database_part(key: str | None) -> str:
    # One path segment per target variant; characters outside [A-Za-z0-9-_.] become "_", and a
    # short hash keeps two keys that differ only there apart ("mutant:Replay" vs "mutant_Replay").
    if not key:
        return ""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return f"{safe}-{hashlib.blake2b(key.encode(), digest_size=4).hexdigest()}"


def profile_settings(name: str | None = None, *, key: str | None = None, **overrides) -> settings:
    """The settings of profile ``name``; ``key`` names the target variant whose example
    database entries to use (see ``database``)."""
    name = name or os.environ.get("RESUMEFUZZ_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; expected one of: {', '.join(PROFILES)}")
    fields = dict(_COMMON)
    if name == "dev":
        fields.update(max_examples=100, derandomize=False, database=database("local", key))
    elif name == "ci":
        fields.update(max_examples=50, derandomize=True, database=None)
    else:
        fields.update(max_examples=100_000, derandomize=False, database=database("local", key))
    fields.update(overrides)
    # parent=settings.get_profile("default") keeps whatever profile Hypothesis loaded out of it.
    return settings(settings.get_profile("default"), **fields)
