"""``Tamper.part``: its JSON form (old traces unchanged), its precondition, and the
``UncheckedPending`` switch that only a forgery of the pending-gate record exposes."""

from __future__ import annotations

import pytest

from refmodel import (
    SWITCHES,
    Durable,
    InvalidOperation,
    Model,
    Recover,
    Start,
    Tamper,
    Workflow,
    World,
    forge_parts,
    mutant_category,
    op_from_json,
    shortest_exposure,
)

GATED = Workflow(2, {1}, ("a", "b"))


def test_a_tamper_without_part_keeps_its_old_json_form_and_meaning():
    old = {"op": "tamper", "thread": "t0", "how": "forged"}
    op = op_from_json(old)
    assert op.part is None and op.to_json() == old  # same bytes, same fingerprint
    with_part = Tamper("t0", how="forged", part="answer:2")
    assert op_from_json(with_part.to_json()) == with_part
    assert with_part.to_json()["part"] == "answer:2"


@pytest.mark.parametrize("how, part", [("corrupt", "done"), ("forged", "answers"),
                                       ("forged", "answer:x"), ("forged", 3)])
def test_a_malformed_part_is_refused_naming_the_field(how, part):
    with pytest.raises(InvalidOperation, match="Tamper.part"):
        Tamper("t0", how=how, part=part)


def test_a_part_must_be_one_the_thread_has():
    model = Model(GATED)
    (_, world), *_ = model.step(World(), Start("t0"))  # gate 1 pending, nothing answered
    parts = forge_parts(GATED, world.get("t0").durable)
    assert "pending" in parts and "answer:1" not in parts
    assert model.enabled(world, Tamper("t0", how="forged", part="pending"))
    assert "no stored part" in model.why_disabled(world, Tamper("t0", how="forged", part="answer:1"))


def test_unchecked_pending_plants_invalid_persist_and_only_the_pending_part_shows_it():
    assert mutant_category("UncheckedPending") == "InvalidPersist" and "UncheckedPending" in SWITCHES
    model = Model(GATED, "UncheckedPending")
    (_, world), *_ = model.step(World(), Start("t0"))
    for part in forge_parts(GATED, world.get("t0").durable):
        (_, after), = model.step(world, Tamper("t0", how="forged", part=part))
        # Every other part is caught (the thread is marked tampered); the pending record is not.
        assert (after.get("t0").tampered is None) == (part == "pending"), part
    (_, after), = model.step(world, Tamper("t0", how="forged"))  # forge's default edit
    assert after.get("t0").tampered == "forged"


def test_unchecked_pending_is_exposed_through_a_forged_pending_part_only():
    exposure = shortest_exposure(GATED, "UncheckedPending", depth=3)
    assert exposure is not None and exposure.divergence.category == "InvalidPersist"
    assert any(getattr(op, "part", None) == "pending" for op in exposure.trace)
    no_pending = lambda op: getattr(op, "part", None) != "pending"  # noqa: E731
    assert shortest_exposure(GATED, "UncheckedPending", depth=3, admit=no_pending) is None


def test_forge_part_answer_needs_an_answer_and_pending_an_askable_gate():
    assert forge_parts(GATED, Durable((1,), ((1, "a"),))) == ("done", "answer:1")
