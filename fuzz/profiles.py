"""Hypothesis settings profiles for campaigns: ``dev``, ``ci`` and ``nightly``.

Hypothesis loads its own ``ci`` profile whenever ``CI`` is set (derandomized, no database).  A
nightly job runs under CI too, and would silently re-run the same inputs every night and keep
nothing.  So a campaign never inherits the loaded profile: it always builds its settings from one
of these, which fix every field that matters, chosen by ``--profile`` or ``RESUMEFUZZ_PROFILE``
(default: ``ci`` when ``CI`` is set, ``dev`` otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

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


def database(kind: str):
    """The example database: local directory, shared through Redis when RESUMEFUZZ_REDIS_URL is
    set (Hypothesis's documented recipe: a MultiplexedDatabase of the two)."""
    if kind == "none":
        return None
    local = DirectoryBasedExampleDatabase(str(DATABASE_DIR))
    url = os.environ.get("RESUMEFUZZ_REDIS_URL")
    if not url:
        return local
    import redis
    from hypothesis.extra.redis import RedisExampleDatabase

    shared = RedisExampleDatabase(redis.Redis.from_url(url), key_prefix=b"resumefuzz:")
    return MultiplexedDatabase(local, shared)


def profile_settings(name: str | None = None, **overrides) -> settings:
    name = name or os.environ.get("RESUMEFUZZ_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; expected one of: {', '.join(PROFILES)}")
    fields = dict(_COMMON)
    if name == "dev":
        fields.update(max_examples=100, derandomize=False, database=database("local"))
    elif name == "ci":
        fields.update(max_examples=50, derandomize=True, database=None)
    else:
        fields.update(max_examples=100_000, derandomize=False, database=database("local"))
    fields.update(overrides)
    # parent=settings.get_profile("default") keeps whatever profile Hypothesis loaded out of it.
    return settings(settings.get_profile("default"), **fields)
