"""One test case on LangGraph: the protocol's ``Case`` over the standalone driver.

Everything the case must remember across workers lives in ``workdir``: the store itself (the
SQLite file, or ``postgres.json`` naming the case's database), and ``sidetable.json``, which maps
each harness thread to its LangGraph thread and, for a fork branch, the checkpoint it forked
from.  The branch of every checkpoint is in the checkpoint's own metadata (see ``driver.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from adapters.protocol import (
    Case,
    Durable,
    Fork,
    HarnessError,
    Refused,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Unreadable,
    Variant,
    Workflow,
    forge,
)
from adapters.calls import record_call
from adapters.files import SideTable

from adapters.reproduction.script import thread_label

from . import tamper as tampering
from .driver import END, Driver, LostTrack, Missing
from .store import open_store

# The suffix of the script's tamper functions for each saver (``repro.py``: ``corrupt`` on the
# SQLite file, ``corrupt_in_memory`` on the InMemorySaver's dicts, ``corrupt_in_postgres`` on
# PostgreSQL's tables); a custom store's tamper is its author's, never in a script.
IN_STORE = {"sqlite": "", "memory": "_in_memory", "postgres": "_in_postgres"}


def spec_for(variant: Variant, workflow: Workflow) -> dict:
    """What the standalone modules need: the workflow and the variant's axes, as plain data."""
    options = dict(variant.options)
    return {
        "n": workflow.n,
        "gates": set(workflow.gates),
        "values": list(workflow.values),
        **options,
    }


def _plain(value):
    """Stored content as a hashable value (garbage included): StateViews must hash."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


class LangGraphCase(Case):
    def __init__(self, variant: Variant, workflow: Workflow, workdir: Path):
        self.variant, self.workflow, self.workdir = variant, workflow, Path(workdir)
        self.spec = spec_for(variant, workflow)
        self.store = open_store(self.spec["saver"], self.workdir, self.spec.get("store_factory"))
        self.table = SideTable(self.workdir)
        self.driver = Driver(self.spec, self.store, self.table)
        if self.spec.get("guard") == "consume-once":  # ours (-guarded): refusals are its words
            from .guard import ConsumeOnceGraph

            self.driver.app = ConsumeOnceGraph(self.driver.app, self.store.path, refusal=Refused)
        self.driver.record = lambda source, kind="call": record_call(self.workdir, source, kind)
        self.driver.label = thread_label
        self.log: list[str] = []  # what each operation did, in framework terms

    # -- protocol ----------------------------------------------------------------------------
    def run(self, op, hooks) -> str:
        d = self.driver
        try:
            if isinstance(op, Start):
                return d.start(op.thread, hooks)
            if isinstance(op, Resume):
                return d.resume(op.thread, op.value, hooks, gate=getattr(op, "gate", None))
            if isinstance(op, StaleResume):
                return d.resume(op.thread, op.value, hooks, gate=op.gate, stale=True)
            if isinstance(op, Recover):
                return d.recover(op.thread, hooks)
            if isinstance(op, Fork):
                return d.fork(op.thread, op.gate, op.value, op.new_thread, hooks)
            raise HarnessError(f"Case.run does not take {op.name!r}")
        except Missing as exc:
            if self.store.kind == "custom":
                raise Refused(f"the store under test has no such checkpoint: {exc}") from exc
            raise HarnessError(str(exc)) from exc
        except LostTrack as exc:
            raise HarnessError(str(exc)) from exc
        finally:
            self.log.append(f"{op.name}: " + "; ".join(d.calls))

    def query(self, thread: str) -> StateView:
        try:
            done, answers, pending = self.driver.read(thread)
        except Exception as exc:  # the saver could not decode (or even open) what is stored
            raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
        done = [_plain(t) for t in done]
        answers = {_plain(k): _plain(v) for k, v in answers.items()}
        return StateView.of(self.workflow, done, answers, _plain(pending))

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        forged, asked = None, None
        if tampering.truncated(self.driver, self.spec["tamper"]):
            pass  # the file is gone: nothing to read for a forgery (tamper.tamper truncates again)
        elif how == "forged":
            view = self.query(thread)
            durable = Durable(view.done, view.answers, view.pending)
            result = forge(self.workflow, durable, part)
            forged, asked = (list(result.done), dict(result.answers)), view.pending
            if part is not None:
                forged += (result.pending,)
        self._record_tamper(thread, how, forged, part, asked)
        try:
            line = tampering.tamper(self.driver, thread, how, self.spec["tamper"], forged, part)
        except LostTrack as exc:
            raise HarnessError(str(exc)) from exc
        self.log.append(f"tamper: {line}")

    def _record_tamper(self, thread: str, how: str, forged, part=None, asked=None) -> None:
        """The tamper as a repro script writes it (``corrupt``, ``forge``, ``forge_results`` of
        its ``repro.py`` on the SQLite file, ``*_in_memory`` on the InMemorySaver's dicts), where
        the script can: an ``invalid`` tamper writes its content as a forgery does, a forged part
        its content and then the pending record (``delete_interrupt`` of the gate ``asked``, or
        ``add_interrupt``), as ``tamper.tamper`` does; a truncation of the SQLite file
        (``truncate``: every tamper once the file was cut) and the drop of the newest
        checkpoint (``drop``); on PostgreSQL the same edits of its tables (``*_in_postgres``);
        not a custom store."""
        d, sources, method = self.driver, ["<unknown: not expressible in a script>"], \
            self.spec["tamper"]
        if tampering.cuts_file(d, how, method):
            d.record(f"truncate(half={method == 'trunchalf'})")
            return
        info, tip, mem = d.table.get(f"thread:{thread}"), d.tip(thread), \
            IN_STORE.get(self.spec["saver"])
        # Without a checkpoint to name, or on a custom store, the call stays unknown.
        named = info is not None and tip is not None and mem is not None
        if named and how == "forged" and method == "drophead":  # SQLite and PostgreSQL only
            sources = [f"drop{mem}({d.config_src(d._config(thread, info['lg'], tip))})"]
        elif named and not tampering.rewrites_whole(how, method):
            # The call log must never change what the tamper does: a store these reads cannot
            # decode (a second tamper of a corrupted checkpoint) leaves the call unknown, and
            # the tamper itself says what it makes of that store.
            try:
                sources = self._tamper_calls(thread, how, forged, part, asked, info, tip)
            except Exception:  # noqa: BLE001
                pass
        for source in sources:
            d.record(source)

    def _tamper_calls(self, thread: str, how: str, forged, part, asked, info, tip) -> list:
        """The script's calls for one tamper: the content written, then (a forged part) the
        pending record made to say what ``forge`` made of it (``tamper.set_pending``)."""
        calls = [] if part == "pending" else [self._tamper_call(thread, how, forged, info, tip)]
        if part is not None and forged[2] != asked:
            at = self.driver.config_src(self.driver._config(thread, info["lg"], tip))
            mem = IN_STORE[self.spec["saver"]]
            calls.append(f"delete_interrupt{mem}({at}, {asked!r})" if forged[2] is None
                         else f"add_interrupt{mem}({at}, {forged[2]!r})")
        return calls

    def _tamper_call(self, thread: str, how: str, forged, info, tip) -> str:
        d, saver = self.driver, self.spec["saver"]
        at = d.config_src(d._config(thread, info["lg"], tip))
        # What tamper.tamper writes: the forged content, or the invalid one it makes of the
        # state it reads.
        done, answers = (tampering.invalid_content(*d.read(thread)[:2]) if how == "invalid"
                         else (forged or ([], {}))[:2])
        mem = IN_STORE[saver]
        state = {"done": list(done), "answers": dict(answers)}
        if how == "corrupt":
            return f"corrupt{mem}({at})"
        if self.spec["api"] == "graph":
            return f"forge{mem}({at}, {state!r})"
        if self._finished(info, tip):
            return f"forge{mem}({at}, {{'__end__': {state!r}}})"
        return f"forge_results{mem}({at}, {list(done)!r}, {dict(answers)!r})"

    def _finished(self, info, tip) -> bool:
        """The functional API keeps a finished run's state in its ``__end__`` channel, an
        unfinished one's in its task results (``forge_results``)."""
        stored = tampering.RAW[self.store.kind](self.store).checkpoint(info["lg"], tip)
        return END in (stored.get("channel_values") or {})

    def clone_store(self, dest: Path) -> None:
        dest = Path(dest)
        self.store.clone(dest)
        if self.table.path.exists():
            shutil.copyfile(self.table.path, dest / self.table.path.name)

    def close(self) -> None:
        self.store.close()
