"""What ``tamper`` writes: the contract's three kinds of bad persisted state, as content.

Each case writes the result into its own store with direct SQL (never through the framework).
"""

from __future__ import annotations

import json

from adapters.protocol import Durable, Workflow, forge
from refmodel.workflow import sorted_pairs


def corrupt_text(text: str) -> str:
    """Bytes that do not decode: the first half of the text, then garbage."""
    return text[: max(1, len(text) // 2)] + "\x00\ufffd{corrupt"


def bad_state(workflow: Workflow, how: str, done: list, answers: dict, part=None) -> dict:
    """``{"done": ..., "answers": ...}`` for ``invalid`` (decodes, breaks the schema: an unknown
    task, and an answer outside ``values``) or ``forged`` (``forge``: schema-valid, not produced;
    ``part`` ``"done"`` or ``"answer:<t>"`` edits that part of the state alone)."""
    if how == "invalid":
        bad_answers = {str(k): v for k, v in answers.items()}
        gate = min(workflow.gates) if workflow.gates else workflow.n
        bad_answers[str(gate)] = "<not-a-value>"
        return {"done": [*done, workflow.n + 7], "answers": bad_answers}
    if how == "forged":
        durable = Durable(tuple(done), sorted_pairs(answers.items()))
        forged = forge(workflow, durable, part)
        return {"done": list(forged.done), "answers": {str(k): v for k, v in forged.answers}}
    raise ValueError(f"bad_state does not write {how!r}")


def pydantic_state_json(value: dict, qualified_name: str) -> str:
    """The serialized typed-state envelope LlamaIndex's JsonSerializer writes."""
    return json.dumps({"__is_pydantic": True, "value": value, "qualified_name": qualified_name})


STATE_QUALNAME = "adapters.llamaindex.events.RunState"
