"""Shaped campaigns (docs/contract.md §7) on the self-test targets: the reference, run on drawn
shapes, shows nothing; each shape mutant is found under the category it plants; a shaped trace
survives the trace format and replays from the command line."""

import json

import pytest

from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.cli import main
from fuzz.replay import Replayer
from fuzz.targets import known_targets, prepare, resolve
from fuzz.trace import Trace, dump_trace, load_trace
from adapters.protocol import Capabilities
from refmodel import SHAPE_FEATURES, Loop, Resume, Shape, Start, Task, Workflow
from refmodel.mutants import SHAPE_SWITCHES, mutant_category

pytestmark = pytest.mark.slow


def campaign(target, tmp_path, examples, seed=1):
    adapter = prepare(resolve(target))
    options = CampaignOptions(max_examples=examples, seed=seed, profile="ci",
                              stop_on_finding=True, mode="inprocess",
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    return result


def test_only_the_reference_targets_draw_shapes():
    assert Capabilities().shapes == frozenset()  # an adapter gets linear chains by default
    for name in ("reference", *(f"mutant:{m}" for m in SHAPE_SWITCHES)):
        assert name in known_targets()
        adapter = resolve(name)
        assert adapter.capabilities(adapter.variants()[0]).shapes == set(SHAPE_FEATURES), name


@pytest.mark.parametrize("features", [("questions",), ("loop", "pre_effect"), ("parallel",),
                                      SHAPE_FEATURES])
def test_a_shape_is_drawn_of_the_declared_features_only(features):
    """``Capabilities.shapes`` names what a variant runs; every drawn shape uses those only, and
    each of them shows up in some draw."""
    from hypothesis import given, settings

    from fuzz.machine import shaped_workflows

    seen = set()

    @settings(max_examples=150, database=None, deadline=None)
    @given(shaped_workflows(frozenset(features)))
    def draw(workflow):
        used = workflow.shape.features() if workflow.shape else frozenset()
        assert used <= set(features), used
        seen.update(used)

    draw()
    assert seen == set(features)


def test_a_shape_the_variant_does_not_run_replays_as_na(tmp_path):
    """A shaped entry replayed on a variant without that feature is ERROR with the reason, never
    a verdict: the harness, not the framework, could not run it."""
    from fuzz.minimize import shape_inexpressible

    path = tmp_path / "shaped.json"
    dump_trace(shaped_trace("mutant:Replay"), path)  # a chain mutant: linear chains only
    result = Replayer().replay(path)
    assert result.status == "ERROR" and result.na == "the variant runs linear chains only"
    caps = Capabilities(shapes=frozenset({"parallel", "questions", "loop"}),
                        not_expressible={"shape:pre_effect": "no work before a wait"})
    assert shape_inexpressible(shaped_trace().workflow, caps) == "no work before a wait"
    assert shape_inexpressible(Workflow(2, frozenset({1}), ("a", "b")), caps) is None


def test_the_reference_on_shapes_finds_nothing(tmp_path):
    result = campaign("reference", tmp_path, examples=120)
    assert result.findings == [] and result.flaky == []
    assert result.harness_errors == 0 and result.errors == []
    assert result.operations > result.examples


@pytest.mark.parametrize("mutant", sorted(SHAPE_SWITCHES))
def test_each_shape_mutant_is_found_under_its_category(mutant, tmp_path):
    category = mutant_category(mutant)
    result = campaign(f"mutant:{mutant}", tmp_path, examples=600)
    categories = [f.category for f in result.findings]
    assert category in categories, (f"{mutant} not found in {result.examples} examples: "
                                    f"{categories}; errors {result.errors}")
    found = next(f for f in result.findings if f.category == category)
    entry = json.loads(open(found.corpus).read())
    assert entry["finding"]["category"] == category and entry["status"] == "FAILED"
    assert "shape" in entry["workflow"]  # no linear chain shows a shape mutant
    assert Replayer().replay(found.corpus).status == "FAILED"
    assert Replayer(target="reference").replay(found.corpus).status == "FIXED"


def shaped_trace(target="reference") -> Trace:
    shape = Shape(((Task(2, pre_effect=True), Task(1)), (Task(0),)), Loop(1, 2, "a"))
    ops = (Start("t0"), Resume("t0", value="a"),
           Resume("t0", answers=(("1.q1", "a"), ("2.q1", "b"))),
           Resume("t0", answers=(("1.q2", "b"),)))
    return Trace(Workflow.of(shape), ops, target=target)


def test_a_shaped_trace_round_trips_byte_identical(tmp_path):
    trace = shaped_trace()
    dump_trace(trace, tmp_path / "a.json")
    loaded = load_trace(tmp_path / "a.json")
    assert loaded == trace and loaded.workflow.shape == trace.workflow.shape
    dump_trace(loaded, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["workflow"]["shape"]["version"] == 1
    assert doc["operations"][2]["answers"] == {"1.q1": "a", "2.q1": "b"}


def test_a_shaped_trace_replays_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "shaped.json"
    dump_trace(shaped_trace(), path)
    assert Replayer().replay(path).status == "FIXED"  # every step as the reference allows
    assert main(["replay", str(path)]) == 0
    # The plain resume at step 2, with two questions pending, is what PlainResumePicks gets wrong.
    dump_trace(shaped_trace("mutant:PlainResumePicks"), path)
    result = Replayer().replay(path)
    assert (result.category, result.step) == ("DoubleConsume", 1)
    assert main(["replay", str(path)]) == 1
    assert "CHANGED" in capsys.readouterr().out  # the entry records no finding


def test_the_evidence_and_the_matrix_count_the_shapes_a_row_ran(tmp_path):
    """Issue 44: the matrix keeps its columns and says, counted, which shapes each row ran."""
    from fuzz import evidence
    from fuzz.matrix import build, render_md

    adapter = prepare(resolve("reference"))
    options = CampaignOptions(max_examples=60, seed=1, profile="ci", mode="inprocess",
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work", results_dir=tmp_path / "results")
    run_campaign(adapter, list(adapter.variants()), options)
    (path,) = (tmp_path / "results").rglob("*.json")
    doc = evidence.load(path)
    shapes = doc["shapes"]
    assert shapes == doc["latest"]["shapes"] and set(shapes) <= {"chain", *SHAPE_FEATURES}
    assert shapes["chain"] > 0 and set(shapes) - {"chain"}, shapes
    (row,) = build(["reference"], tmp_path / "results", tmp_path / "corpus",
                   tmp_path / "reports")
    assert row.shapes == shapes and row.shapes_text.startswith("shapes: ")
    assert f"chains {shapes['chain']:,}" in render_md([row])
