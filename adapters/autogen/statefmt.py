"""Reading and editing a saved ``TeamState`` dict without AutoGen (``query`` and ``tamper``).

A saved team state (``BaseGroupChat.save_state``, autogen_agentchat
``teams/_group_chat/_base_group_chat.py:748-796``) is ``{"type": "TeamState", "agent_states":
{<participant>: {"message_buffer": [...]}, <manager>: {"message_thread": [...], ...}}}``.  The
manager's ``message_thread`` is the workflow's log: each ``StructuredMessage[TaskOutput]`` is a
completed task (``out``, and ``answer`` for a gate), a message whose content starts with
``__INTERRUPT__ t<g>`` is gate ``g`` asking.  Participants' buffers hold copies of the same
messages (same ``id``), which edits keep consistent.

Standard library only, no resumefuzz import (the repro script embeds this file).
"""

from __future__ import annotations

import copy
import uuid

OUTPUT_TYPE = "StructuredMessage[TaskOutput]"
INTERRUPT_PREFIX = "__INTERRUPT__"


class BadState(ValueError):
    """The dict is not a saved team state this adapter can read."""


def manager(state) -> dict:
    """The group chat manager's saved state (the one entry with a ``message_thread``)."""
    try:
        entries = [v for v in state["agent_states"].values() if isinstance(v, dict) and "message_thread" in v]
    except (KeyError, TypeError, AttributeError) as exc:
        raise BadState(f"no agent_states in the saved state: {exc!r}") from None
    if len(entries) != 1 or not isinstance(entries[0]["message_thread"], list):
        raise BadState("the saved state has no single manager message_thread")
    return entries[0]


def is_output(message) -> bool:
    return isinstance(message, dict) and message.get("type") == OUTPUT_TYPE and isinstance(message.get("content"), dict)


def asked_gate(message):
    """``g`` if ``message`` is gate ``g`` asking for an answer, else ``None``."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.startswith(INTERRUPT_PREFIX):
        return None
    word = content[len(INTERRUPT_PREFIX):].strip()
    return int(word[1:]) if word[:1] == "t" and word[1:].isdigit() else word


def parse(state) -> tuple[list, dict, object]:
    """``(done, answers, pending)`` as stored, garbage included (never validated here)."""
    done, answers, pending = [], {}, None
    for message in manager(state)["message_thread"]:
        if is_output(message):
            content = message["content"]
            done.append(content.get("out"))
            if content.get("answer") is not None:
                answers[content.get("task")] = content.get("answer")
            pending = None
        else:
            gate = asked_gate(message)
            if gate is not None:
                pending = gate
    return done, answers, pending


def asking(state):
    """The gate the saved state is waiting on: its last message asks (the documented check)."""
    thread = manager(state)["message_thread"]
    return asked_gate(thread[-1]) if thread else None


# -- tampering ----------------------------------------------------------------------------------


def _all_messages(state):
    """Every stored message dict: the manager's thread and every participant's buffer."""
    for entry in state["agent_states"].values():
        if not isinstance(entry, dict):
            continue
        for key in ("message_thread", "message_buffer"):
            yield from (m for m in entry.get(key, []) if isinstance(m, dict))


def _edit_everywhere(state, message_id, edit) -> None:
    for message in _all_messages(state):
        if message.get("id") == message_id:
            edit(message)


def make_invalid(state) -> dict:
    """Decodes, breaks the state schema: the newest task output or request gets a wrong type
    (``out`` a string where ``TaskOutput`` has an int; a request's ``content`` an int)."""
    state = copy.deepcopy(state)
    thread = manager(state)["message_thread"]
    for message in reversed(thread):
        if is_output(message):
            _edit_everywhere(state, message.get("id"), lambda m: m["content"].__setitem__("out", "<bad>"))
            return state
        if asked_gate(message) is not None:
            _edit_everywhere(state, message.get("id"), lambda m: m.__setitem__("content", 999))
            return state
    raise BadState("nothing in the thread to make invalid")


def rewrite(state, done, answers) -> dict:
    """Well-formed and schema-valid, not produced by the run: make the thread's outputs say
    ``done``/``answers`` (a changed answer, one task more, or one task less).  The manager's
    scheduling fields (``ready``, ``current_speaker``) are left as they were."""
    state = copy.deepcopy(state)
    thread = manager(state)["message_thread"]
    outputs = [m for m in thread if is_output(m)]
    answers = dict(answers)
    for message in outputs:
        task = message["content"].get("task")
        if task in answers and message["content"].get("answer") != answers[task]:
            value = answers[task]
            _edit_everywhere(state, message.get("id"), lambda m, v=value: m["content"].__setitem__("answer", v))
    done = list(done)
    if len(done) == len(outputs) + 1:
        task = done[-1]
        template = copy.deepcopy(outputs[-1]) if outputs else _output_template()
        template.update(id=str(uuid.uuid4()), source=f"t{task}")
        template["content"] = {"task": task, "out": task, "answer": answers.get(task)}
        thread.append(template)
    elif len(done) == len(outputs) - 1:
        gone = outputs[-1].get("id")
        for entry in state["agent_states"].values():
            for key in ("message_thread", "message_buffer"):
                if isinstance(entry, dict) and key in entry:
                    entry[key] = [m for m in entry[key] if not (isinstance(m, dict) and m.get("id") == gone)]
    elif len(done) != len(outputs):
        raise BadState(f"cannot rewrite {len(outputs)} outputs into {done!r}")
    return state


def _output_template() -> dict:
    return {
        "id": "", "source": "", "models_usage": None, "metadata": {},
        "created_at": "2026-01-01T00:00:00Z", "content": {}, "format_string": None,
        "type": OUTPUT_TYPE,
    }


def corrupt(text: str) -> str:
    """Bytes that do not decode: the first half of the stored JSON text."""
    return text[: max(1, len(text) // 2)]
