"""Read the contract's ``StateView`` out of what LlamaIndex stores, without running anything.

Two stored shapes carry the same information:

- a serialized context (``Context.to_dict()``; the server's tick journal replayed by the
  framework's reducer gives the same dict): ``state.state_data`` holds the typed ``RunState`` as
  ``{"__is_pydantic": true, "value": {...}}``; ``workers[step].collected_waiters`` holds the open
  ``wait_for_event`` waiters; ``is_running`` and the step queues say whether the run is live;
- a state row (server and DBOS ``workflow_state.state_json``): the same ``RunState`` JSON.

Pending gate: under the ``wait`` idiom, an open waiter ``gate<t>`` (``resolved_event`` null);
under the ``event`` idiom no waiter exists, so a run that is running with every queue empty and
nothing in progress (what ``WorkflowIdleEvent`` announces) is waiting at task ``len(done)+1`` when
that task is a gate.  Content that breaks the schema is reported as stored (``StateView.of``).
"""

from __future__ import annotations

import json

from adapters.protocol import StateView, Unreadable, Workflow


def decode_state_json(text) -> tuple[list, dict]:
    """``(done, answers)`` from a serialized ``RunState``; raises ``Unreadable``."""
    try:
        doc = json.loads(text) if isinstance(text, str | bytes) else text
        value = doc.get("value", doc) if isinstance(doc, dict) else None
        if isinstance(value, str):  # some serializers nest the model's JSON as a string
            value = json.loads(value)
        done = value.get("done", [])
        answers = value.get("answers", {})
        if not isinstance(done, list) or not isinstance(answers, dict):
            raise TypeError(f"done/answers of the wrong type: {type(done)}, {type(answers)}")
    except (ValueError, TypeError, AttributeError) as exc:
        raise Unreadable(f"stored state does not decode: {exc}") from exc
    return done, {_task_key(k): v for k, v in answers.items()}


def snapshot_state(snapshot: dict) -> tuple[list, dict]:
    try:
        state = snapshot["state"]
        data = state.get("state_data") if isinstance(state, dict) else None
    except (KeyError, TypeError) as exc:
        raise Unreadable(f"snapshot has no state: {exc}") from exc
    if not data:
        return [], {}
    return decode_state_json(data)


def open_waiters(snapshot: dict) -> list[int]:
    """Gates whose ``wait_for_event`` waiter is open in a serialized context."""
    gates = []
    for worker in (snapshot.get("workers") or {}).values():
        for waiter in worker.get("collected_waiters") or []:
            wid = str(waiter.get("waiter_id", ""))
            if waiter.get("resolved_event") is None and wid.startswith("gate"):
                gates.append(_task_key(wid[4:]))
    return sorted(g for g in gates if isinstance(g, int))


def quiescent(snapshot: dict) -> bool:
    """Running, nothing queued, nothing in progress: the run waits for an outside event."""
    if not snapshot.get("is_running"):
        return False
    return all(
        not w.get("queue") and not w.get("in_progress")
        for w in (snapshot.get("workers") or {}).values()
    )


def pending_gate(
    workflow: Workflow, gate: str, snapshot: dict, done: list, asked: int | None = None
) -> int | None:
    """``asked``, when known, is the gate whose ``Ask<t>`` the stream delivered before the pause
    (the core store records it with the row); otherwise the event idiom's pause is at the next
    task."""
    waiters = open_waiters(snapshot)
    if waiters:
        return waiters[0]
    if gate == "event" and quiescent(snapshot):
        if asked is not None:
            return asked
        nxt = len(done) + 1
        return nxt if nxt in workflow.gates else None
    return None


def snapshot_view(
    workflow: Workflow, gate: str, snapshot: dict, asked: int | None = None
) -> StateView:
    if not isinstance(snapshot, dict):
        raise Unreadable(f"snapshot is not an object: {type(snapshot).__name__}")
    done, answers = snapshot_state(snapshot)
    pending = pending_gate(workflow, gate, snapshot, done, asked)
    return StateView.of(workflow, done, answers, pending)


def parse_snapshot(text: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise Unreadable(f"snapshot is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise Unreadable("snapshot is not a JSON object")
    return doc


def _task_key(key):
    if isinstance(key, str) and key.lstrip("-").isdigit():
        return int(key)
    return key
