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
  issued again (or, in step mode, once a save already holds that input, ``run()`` continues).
- ``fork(g, v)``: the newest state saved when gate ``g`` asked, into a fresh team; the branch's
  history starts with a copy of it; a new ``run`` carries ``v``.  Same calls as ``resume``: the
  API cannot say FORK or RETRY.

Save policy ``hitl`` saves when ``run()`` returns (at the interrupt and at the end); ``step`` builds
the team with ``max_turns=1`` and saves after every turn.  The input of the current run is kept in
``book`` (a small JSON side table in the case directory) so that a new process can re-issue it.

No resumefuzz import here: the repro script embeds this file.  Each operation is one
``asyncio.run``: a team is bound to the loop that first runs it, and nothing outlives the op.
"""

from __future__ import annotations

import asyncio
import json

from .statefmt import asking
from .stores import label_for
from .teams import answer_message, build_team, ending, start_message

NOOP = "noop"



class ApplicationError(RuntimeError):
    """This runner (the application) failed, not AutoGen: the case reports it as the
    protocol's ``HarnessError`` (a tool error, never a refusal)."""


class Runner:
    def __init__(self, *, shape: str, save: str, n: int, gates, store, book, hooks):
        self.shape, self.step, self.n, self.gates = shape, save == "step", n, frozenset(gates)
        self.store, self.book, self.hooks = store, book, hooks

    # -- the operations -------------------------------------------------------------------------

    def start(self, thread: str) -> str:
        return asyncio.run(self._start(thread))

    def resume(self, thread: str, value: str, gate=None) -> str:
        return asyncio.run(self._resume(thread, value, gate))

    def recover(self, thread: str) -> str:
        return asyncio.run(self._recover(thread))

    def fork(self, thread: str, gate: int, value: str, new_thread: str) -> str:
        return asyncio.run(self._fork(thread, gate, value, new_thread))

    # -- coroutines -----------------------------------------------------------------------------

    def _team(self):
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
        state = json.loads(text)
        team = self._team()
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
            await team.load_state(json.loads(text))
        if given is None:
            return NOOP  # no run of this thread is outstanding: nothing to re-issue
        return await self._drive(team, thread, given)

    async def _fork(self, thread, gate, value, new_thread):
        text = self.store.at_gate(thread, gate)
        if text is None:
            raise ApplicationError(f"the runner saved no state of {thread!r} with gate {gate} asking")
        team = self._team()
        await team.load_state(json.loads(text))
        self.store.save(new_thread, f"interrupt:t{gate}", text)
        given = {"kind": "answer", "value": value, "gate": gate, "delivered": False}
        self.book.set(new_thread, given)
        return await self._drive(team, new_thread, given)

    def _message(self, given):
        if given["kind"] == "start":
            return start_message()
        return answer_message(self.shape, given["value"], given["gate"])

    async def _drive(self, team, thread, given):
        """Run until the workflow asks or completes, saving as the policy says."""
        task = None if given.get("delivered") else self._message(given)
        for _ in range(4 * self.n + 8):
            result = await team.run(task=task)
            how = ending(self.shape, self.n, result)
            state = await team.save_state()
            gate = asking(state) if how == "interrupted" else None
            self.store.save(thread, label_for(how, gate), json.dumps(state))
            if how != "step":
                self.book.set(thread, None)
                return how
            if task is not None:
                self.book.set(thread, dict(given, delivered=True))
            task = None
        raise RuntimeError("the team neither asked nor completed after many turns")
