"""Who raised it: a framework's refusal is evidence (``rejected`` with its exception), an
adapter's own failure is a tool error (``HarnessFailure``), counted and never a finding; what a
framework prints is captured, not shown."""

import json
import logging
import os
import sys
import threading

import pytest

from adapters.protocol import HarnessError
from adapters.reference import ReferenceAdapter, ReferenceCase
from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.errors import HarnessFailure
from fuzz.internal.blame import blame, roots_of
from fuzz.runner import Session, Settings
from refmodel import CrashAt, Fork, Query, Race, Recover, Resume, Start, Workflow

WF = Workflow(3, {2}, ("a", "b"))


def _framework_raises():
    """A stand-in for a framework: an installed package (not ours, not the stdlib) raising."""
    import jsonschema

    jsonschema.validate({"answer": 1}, {"type": "string"})


class _Faulty(ReferenceCase):
    """The reference with one fault switch: ``fault`` names what ``run`` does on a Resume."""

    fault = None

    def run(self, op, hooks):
        if isinstance(op, Resume) and self.fault == "framework":
            try:
                _framework_raises()
            except Exception as exc:  # the adapter wraps it: the framework's words must survive
                raise RuntimeError("resume failed") from exc
        if isinstance(op, Resume) and self.fault == "lookup":
            {}["no-such-branch"]  # an adapter bug: its own LookupError
        if isinstance(op, Resume) and self.fault == "harness":
            raise HarnessError("lost track of the thread")
        if isinstance(op, Resume) and self.fault in ("noop", "label"):
            # An application that found nothing asking and made no call (``ok``, Case.run's
            # no-op label), or one that returns a label the protocol does not have.
            return "ok" if self.fault == "noop" else "done"
        if isinstance(op, Resume) and self.fault == "noisy":
            print("PRINTED-BY-FRAMEWORK")
            os.write(2, b"FD2-BY-FRAMEWORK\n")
            logger = logging.getLogger("noisy-framework")  # set up on first use, as they do
            logger.propagate = False
            logger.addHandler(logging.StreamHandler())  # sys.stderr
            logger.error("LOGGED-BY-FRAMEWORK")
            t = threading.Thread(target=lambda: print("FROM-A-FRAMEWORK-THREAD", flush=True))
            t.start()
            t.join()
        return super().run(op, hooks)


class _FaultyAdapter(ReferenceAdapter):
    def __init__(self, fault):
        super().__init__()
        self.fault = fault

    def open(self, variant, workflow, workdir):
        case = _Faulty(workflow, workdir, None)
        case.fault = self.fault
        return case


def _runner(tmp_path, fault):
    adapter = _FaultyAdapter(fault)
    # A generous limit: these tests run on loaded CI machines, and "stuck" is not what they test.
    return Session(adapter, adapter.variants()[0], tmp_path, Settings(op_timeout=120)).case(WF)


def _resumed(tmp_path, fault):
    """The observation of ``start(t0)`` then ``resume(t0, 'a')`` under ``fault``."""
    runner = _runner(tmp_path, fault)
    try:
        runner.apply(Start("t0"))
        return runner.apply(Resume("t0", value="a"))
    finally:
        runner.close()


def test_a_framework_exception_is_a_refusal_with_the_frameworks_words(tmp_path):
    obs = _resumed(tmp_path, "framework")
    assert obs.outcome == "rejected"
    # The framework's exception, not the adapter's RuntimeError wrapper around it.
    assert obs.error == "ValidationError: {'answer': 1} is not of type 'string'"
    assert obs.to_json()["error"] == obs.error


def test_the_references_own_refusal_is_recorded(tmp_path):
    runner = _runner(tmp_path, None)
    try:
        runner.apply(Start("t0"))
        runner.apply(Resume("t0", value="a"))
        obs = runner.apply(Resume("t0", value="b"))  # nothing is pending any more
    finally:
        runner.close()
    assert obs.outcome == "rejected" and obs.error == "Refused: nothing is pending"


def test_a_label_the_protocol_lacks_is_a_harness_failure(tmp_path):
    with pytest.raises(HarnessFailure) as info:
        _resumed(tmp_path, "label")
    assert info.value.error == "Case.run returned 'done'" and info.value.op == "resume(t0)"


def test_a_noop_labelled_ok_is_an_observation(tmp_path):
    obs = _resumed(tmp_path, "noop")
    assert (obs.outcome, obs.effects, obs.error) == ("ok", (), None)
    assert obs.state.status == "interrupted"  # it changed nothing


@pytest.mark.parametrize("fault, error", [
    ("lookup", "KeyError: 'no-such-branch'"),
    ("harness", "HarnessError: lost track of the thread"),
])
def test_an_adapters_own_exception_is_a_harness_failure(tmp_path, fault, error):
    runner = _runner(tmp_path, fault)
    try:
        runner.apply(Start("t0"))
        with pytest.raises(HarnessFailure) as info:
            runner.apply(Resume("t0", value="a"))
    finally:
        runner.close()
    assert info.value.error == error and info.value.op == "resume(t0)"
    assert "test_refusal_evidence.py" in info.value.traceback  # the adapter's traceback
    assert any("harness error" in line for line in runner.log)


def test_crashes_and_races_carry_error_text(tmp_path):
    runner = _runner(tmp_path, None)
    try:
        runner.apply(Start("t0"))
        crashed = runner.apply(Resume("t0", value="a", crash=CrashAt(2, "before_effect",
                                                                      "exception")))
        killed = runner.apply(Resume("t0", value="a", crash=CrashAt(2, "in_flight", "sigkill")))
        race = runner.apply(Race("t0", values=("a", "a", "a"), forced=True))
    finally:
        runner.close()
    assert crashed.error == "CrashInjected: injected crash at task 2, before_effect"
    assert killed.error == "SIGKILL at task 2 in_flight"
    assert sorted(race.outcome.split("|")) == ["completed", "rejected", "rejected"]
    racers = race.error.split("; ")
    assert len(racers) == 2 and all("Refused: interrupt" in r for r in racers), race.error
    assert {r.split(":")[0] for r in racers} < {"racer 1", "racer 2", "racer 3"}


def test_a_refused_query_records_why(tmp_path):
    runner = _runner(tmp_path, None)
    try:
        runner.apply(Start("t0"))
        (runner.workdir / "t0.head.json").write_text("{not json")
        obs = runner.apply(Query("t0"))
    finally:
        runner.close()
    assert obs.outcome == "rejected" and obs.error.startswith("Unreadable: t0.head.json")


def test_what_a_framework_prints_is_captured_not_shown(tmp_path, capfd):
    runner = _runner(tmp_path, "noisy")
    try:
        runner.apply(Start("t0"))
        capfd.readouterr()
        obs = runner.apply(Resume("t0", value="a"))
        shown = capfd.readouterr()
    finally:
        runner.close()
    assert obs.outcome == "completed"
    noise = ("PRINTED-BY-FRAMEWORK", "FD2-BY-FRAMEWORK", "LOGGED-BY-FRAMEWORK",
             "FROM-A-FRAMEWORK-THREAD")
    for text in noise:
        assert text not in shown.out + shown.err
    log = "\n".join(runner.log)
    for text in noise:
        assert text in log, log


class _RareHarnessBug(ReferenceCase):
    def run(self, op, hooks):
        if isinstance(op, Fork) and op.value == "b" and op.gate == max(self.workflow.gates):
            raise LookupError(f"no branch recorded for {op.thread!r}")  # an adapter bug
        return super().run(op, hooks)


class _RareHarnessBugAdapter(ReferenceAdapter):
    def open(self, variant, workflow, workdir):
        return _RareHarnessBug(workflow, workdir, None)


class _AlwaysHarnessBugAdapter(ReferenceAdapter):
    def open(self, variant, workflow, workdir):
        return _Always(workflow, workdir, None)


class _Always(ReferenceCase):
    def run(self, op, hooks):
        raise HarnessError("this adapter cannot start anything")


def _campaign(adapter, tmp_path, examples):
    # In process: the same attribution code (the worker's handle), without a fork per case.
    options = CampaignOptions(max_examples=examples, seed=3, profile="ci", mode="inprocess",
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    return result


def test_harness_errors_are_counted_and_never_findings(tmp_path):
    result = _campaign(_RareHarnessBugAdapter(), tmp_path, 60)
    assert result.harness_errors > 0, "the fault never fired: the test proves nothing"
    assert result.findings == [] and not (tmp_path / "corpus").exists()
    assert result.errors == []  # a few: the campaign went on
    assert result.harness_messages[0].startswith("harness error in fork(")
    assert "LookupError: no branch recorded" in result.harness_messages[0]
    # With its example, whole: the ops of its case up to the fork the adapter failed on.
    import json

    example = json.loads(result.harness_messages[0].split("; its example: ", 1)[1])
    assert example[0]["op"] == "start" and example[-1]["op"] == "fork"


def test_too_many_harness_errors_end_the_variant_loudly(tmp_path):
    result = _campaign(_AlwaysHarnessBugAdapter(), tmp_path, 100)
    assert result.findings == [] and not (tmp_path / "corpus").exists()
    assert result.harness_errors >= 5 and result.errors
    assert "harness errors in" in result.errors[0]


def test_attribution_follows_causes_not_contexts():
    # This test's own frames stand for adapter code: count its module as ours, whatever name
    # pytest's import mode gives it ("test_refusal_evidence" or "tests.fuzz....").
    roots = roots_of(ReferenceAdapter()) | {__name__.split(".")[0]}
    try:
        try:
            _framework_raises()
        except Exception:
            {}["lost"]  # raised while handling: the adapter's own failure
    except KeyError as exc:
        verdict = blame(exc, roots)
    assert verdict.who == "harness" and verdict.error == "KeyError: 'lost'"
    try:
        try:
            _framework_raises()
        except Exception as inner:
            raise ValueError("wrapped") from inner
    except ValueError as exc:
        verdict = blame(exc, roots)
    assert verdict.who == "framework" and verdict.error.startswith("ValidationError: ")
    try:
        json.loads("{")  # the standard library, called by adapter code: the adapter's
    except ValueError as exc:
        verdict = blame(exc, roots)
    assert verdict.who == "harness" and "JSONDecodeError" in verdict.error
    assert sys.stdlib_module_names  # the rule relies on it (3.10+)


def test_an_exception_raised_in_the_store_under_test_is_its_answer_naming_the_method(
        monkeypatch):
    """A store under test (``--store``) that raises is observed, never a tool error, even when
    our own code called it last; its error names the method (issue 42: a saver's exceptions
    were counted as tool errors and the finding was lost)."""
    import types

    store = types.ModuleType("authors_store")
    exec("class MySaver:\n    def get_tuple(self):\n        raise RuntimeError('replica lag')\n",
         store.__dict__)
    monkeypatch.setitem(sys.modules, "authors_store", store)

    def ours():  # an adapter frame (module tests.*, here among the roots) calling the store
        store.MySaver().get_tuple()

    try:
        ours()
    except RuntimeError as exc:
        caught = exc
    # A store whose module counts as ours (shipped in an adapter's own package, say) would
    # make its exception a tool error...
    roots = frozenset({"fuzz", "adapters", "refmodel", "authors_store"})
    assert blame(caught, roots).who == "harness"
    # ...registered as the store under test, the same exception is the store's answer.
    monkeypatch.setattr("fuzz.internal.blame.STORE_MODULES", {"authors_store"})
    verdict = blame(caught, roots)
    assert verdict.who == "framework"
    assert verdict.error == "RuntimeError: replica lag [in MySaver.get_tuple]"
