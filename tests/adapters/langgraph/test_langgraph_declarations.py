"""The LangGraph adapter's declarations: variants, capabilities, deviations, versions, imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from langgraph_testkit import ROOT

from adapters.langgraph.variants import AXES, VARIANTS
from adapters.protocol import OPERATIONS, Start

AXIS_VALUES = {
    "saver": {"memory", "sqlite", "postgres"},
    "api": {"graph", "func"},
    "durability": {"sync", "async", "exit"},
    "resume": {"head", "cpid", "map", "mapstrict"},
    "fork": {"update", "copy", "travel", "command"},
    "state": {"typed", "pydantic"},
    "tamper": {"blob", "trunchalf", "trunczero", "drophead"},
}


def test_every_axis_value_is_some_variant():
    for axis, values in AXIS_VALUES.items():
        assert {v.options[axis] for v in VARIANTS} == values, axis


def test_names_spell_out_their_axes():
    names = [v.name for v in VARIANTS]
    assert len(names) == len(set(names))
    for v in VARIANTS:
        assert v.name.split("-")[: len(AXES)] == [v.options[a] for a in AXES]
        assert v.description


def test_each_saver_has_its_default_variant():
    names = {v.name for v in VARIANTS}
    for saver in AXIS_VALUES["saver"]:
        assert f"{saver}-graph-sync-head-update" in names


def test_memory_declares_what_it_cannot_express(adapter):
    for v in VARIANTS:
        caps = adapter.capabilities(v)
        if v.options["saver"] == "memory":
            assert "race" not in caps.operations and "twin_recover" not in caps.operations
            assert {"race", "twin_recover", "sigkill"} <= set(caps.not_expressible)
            assert caps.crash_kinds == frozenset({"exception"})
            assert not caps.forced_race
        else:
            func_update = v.options["api"] == "func" and v.options["fork"] == "update"
            assert caps.operations == frozenset(OPERATIONS) - ({"fork"} if func_update else set())
            assert caps.forced_race and caps.crash_kinds == frozenset({"exception", "sigkill"})
        # No mechanism, no ✗: only a Pydantic state model is validated by LangGraph, and no
        # checkpoint carries an integrity record (docs/decisions/0001-whose-defect.md).
        validated = v.options["api"] == "graph" and v.options.get("state") == "pydantic"
        assert caps.bad_output == validated
        assert ("bad_output" in caps.not_expressible) == (not caps.bad_output)
        assert "forged" not in caps.tamper_hows and "tamper:forged" in caps.not_expressible
        assert ("invalid" in caps.tamper_hows) == validated
        assert caps.intents["resume"] == "RETRY"
        indistinguishable = caps.intents["fork"] == "indistinguishable"
        assert indistinguishable == (v.options["fork"] == "command")
        assert ("fork_retry_intent" in caps.not_expressible) == indistinguishable


def test_the_functional_update_state_fork_is_not_an_idiom(adapter):
    """update_state(C, None) on an @entrypoint marks it as run: fork is n/a, with the reason."""
    for v in VARIANTS:
        caps = adapter.capabilities(v)
        func_update = v.options["api"] == "func" and v.options["fork"] == "update"
        assert ("fork" in caps.operations) != func_update
        assert ("fork" in caps.not_expressible) == func_update


def test_every_functional_fork_spelling_cites_the_replay(adapter):
    for v in VARIANTS:
        if v.options["api"] != "func" or v.options["fork"] == "update":
            continue
        prefix = [d for d in adapter.deviations(v)
                  if d.category == "PrefixReplay" and not d.superseded]
        assert len(prefix) == 1 and prefix[0].ops == frozenset({"fork"}), v.name
        # The same re-execution met at a gate: the fork's value answers an earlier gate.
        ignored = [d for d in adapter.deviations(v) if d.category == "ForkIgnore"]
        assert len(ignored) == 1 and ignored[0].ops == frozenset({"fork"}), v.name
    for v in VARIANTS:  # the graph API's forks carry their node's state: no such deviation
        if v.options["api"] == "graph":
            assert not [d for d in adapter.deviations(v) if d.category == "ForkIgnore"], v.name


def test_a_call_at_a_superseded_checkpoint_reruns_finished_tasks_in_the_functional_api_only(
        adapter):
    """The functional variants declare LangGraph's rerun of finished @tasks at a checkpoint the
    thread has moved past, for that address only (``superseded``) and the one rule each; the
    graph API declares nothing of it.  The citation is read back from the installed source:
    if LangGraph rewords or moves it, this fails and the deviation has to be read again."""
    import langgraph.pregel._loop as loop

    from adapters.langgraph.adapter import LOOP_SUPERSEDED

    lines = Path(loop.__file__).read_text().splitlines()[986:990]
    said = " ".join(line.strip().lstrip("# ") for line in lines)
    assert said.startswith("Finished tasks rerun only on time travel, or on a resume at a "
                           "checkpoint the thread has moved past."), said
    assert "is_time_traveling or self._addressed_checkpoint_superseded" in said
    assert "_loop.py:987-990" in LOOP_SUPERSEDED
    for v in VARIANTS:
        behind = {(d.category, tuple(sorted(d.rules)), tuple(sorted(d.ops)))
                  for d in adapter.deviations(v) if d.superseded}
        expected = {("Replay", ("recovery-refires-completed",), ()),
                    ("PrefixReplay", ("resume-refires-prefix",), ("race", "resume"))}
        assert behind == (expected if v.options["api"] == "func" else set()), v.name


def test_tamper_reach_is_the_langgraph_thread(adapter):
    for v in VARIANTS:
        expected = ("store" if v.options["tamper"] in ("trunchalf", "trunczero")
                    else "listing" if v.options["saver"] == "sqlite" else "lineage")
        assert adapter.capabilities(v).tamper_scope == expected, v.name


def test_a_corrupt_branch_reaches_its_run_only_through_a_listing_on_sqlite():
    """What "listing" claims, checked on LangGraph itself.  With a fork's branch corrupted,
    the run still reads its own row intact (a shared row would fail to decode here), and a fork
    of the run, whose lookup lists the thread, fails loudly (without that refusal the reach
    would be "thread").  On the default graph variant, whose fork lookup lists the thread; the
    functional API's ``copy`` spelling reads one checkpoint and meets no listing, and there
    "listing" allows nothing beyond what "thread" does but a refusal."""
    from fuzz.replay import Replayer
    from fuzz.trace import Trace
    from refmodel import Fork, Query, Tamper, Workflow

    name = "sqlite-graph-sync-head-update"
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    ops = (Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1"),
           Tamper("f1", how="corrupt"), Query("t0"),
           Fork("t0", gate=1, value="b", new_thread="f2"))
    judged = Replayer(target="langgraph").replay_trace(Trace(wf, ops, "langgraph", name)).judged
    assert judged is not None and len(judged.observations) == len(ops), judged
    run, fork = judged.observations[3], judged.observations[4]
    assert run.outcome == "ok" and run.state.pending == 1, run  # the run's own row: intact
    assert fork.outcome == "rejected" and "Reserved" in fork.error, fork  # the listing: loud


def test_lossy_durability_draws_sigkill_after_commit_often(adapter):
    for v in VARIANTS:
        weights = adapter.tuning(v).weights
        lossy = v.options["durability"] in ("async", "exit") and v.options["saver"] != "memory"
        assert bool(weights) == lossy, v.name
        if lossy:
            assert weights["kind:sigkill"] > 1 and weights["phase:after_commit"] > 1


def test_deviations_cite_a_source(adapter):
    for v in VARIANTS:
        for d in adapter.deviations(v):
            assert d.category and d.scope
            # the framework's source, or its documentation page quoted verbatim
            assert ".py:" in d.citation or d.citation.startswith("https://docs.langchain.com/")


def test_versions_name_the_pins(adapter):
    versions = adapter.versions()
    pins = dict(
        line.strip().split("==")
        for line in (ROOT / "constraints" / "langgraph.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    for dist in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                 "langgraph-checkpoint-postgres", "psycopg"):
        assert versions[dist] == pins[dist]


def test_importing_the_adapter_does_not_import_langgraph():
    code = ("import sys, adapters.langgraph as a; a.LangGraphAdapter().variants(); "
            "loaded = [m for m in sys.modules if m.startswith(('langgraph', 'langchain'))]; "
            "sys.exit(1 if loaded else 0)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_environment_turns_telemetry_off(adapter):
    env = adapter.environment()
    assert env["LANGSMITH_TRACING"] == "false" and env["LANGCHAIN_TRACING_V2"] == "false"
