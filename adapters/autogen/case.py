"""``AutoGenCase``: the protocol's ``Case`` over a ``Runner`` (driver.py) and a store (store.py).

Everything that must survive a killed worker lives in ``workdir``: the store (``store/``) and the
input of the run in progress per thread (``inputs.json``, a ``SideTable``).  Imports AutoGen (via
driver.py), so the adapter imports this module only from ``open()``.
"""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path

from adapters.protocol import (
    Case,
    CrashInjected,
    Durable,
    Fork,
    HarnessError,
    Hooks,
    Recover,
    Refused,
    Resume,
    StaleResume,
    Start,
    StateView,
    Unreadable,
    Workflow,
    forge,
)
from adapters.calls import record_call
from adapters.files import SideTable
from adapters.reproduction.script import thread_label
from refmodel.workflow import sorted_pairs

from . import statefmt
from .driver import NOOP, ApplicationError, Runner, Unparsable
from .store import STORES

INPUTS = "inputs.json"


def quiet_worker() -> None:
    """AutoGen logs every agent exception at ERROR (an injected crash is one), and pydantic warns
    when it dumps a BadOutput value: expected noise in a fuzzing worker, kept off stderr."""
    for name in ("autogen_core", "autogen_agentchat"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)


class _CrashWatch(Hooks):
    """Forwards to the engine's hooks and remembers an injected crash.

    AutoGen turns an agent's exception into ``RuntimeError(str(error))`` across its runtime
    (``_base_group_chat.py:553-554``), which drops the exception chain; the case re-raises the
    original ``CrashInjected`` so the engine sees ``crashed``, not ``rejected``.
    """

    def __init__(self, inner: Hooks):
        self.inner, self.crash, self.failure = inner, None, None

    def application_failed(self, exc: Exception) -> None:
        """An agent of ours gave up (workflow.py); AutoGen will report it as its own
        RuntimeError."""
        self.failure = exc

    def task_begins(self, task: int) -> None:
        try:
            self.inner.task_begins(task)
        except CrashInjected as exc:
            self.crash = exc
            raise

    def effect(self, task: int, value) -> None:
        try:
            self.inner.effect(task, value)
        except CrashInjected as exc:
            self.crash = exc
            raise

    def wants_bad_output(self, task: int) -> bool:
        return self.inner.wants_bad_output(task)

    def output(self, task: int, value):
        return self.inner.output(task, value)

    def race_ready(self) -> None:
        self.inner.race_ready()


class AutoGenCase(Case):
    def __init__(self, options, workflow: Workflow, workdir: Path):
        self.options, self.workflow, self.workdir = dict(options), workflow, Path(workdir)
        self.store = STORES[self.options["store"]](self.workdir)
        self.inputs = SideTable(self.workdir, INPUTS)
        quiet_worker()

    def _runner(self, hooks) -> Runner:
        return Runner(
            shape=self.options["gate"], save=self.options["save"], n=self.workflow.n,
            gates=self.workflow.gates, store=self.store, book=self.inputs, hooks=hooks,
            record=lambda source, kind="call": record_call(self.workdir, source, kind),
            name=thread_label,
        )

    def run(self, op, hooks: Hooks) -> str:
        watch = _CrashWatch(hooks)
        runner = self._runner(watch)
        thread = op.thread
        try:
            if isinstance(op, Start):
                how = runner.start(op.thread)
            elif isinstance(op, Resume):
                how = runner.resume(op.thread, op.value, getattr(op, "gate", None))
            elif isinstance(op, StaleResume):
                how = runner.stale_resume(op.thread, op.gate, op.value)
            elif isinstance(op, Recover):
                how = runner.recover(op.thread)
            elif isinstance(op, Fork):
                how = runner.fork(op.thread, op.gate, op.value, op.new_thread)
                thread = op.new_thread
            else:
                raise HarnessError(f"{op.name} is not an executing operation")
        except ApplicationError as exc:
            raise HarnessError(str(exc)) from exc
        except Unparsable as exc:
            raise Refused(str(exc)) from exc
        except Exception as exc:
            if watch.crash is not None and watch.crash is not exc:
                raise watch.crash from exc
            if watch.failure is not None:
                raise HarnessError(f"the application's agent failed: {watch.failure}") from exc
            raise
        if how == NOOP:
            # The documented HITL loop answers only a saved state that asks, so the run was not
            # called: a no-op (docs/contract.md §3), labelled with the status it read, or ``ok``
            # when that state neither asks nor is finished (a racer that loaded the winner's
            # run mid-way; a forged state, which ``load_state`` accepted without a word).
            status = self.query(thread).status
            return status if status in ("interrupted", "completed") else "ok"
        return how

    def query(self, thread: str) -> StateView:
        text = self.store.latest(thread)
        if text is None:
            return StateView.of(self.workflow, (), {}, None)
        try:
            done, answers, pending = statefmt.parse(json.loads(text))
        except Exception as exc:  # undecodable text or not a team state
            raise Unreadable(f"{thread}: {exc!r}") from exc
        return StateView.of(self.workflow, done, answers, pending)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        text = self.store.latest(thread)
        if text is None:
            raise HarnessError(f"the adapter has nothing saved for {thread!r} to tamper with")
        if how == "corrupt":
            new = statefmt.corrupt(text)
        else:
            state = json.loads(text)
            if how == "invalid":
                state = statefmt.make_invalid(state)
            elif how == "forged":
                done, answers, pending = statefmt.parse(state)
                fake = forge(self.workflow, Durable(tuple(done), sorted_pairs(answers.items()), pending),
                             part)
                if part != "pending":
                    state = statefmt.rewrite(state, list(fake.done), dict(fake.answers))
                name = thread_label(thread)
                rewritten = state
                if part is not None:  # the gate's request message agrees with the forgery
                    state = statefmt.set_pending(state, fake.pending, self._request(fake.pending))
                if part is None or (part != "pending" and state == rewritten):
                    # The script's own lines: the same content (``rewrite`` is pasted into it);
                    # a forged part whose request message needed no change is that content too.
                    # (the JSON store keeps one state per run: saving it again overwrites it)
                    kind = self.options["store"]
                    write = "save_json" if kind == "json" else f"overwrite_{kind}"
                    record_call(self.workdir, f"{write}({name!r}, rewrite(load_{kind}({name!r}), "
                                f"{list(fake.done)!r}, {dict(fake.answers)!r}))")
                else:
                    record_call(self.workdir, f"<unknown: a forged {part!r} part is not written "
                                "as a script yet>")
            else:
                raise HarnessError(f"unknown tamper {how!r}")
            new = json.dumps(state)
        self.store.overwrite_latest(thread, new)

    def _request(self, gate) -> dict:
        """The message dict gate ``gate`` of this team shape sends to ask (workflow.py
        ``_request``; the ``split`` shape asks from its node ``ask<g>``), as ``save_state``
        stores it (AgentChat's own ``dump``); ``content`` and ``id`` are set by
        ``statefmt.set_pending``."""
        from autogen_agentchat.messages import HandoffMessage, TextMessage

        shape = self.options["gate"]
        source = f"ask{gate}" if shape == "split" else f"t{gate}"
        if shape == "handoff":
            return HandoffMessage(content="", source=source, target="user").dump()
        return TextMessage(content="", source=source).dump()

    def clone_store(self, dest: Path) -> None:
        self.store.clone(dest)
        if self.inputs.path.exists():
            shutil.copyfile(self.inputs.path, Path(dest) / INPUTS)

    def close(self) -> None:
        self.store.close()
