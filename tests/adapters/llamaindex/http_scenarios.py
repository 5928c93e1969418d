"""The scenarios of ``test_llamaindex_http.py``, each run in a fresh interpreter::

    python tests/adapters/llamaindex/http_scenarios.py routes server-wait
    python tests/adapters/llamaindex/http_scenarios.py recover_after_sigkill server-wait

Why a fresh interpreter: the engine forks each case's worker from the process that made the
session, and a pytest process that already ran LlamaIndex in process (the in-process driver
tests) hands its children whatever that left behind; there the first HTTP resumes hung, three
cases in a row in one CI run, and never in a fresh process.  A campaign's parent never runs the
framework, and neither does this script's.  (The corpus replays run in fresh interpreters for
the same reason.)  Exit 0 when the scenario holds; an AssertionError's traceback otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from adapters.protocol import CrashAt, Query, Recover, Resume, Start, Workflow
from fuzz import runner
from fuzz.targets import prepare, resolve

WORKFLOW = Workflow(4, {2, 3}, ("a", "b"))  # as llamaindex_testkit.WORKFLOW
ATTEMPTS = 3


class Hung(Exception):
    """The first resume hung with nothing run: LlamaIndex's own hang (the server can
    garbage-collect an idle run, and the answer never reaches it: the Stuck finding, whose
    standalone script is docs/framework_findings/llamaindex_idle_run_collected.py), before the
    machinery these scenarios check was reached."""


def _resume(case, resume):
    obs = case.apply(resume)
    if obs.outcome == "stuck" and not obs.effects:
        raise Hung
    return obs


def routes(case) -> None:
    """Runs and refusals go through the routes: what a run stored, and a refusal is the
    server's HTTP status."""
    obs = case.apply(Start("t0"))
    assert (obs.outcome, obs.effects) == ("interrupted", (("t0", 1, None),)), obs
    assert (obs.state.done, obs.state.pending) == ((1,), 2), obs
    obs = _resume(case, Resume("t0", value="a"))
    assert (obs.outcome, obs.effects) == ("interrupted", (("t0", 2, "a"),)), obs
    obs = case.apply(Resume("t0", value="b"))
    assert (obs.outcome, obs.effects) == ("completed", (("t0", 3, "b"), ("t0", 4, None))), obs
    obs = case.apply(Resume("t0", value="a"))
    assert (obs.outcome, obs.effects) == ("rejected", ()), obs
    if obs.error is not None:  # the engine records the refusal's words (issue 12)
        assert "Refused" in obs.error and "409" in obs.error, obs.error


def recover_after_sigkill(case) -> None:
    """Recover restarts the server in a fresh worker once the handler is older than the stock
    30 s grace (the variant declares a 120 s op limit), and the run goes on."""
    assert case.session.adapter.tuning(case.session.variant).op_timeout >= 60
    assert case.apply(Start("t0")).outcome == "interrupted"
    killed = case.worker.process.pid  # the server process the crash point kills
    obs = _resume(case, Resume("t0", value="b", crash=CrashAt(2, "in_flight", "sigkill")))
    # Killed inside task 2, after its effect: the barrier's point, in the server process.
    assert (obs.outcome, obs.effects) == ("crashed", (("t0", 2, "b"),)), obs
    obs = case.apply(Recover("t0"))
    assert obs.outcome in ("interrupted", "completed", "rejected", "crashed"), obs
    assert case.worker.process.pid != killed
    assert case.apply(Query("t0")).outcome in ("ok", "rejected")


SCENARIOS = {"routes": routes, "recover_after_sigkill": recover_after_sigkill}


def main(name: str, variant: str) -> int:
    adapter = prepare(resolve("llamaindex"))
    with tempfile.TemporaryDirectory() as tmp:
        session = runner.Session(adapter, adapter.variant(variant), Path(tmp) / "fuzz",
                                 runner.Settings(op_timeout=30))
        try:
            for attempt in range(1, ATTEMPTS + 1):
                case = session.case(WORKFLOW)
                try:
                    SCENARIOS[name](case)
                    print(f"{name} [{variant}]: holds (case {attempt})")
                    return 0
                except Hung:
                    print(f"{name} [{variant}]: case {attempt}: the first resume hung in "
                          "LlamaIndex; a fresh case")
                finally:
                    case.close()
        finally:
            session.close()
    raise AssertionError(f"the first resume hung in all {ATTEMPTS} cases: nothing past it "
                         "was exercised")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
