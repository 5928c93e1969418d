"""The executing operations, spelled as the save/load pattern AutoGen documents.

AutoGen has no checkpointer: "Managing State" (agentchat-user-guide/tutorial/state.html) saves
``await team.save_state()`` wherever the application likes, and later builds a new team,
``await team.load_state(state)`` and runs again.  A ``Runner`` is that application:

- ``start``: a fresh team, ``run(task="start")``.
- ``resume(v)``: the latest saved state into a fresh team; if its last message asks for an answer
  (the documented HITL loop's check, ``while isinstance(last_message, HandoffMessage) and
  last_message.target == "user"``), a new ``run`` carries ``v``; otherwise there is nothing to
  answer (a no-op).  AutoGen has no interrupt identity: this check (and, for a racer, that the gate asking is the
  one it was shown) is the whole guard.
- ``recover``: the latest saved state into a fresh team, then the input of the run that crashed is
  issued again (or, in step mode, once a save already holds that input, ``run()`` continues; so
  it does when nothing is outstanding but the saved state neither asks nor is finished).
- ``stale_resume(g, v)``: the state saved when gate ``g`` asked (the dict a second tab or a
  retried request still holds, after ``g`` was answered), into a fresh team; the same check as
  ``resume`` on *that* state (does its last message ask?), then a ``run`` carrying ``v`` on the
  same thread.
- ``fork(g, v)``: the newest state saved when gate ``g`` asked, into a fresh team; the branch's
  history starts with a copy of it; a new ``run`` carries ``v``.  Same calls as ``resume``: the
  API cannot say FORK or RETRY.

Save policy ``hitl`` saves when ``run()`` returns (at the interrupt and at the end); ``step`` builds
the team with ``max_turns=1`` and saves after every turn.  The input of the current run is kept in
``book`` (a small JSON side table in the case directory) so that a new process can re-issue it.

Each operation is one ``asyncio.run``: a team is bound to the loop that first runs it, and
nothing outlives the op.

Every AutoGen call and every save or load of the caller's store is told to ``record`` as the line
a user would write (``await team.load_state(load_json('run-1'))``): the reproduction script
(``repro.py``) repeats them.  ``name`` turns a thread into the name the script uses.  A racer
(a resume shown its gate) records under its own kind, ``racer <pid>``, so that the lines of
racers running at once can be told apart.
"""

from __future__ import annotations

import asyncio
import json
import os

from .statefmt import BadState, asking, parse
from .store import label_for
from .workflow import answer_message, build_team, ending, start_message

NOOP = "noop"



def parsed(text: str):
    """The load step of AutoGen's documented persistence (``json.load`` of what ``save_state``
    returned, then ``load_state``).  A saved file that is not JSON any more (a torn or corrupted
    write) is refused here, loudly, as that application refuses it: ``Unparsable``, which the
    case reports as the protocol's ``Refused`` with the decoder's words (an observation,
    ``rejected``, never a tool error: a loud refusal of damaged data is what the contract asks
    for).  This module imports nothing of ours: the older repro scripts inline it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unparsable(f"the saved team state is not JSON: json.loads: {exc}") from exc


class Unparsable(ValueError):
    """The application's load step refused a saved state that does not parse."""


def _unfinished(state, n: int) -> bool:
    """Does a saved team state neither ask for an answer nor hold all ``n`` outputs?"""
    try:
        return asking(state) is None and len(parse(state)[0]) < n
    except BadState:
        return False  # not a team state: load_state has had its say


class ApplicationError(RuntimeError):
    """This runner (the application) failed, not AutoGen: the case reports it as the
    protocol's ``HarnessError`` (a tool error, never a refusal)."""


class Runner:
    def __init__(self, *, shape: str, save: str, n: int, gates, store, book, hooks,
                 record=None, name=str):
        self.shape, self.step, self.n, self.gates = shape, save == "step", n, frozenset(gates)
        self.store, self.book, self.hooks = store, book, hooks
        self.record_to, self.name, self.kind = record, name, "call"

    def record(self, source: str) -> None:
        if self.record_to is not None:
            self.record_to(source, self.kind)

    def _store_call(self, verb: str) -> str:
        """The script's store function for ``verb`` (``save``, ``load``): ``save_json``,
        ``load_sqlite``, ... (the script defines the functions of the variant's store)."""
        return f"{verb}_{getattr(self.store, 'kind', 'json')}"

    def _saved(self, thread: str, label: str) -> str:
        """The script's ``save`` call of the state just saved (the label: SQLite history only)."""
        tail = f", {label!r}" if getattr(self.store, "kind", "") == "sqlite" else ""
        return f"{self._store_call('save')}({self.name(thread)!r}, await team.save_state(){tail})"

    def _loaded(self, thread: str, label: str | None = None) -> str:
        """The script's ``load`` call of ``thread``'s newest state (with ``label``: the newest
        saved under it)."""
        tail = f", {label!r}" if label is not None else ""
        return f"{self._store_call('load')}({self.name(thread)!r}{tail})"

    # -- the operations -------------------------------------------------------------------------

    def start(self, thread: str) -> str:
        return asyncio.run(self._start(thread))

    def resume(self, thread: str, value: str, gate=None) -> str:
        return asyncio.run(self._resume(thread, value, gate))

    def recover(self, thread: str) -> str:
        return asyncio.run(self._recover(thread))

    def fork(self, thread: str, gate: int, value: str, new_thread: str) -> str:
        return asyncio.run(self._fork(thread, gate, value, new_thread))

    def stale_resume(self, thread: str, gate: int, value: str) -> str:
        return asyncio.run(self._stale_resume(thread, gate, value))

    # -- coroutines -----------------------------------------------------------------------------

    def _team(self):
        self.record("team = build_team()")
        return build_team(self.shape, self.step, self.n, self.gates, self.hooks)

    async def _start(self, thread):
        if self.store.latest(thread) is not None:
            raise ApplicationError(f"thread {thread!r} already has a saved state")
        given = {"kind": "start", "delivered": False}
        self.book.set(thread, given)
        return await self._drive(self._team(), thread, given)

    async def _resume(self, thread, value, shown=None):
        text = self.store.latest(thread)
        if text is None:
            raise ApplicationError(f"the runner has nothing saved for thread {thread!r}")
        state = parsed(text)
        if shown is not None:  # a racer: its lines apart from the other racers'
            self.kind = f"racer {os.getpid()}"
        team = self._team()
        self.record(f"await team.load_state({self._loaded(thread)})")
        await team.load_state(state)
        gate = asking(state)
        if gate is None or (shown is not None and gate != shown):
            return NOOP  # nothing asks, or not the question this caller was shown
        self.hooks.race_ready()  # read everything, written nothing yet
        given = {"kind": "answer", "value": value, "gate": gate, "delivered": False}
        self.book.set(thread, given)
        return await self._drive(team, thread, given)

    async def _recover(self, thread):
        given = self.book.get(thread)
        text = self.store.latest(thread)
        team = self._team()
        if text is not None:
            self.record(f"await team.load_state({self._loaded(thread)})")
            state = parsed(text)
            await team.load_state(state)
        if given is None and text is not None and _unfinished(state, self.n):
            # Nothing outstanding, yet the saved state neither asks nor is finished (only a
            # state altered outside this application gets here): run() with no task continues
            # a loaded team, as AgentChat documents for resuming one.
            given = {"kind": "continue", "delivered": True}
        if given is None:
            return NOOP  # no run of this thread is outstanding: nothing to re-issue
        return await self._drive(team, thread, given)

    async def _stale_resume(self, thread, gate, value):
        text = self.store.at_gate(thread, gate)
        if text is None:
            raise ApplicationError(f"the runner saved no state of {thread!r} with gate {gate} asking")
        state = parsed(text)
        team = self._team()
        label = f"interrupt:t{gate}"
        self.record(f"state = {self._loaded(thread, label)}  # held since gate {gate} asked")
        self.record("await team.load_state(state)")
        await team.load_state(state)
        if asking(state) != gate:
            return NOOP  # the held state does not ask: nothing to answer
        given = {"kind": "answer", "value": value, "gate": gate, "delivered": False}
        self.book.set(thread, given)
        return await self._drive(team, thread, given)

    async def _fork(self, thread, gate, value, new_thread):
        text = self.store.at_gate(thread, gate)
        if text is None:
            raise ApplicationError(f"the runner saved no state of {thread!r} with gate {gate} asking")
        team = self._team()
        label = f"interrupt:t{gate}"
        self.record(f"state = {self._loaded(thread, label)}")
        self.record("await team.load_state(state)")
        await team.load_state(parsed(text))
        self.record(f"{self._store_call('save')}({self.name(new_thread)!r}, state, {label!r})")
        self.store.save(new_thread, label, text)
        given = {"kind": "answer", "value": value, "gate": gate, "delivered": False}
        self.book.set(new_thread, given)
        return await self._drive(team, new_thread, given)

    def _message(self, given):
        if given["kind"] == "start":
            return start_message()
        return answer_message(self.shape, given["value"], given["gate"])

    @staticmethod
    def message_source(message) -> str:
        """``message`` as the Python that builds it."""
        if message is None:
            return "None"
        fields = ", ".join(f"{k}={getattr(message, k)!r}" for k in ("source", "target", "content")
                           if hasattr(message, k))
        return f"{type(message).__name__}({fields})"

    async def _drive(self, team, thread, given):
        """Run until the workflow asks or completes, saving as the policy says."""
        task = None if given.get("delivered") else self._message(given)
        for _ in range(4 * self.n + 8):
            self.record(f"result = await team.run(task={self.message_source(task)})")
            result = await team.run(task=task)
            how = ending(self.shape, self.n, result)
            state = await team.save_state()
            gate = asking(state) if how == "interrupted" else None
            self.record(self._saved(thread, label_for(how, gate)))
            self.store.save(thread, label_for(how, gate), json.dumps(state))
            if how != "step":
                self.book.set(thread, None)
                return how
            if task is not None:
                self.book.set(thread, dict(given, delivered=True))
            task = None
        raise RuntimeError("the team neither asked nor completed after many turns")
