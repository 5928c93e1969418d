"""The reference target is race-free: of k racers that find a dead holder's claim (a SIGKILL
in flight), exactly one takes it over.  The baseline that proves the machinery must never
produce a finding; before the fix, a check-then-replace let two racers both win (LostUpdate).
"""

from pathlib import Path

import multiprocess

from adapters.reference import ReferenceAdapter
from adapters.reference import store as store_module
from adapters.reference.store import Refused, Store
from fuzz.runner import Session, Settings
from fuzz.trace import load_trace
from refmodel import Race, Workflow

TRACE = Path(__file__).with_name("data") / "race-after-sigkill-in-flight.json"
TRIALS = 30


def test_a_race_after_a_sigkill_in_flight_has_exactly_one_winner(tmp_path):
    # Start to the gate, resume with a SIGKILL in flight at the gate (its claim is left behind,
    # held by a dead process), then race k=3 on the same interrupt, TRIALS times.
    trace = load_trace(TRACE)
    adapter = ReferenceAdapter()
    session = Session(adapter, adapter.variants()[0], tmp_path, Settings(op_timeout=120))
    race = next(op for op in trace.operations if isinstance(op, Race))
    winners = []
    for _ in range(TRIALS):
        runner = session.case(trace.workflow)
        try:
            for op in trace.operations:
                obs = runner.apply(op)
                if op is race:
                    seq = runner.seq
                    outcomes = sorted(obs.outcome.split("|"))
                    # effects of the race, by racer: one racer, or a lost update
                    racers = {r for (r,) in runner.ledger.db.execute(
                        "select distinct racer from effects where seq = ?", (seq,))}
                    winners.append((outcomes, len(racers)))
        finally:
            runner.close()
    lost = [w for w in winners if w != (["completed", "rejected", "rejected"], 1)]
    assert not lost, f"{len(lost)}/{TRIALS} races had other than one winner: {lost[:3]}"


def _claim_in_child(workdir, workflow, hold, results, name, linger=None):
    """Claim interrupt 1 of t0; ``hold``: pause inside the check, holding the claim lock;
    ``linger``: stay alive, holding the claim, until it is set (a holder that exited is dead,
    and a dead holder's claim is taken over: that is the store's rule, not the race)."""
    if hold is not None:
        entered, release = hold
        real = store_module._holds

        def paused(holder):
            entered.set()
            release.wait(60)
            return real(holder)

        store_module._holds = paused
    try:
        Store(Path(workdir), workflow).claim("t0", 1)
        results.put((name, "won"))
    except Refused as exc:
        results.put((name, f"refused: {exc}"))
    if linger is not None:
        linger.wait(60)


def test_the_claim_takeover_is_one_step(tmp_path):
    # A dead holder's claim; racer A checks it and is paused *between* the check and the
    # takeover; racer B claims meanwhile.  Exclusive: B waits for A and is then refused.  A
    # check-then-replace lets B take over while A is paused, and both win.
    workflow = Workflow(3, {2}, ("a", "b"))
    Store(tmp_path, workflow)
    (tmp_path / "t0.claim-1").write_text("999999999 0")  # no such process
    ctx = multiprocess.get_context("fork")
    entered, release, results, linger = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Event()
    # A stays alive until B has decided: under load B may reach the lock only after A would
    # have exited, and then A's claim is a dead holder's, which B rightly takes over (seen once
    # in a run beside a campaign and an install on the two cores, 2026-12-05).
    a = ctx.Process(target=_claim_in_child,
                    args=(str(tmp_path), workflow, (entered, release), results, "A", linger))
    a.start()
    assert entered.wait(60)
    b = ctx.Process(target=_claim_in_child, args=(str(tmp_path), workflow, None, results, "B"))
    b.start()
    b.join(2)  # a bound, not a schedule: B finishing now, while A is paused, would be the bug
    early = results.get(timeout=1) if not results.empty() else None
    release.set()
    b.join(60)
    linger.set()
    a.join(60)
    got = dict([early] if early else [])
    while len(got) < 2:
        name, what = results.get(timeout=60)
        got[name] = what
    assert early is None, f"B decided while A held the check: {early}"
    assert got["A"] == "won" and got["B"].startswith("refused: interrupt 1 already consumed")
