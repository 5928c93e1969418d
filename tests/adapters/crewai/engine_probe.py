"""Drive one CrewAI variant through the engine's runner (``fuzz.runner``) and print what happened.

Run in a fresh interpreter by ``test_crewai_engine.py``: ``python engine_probe.py VARIANT OUTDIR``.
It prepares the adapter the way the engine does (``fuzz.targets.prepare``: environment, network
guard, import), forks workers, and exercises SIGKILL barriers, a forced race and a twin recovery.
It prints one JSON document of machinery facts (outcomes, ledger rows, pids); no verdicts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))


def main(variant_name: str, outdir: Path) -> dict:
    from adapters.crewai import CrewAIAdapter
    from adapters.protocol import CrashAt, Race, Recover, Resume, Start, TwinRecover, Workflow
    from fuzz.runner import Session, Settings
    from fuzz.targets import prepare

    netlog = outdir / "netguard.jsonl"
    adapter = prepare(CrewAIAdapter(), netguard_log=str(netlog))
    variant = next(v for v in adapter.variants() if v.name == variant_name)
    session = Session(adapter, variant, root=outdir / "cases", settings=Settings(op_timeout=180))
    facts: dict = {}

    def pids(runner, seq):
        rows = runner.ledger.db.execute("select distinct pid from effects where seq = ?", [seq])
        return sorted(r[0] for r in rows.fetchall())

    # 1. SIGKILL after task 1's effect, then recovery in a fresh worker.
    case = session.case(Workflow(3, frozenset({2}), ("a", "b")))
    killed = case.apply(Start("t0", crash=CrashAt(1, "in_flight", "sigkill")))
    recovered = case.apply(Recover("t0"))
    facts["in_flight"] = {
        "outcome": killed.outcome, "effects": killed.effects, "pids": pids(case, 1),
        "recover_outcome": recovered.outcome, "recover_pids": pids(case, 2),
    }
    facts[list(facts)[-1]]["log"] = list(case.log)  # rejections name the exception
    case.close()

    # 2. SIGKILL as the gated task starts inside resume(v): before its effect.
    case = session.case(Workflow(3, frozenset({2}), ("a", "b")))
    started = case.apply(Start("t0"))
    killed = case.apply(Resume("t0", value="a", crash=CrashAt(2, "before_effect", "sigkill")))
    facts["resume_before_effect"] = {
        "start_outcome": started.outcome, "outcome": killed.outcome, "effects": killed.effects,
    }
    facts[list(facts)[-1]]["log"] = list(case.log)  # rejections name the exception
    case.close()

    # 3. A forced race of k=2 processes resuming one pending interrupt from one store.
    case = session.case(Workflow(2, frozenset({1}), ("a", "b")))
    case.apply(Start("t0"))
    main_pid = case.worker.process.pid
    raced = case.apply(Race("t0", values=("a", "b"), forced=True))
    facts["race"] = {
        "outcome": raced.outcome, "effects": raced.effects, "pids": pids(case, 2),
        "main_worker_pid": main_pid,
    }
    facts[list(facts)[-1]]["log"] = list(case.log)  # rejections name the exception
    case.close()

    # 4. Twin recovery after a SIGKILL: two byte-identical stores, two workers.
    case = session.case(Workflow(2, frozenset(), ("a", "b")))
    killed = case.apply(Start("t0", crash=CrashAt(2, "before_effect", "sigkill")))
    twin = case.apply(TwinRecover("t0"))
    facts["twin"] = {
        "killed": killed.outcome, "outcome": twin.outcome, "effects": twin.effects,
        "twin_outcome": twin.twin.outcome if twin.twin else None,
        "twin_effects": twin.twin.effects if twin.twin else None,
    }
    facts[list(facts)[-1]]["log"] = list(case.log)  # rejections name the exception
    case.close()

    facts["netguard"] = netlog.read_text().splitlines() if netlog.exists() else []
    return facts


if __name__ == "__main__":
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(main(sys.argv[1], out), default=list))
