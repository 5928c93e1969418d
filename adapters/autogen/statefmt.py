"""Reading and editing a saved ``TeamState`` dict without AutoGen (``query`` and ``tamper``).

A saved team state (``BaseGroupChat.save_state``, autogen_agentchat
``teams/_group_chat/_base_group_chat.py:748-796``) is ``{"type": "TeamState", "agent_states":
{<participant>: {"message_buffer": [...]}, <manager>: {"message_thread": [...], ...}}}``.  The
manager's ``message_thread`` is the workflow's log: each ``StructuredMessage[TaskOutput]`` is a
completed task (``out``, and ``answer`` for a gate), a message whose content starts with
``__INTERRUPT__ t<g>`` is gate ``g`` asking.  Participants' buffers hold copies of the same
messages (same ``id``), which edits keep consistent.

Standard library only.
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


def rewrite(state, done, answers):
    """Well-formed and schema-valid, not produced by the run: make the saved task outputs say
    ``done``/``answers`` (a changed answer, one task more, or one task less), in the manager's
    thread and every agent's buffer; the scheduling fields (``ready``, ...) stay as they were.
    Self-contained: a reproduction script pastes it (``repro.py``)."""
    state, kind = copy.deepcopy(state), "StructuredMessage[TaskOutput]"
    agents = [a for a in state["agent_states"].values() if isinstance(a, dict)]
    thread = next(a["message_thread"] for a in agents if "message_thread" in a)
    lists = [a[k] for a in agents for k in ("message_thread", "message_buffer") if k in a]
    outputs = [m for m in thread if isinstance(m, dict) and m.get("type") == kind]
    for m in (m for messages in lists for m in messages if isinstance(m, dict)):
        if m.get("type") == kind and m["content"].get("task") in answers:
            m["content"]["answer"] = answers[m["content"]["task"]]
    if len(done) == len(outputs) + 1:  # one task more: an output the run never wrote
        t = done[-1]
        new = copy.deepcopy(outputs[-1]) if outputs else {
            "models_usage": None, "metadata": {}, "created_at": "2026-01-01T00:00:00Z",
            "format_string": None, "type": kind}
        new.update(id=str(uuid.uuid4()), source=f"t{t}",
                   content={"task": t, "out": t, "answer": answers.get(t)})
        thread.append(new)
    elif len(done) == len(outputs) - 1:  # one task less: the newest output, everywhere
        for messages in lists:
            messages[:] = [m for m in messages if not (isinstance(m, dict) and m.get("id") == outputs[-1]["id"])]
    elif len(done) != len(outputs):
        raise ValueError(f"cannot rewrite {len(outputs)} outputs into {done!r}")
    return state


def set_pending(state, pending, request: dict) -> dict:
    """Make the pending-gate record (the gate's ``__INTERRUPT__ t<g>`` request after the newest
    output) say ``pending`` and leave every other message as it was: ``None`` removes the open
    request (from the manager's thread and the buffers that copy it); a gate appends
    ``request`` (the message its team would send, ``content`` filled in here) to the thread."""
    state = copy.deepcopy(state)
    thread = manager(state)["message_thread"]
    last_output = max((i for i, m in enumerate(thread) if is_output(m)), default=-1)
    open_ = [m.get("id") for m in thread[last_output + 1:] if asked_gate(m) is not None]
    if pending is None:
        for entry in state["agent_states"].values():
            for key in ("message_thread", "message_buffer"):
                if isinstance(entry, dict) and key in entry:
                    entry[key] = [m for m in entry[key]
                                  if not (isinstance(m, dict) and m.get("id") in open_)]
        return state
    if not open_:
        thread.append({**copy.deepcopy(request), "id": str(uuid.uuid4()),
                       "content": f"{INTERRUPT_PREFIX} t{pending}"})
    return state


def corrupt(text: str) -> str:
    """Bytes that do not decode: the first half of the stored JSON text."""
    return text[: max(1, len(text) // 2)]
