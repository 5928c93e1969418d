"""Drive one case through LangGraph: the spellings of start / resume / recover / fork, the
branch each harness thread is on, and reading a branch's state back from the store.

It speaks LangGraph and the standard library only.

Harness threads and LangGraph threads
-------------------------------------
``start("t0")`` runs on the LangGraph thread ``t0``.  LangGraph forks *inside* a thread (a new
checkpoint whose parent is the old one; ``copy_thread`` is not implemented by the shipped
savers), so a fork's new harness thread ``f1`` lives in the same LangGraph thread as its source.
Which checkpoints belong to which harness thread is stored *in the checkpoints themselves*: every
call passes ``configurable["rf_branch"] = <harness thread>``, which LangGraph copies into the
metadata of every checkpoint the call writes (``get_checkpoint_metadata``,
``checkpoint/base/__init__.py:786``).  So the branch survives a SIGKILL with the store, and
the *tip* of a harness thread is its newest tagged checkpoint (or, before it has one, the fork
source recorded in the side table).

Head spellings address no ``checkpoint_id``, which makes LangGraph load the thread's newest
checkpoint.  When a harness thread's tip is not the LangGraph thread's newest checkpoint (its
thread was forked, and the fork is newer), the only way to reach it is its ``checkpoint_id``:
the call is then addressed, whatever the spelling, and ``calls`` says so.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from contextlib import contextmanager

from . import workflow as wf


class LostTrack(Exception):
    """The driver lost track of a checkpoint or was asked for what it does not do: its own
    failure, never LangGraph's.  The case reports it as the protocol's ``HarnessError``."""


class Missing(LostTrack):
    """The saver's history has no checkpoint the reference says was persisted (the one a
    stale handle or a fork addresses).  On LangGraph's own savers that is the driver's failure;
    on a store under test (``--store``) it is what the store answered, and the case reports it
    as the store's refusal, an observation (issue 42: a saver whose ``list`` lags behind lost
    every finding to tool errors)."""

BRANCH_KEY = "rf_branch"  # configurable key -> checkpoint metadata: the harness thread
STRICT_RESUME_KEY = "__pregel_strict_resume"  # langgraph/_internal/_constants.py
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
INTERRUPT, ERROR, RESUME, SCHEDULED, RETURN, END = (
    "__interrupt__", "__error__", "__resume__", "__scheduled__", "__return__", "__end__",
)
NOT_A_RESULT = {INTERRUPT, ERROR, RESUME, SCHEDULED}
# The side table's mark of a store whose file a truncation destroyed (``tamper.truncate_sqlite``):
# no checkpoint is left to read, edit or forge, for any thread.
TRUNCATED = "store:truncated"


class RelayedHooks:
    """The caller's hooks, every call made on the caller's thread.

    LangGraph runs ``@task`` bodies (and, here, the whole ``invoke``) in other threads, while
    the caller's hooks may hold thread-bound resources (the engine's ledger is a SQLite
    connection that only its creating thread may use).  ``serve`` runs the framework call in a
    helper thread and executes each hook call it relays on the calling thread, passing back
    the result or the exception (an injected crash is raised inside the task, as it should).
    A SIGKILL barrier then blocks the calling thread, and the process dies there.
    """

    RELAYED = ("task_begins", "effect", "wants_bad_output", "output", "race_ready")

    def __init__(self, hooks):
        self.hooks = hooks
        self.owner = threading.get_ident()
        self.requests: queue.Queue = queue.Queue()
        # Called with a task's number once its body produced its output (``output`` returned):
        # set by ``Driver._invoke`` while a run writes into a checkpoint the thread has moved past.
        self.finished = None

    def __getattr__(self, name):
        if name not in self.RELAYED:
            raise AttributeError(name)
        target = getattr(self.hooks, name, None)
        if target is None:
            return lambda *args: None  # e.g. race_ready on hooks that have none

        def relayed(*args):
            if threading.get_ident() == self.owner:
                return target(*args)
            reply: queue.Queue = queue.Queue(maxsize=1)
            self.requests.put((target, args, reply))
            ok, value = reply.get()
            if ok:
                return value
            raise value

        if name == "output":
            def output(task, *rest):
                value = relayed(task, *rest)
                if self.finished is not None:
                    self.finished(task)
                return value

            return output
        return relayed

    def serve(self, call):
        """Run ``call()`` in a helper thread, serving relayed hook calls until it returns."""
        outcome: dict = {}

        def run():
            try:
                outcome["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                outcome["error"] = exc
            finally:
                self.requests.put(None)

        worker = threading.Thread(target=run, name="langgraph-invoke", daemon=True)
        worker.start()
        while (request := self.requests.get()) is not None:
            target, args, reply = request
            try:
                reply.put((True, target(*args)))
            except BaseException as exc:  # noqa: BLE001 - raised again in the task's thread
                reply.put((False, exc))
        worker.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]


class WriteHold:
    """A disk as slow as ``durability='async'`` allows (variants ``-barrier``): a write that
    commits task ``t`` (a checkpoint whose ``done`` ends with ``t``, or task ``t``'s own
    ``done`` write) stays in flight until task ``t + 1`` has begun; the last task's writes,
    and every write once a later task began, go through at once.

    LangGraph documents that under ``'async'`` "changes are persisted asynchronously while the
    next step executes" (``langgraph/types.py``): its loop submits each save to a background
    executor (``_checkpointer_put_after_previous``) and starts the next step without waiting.
    Without a hold the save of a few bytes always finishes before the next task's first line,
    so the crash points there (``after_commit`` of ``t``, ``before_effect`` of ``t + 1``) never
    fall inside it; with it they always do.  The hold sits in the saver's public ``put`` /
    ``put_writes`` (a user's wrapper saver) and never sleeps: it waits on the next task's
    ``task_begins`` (``HeldWritesHooks``), released even when that raises an injected crash."""

    def __init__(self, n: int):
        self.n, self.begun, self.writing, self.saved = n, set(), [], set()
        self.cond = threading.Condition()

    def began(self, task: int) -> None:
        """Task ``task`` began: release the writes of the tasks before it and wait until they
        are done (the loop submitted the checkpoint that commits ``task - 1`` before it ran
        ``task``, unless ``task`` is the first of this invocation), so that exactly the writes
        of ``task`` and later are in flight at its crash points: the same loss on every replay."""
        with self.cond:
            first = not self.begun
            self.begun.add(task)
            self.cond.notify_all()
            self.cond.wait_for(lambda: not any(k < task for k in self.writing) and (
                first or task - 1 in self.saved or task - 1 >= self.n))

    @contextmanager
    def checkpoint(self, checkpoint):
        done = (checkpoint.get("channel_values") or {}).get("done")
        task = done[-1] if isinstance(done, list) and done else None
        with self._held(task):
            yield
        with self.cond:
            self.saved.add(task)
            self.cond.notify_all()

    @contextmanager
    def task_writes(self, writes):
        keys = [v[0] for c, v in writes if c == "done" and isinstance(v, list) and len(v) == 1]
        with self._held(keys[0] if keys else None):
            yield

    @contextmanager
    def _held(self, task):
        if not isinstance(task, int) or isinstance(task, bool) or not 1 <= task < self.n:
            yield  # not a task's commit, or the last task's (the run's exit waits for it)
            return
        with self.cond:
            self.cond.wait_for(lambda: any(b > task for b in self.begun))
            self.writing.append(task)
        try:
            yield
        finally:
            with self.cond:
                self.writing.remove(task)
                self.cond.notify_all()


class HeldWritesHooks(RelayedHooks):
    """``RelayedHooks`` that tell a ``WriteHold`` when each task has begun: after the engine's
    ``task_begins`` (where the crash points of the task before fire) returns or raises, never
    while its SIGKILL barrier blocks."""

    def __init__(self, hooks, writes: WriteHold | None):
        super().__init__(hooks)
        self.writes = writes  # the current invocation's (set by Driver._invoke)

    def __getattr__(self, name):
        relayed = super().__getattr__(name)
        if name != "task_begins":
            return relayed

        def task_begins(task):
            try:
                return relayed(task)
            finally:
                if self.writes is not None:
                    self.writes.began(task)

        return task_begins


class Driver:
    """``spec``: n, gates, values, api, durability, resume, fork, state.  ``store``: a
    ``store.Store``.  ``table``: get/set of small JSON values kept in the workdir."""

    def __init__(self, spec: dict, store, table):
        self.spec, self.store, self.table = spec, store, table
        self.box = wf.Box()
        self.app = wf.build(spec, store.saver, self.box)
        self.calls: list[str] = []  # the framework calls the last operation made, in words
        # Called with the Python source of every framework call (and of each read), as a
        # user would write it; the case appends it to the workdir's call log (repro scripts).
        self.record = lambda source, kind="call": None
        self.source = None  # the source of the Command the next invoke passes, when not plain
        self.label = lambda thread: thread  # a thread's name in the recorded source

    # -- operations ------------------------------------------------------------------------
    def start(self, h: str, hooks) -> str:
        self._begin(hooks)
        self.table.set(_key(h), {"lg": h, "hint": None})
        return self._invoke(wf.initial_input(self.spec), self._config(h, h), "input")

    def resume(self, h: str, value: str, hooks, gate: int | None = None, *,
               stale: bool = False) -> str:
        """``gate``: the interrupt the caller was shown (a racer).  The spellings that name what
        they answer use it, as a client holding that interrupt would: ``cpid`` addresses the
        checkpoint where it was raised, ``map`` names its id.  ``head`` cannot name anything.

        ``stale``: the caller answers through the handle it obtained while ``gate`` was
        pending, after an earlier resume consumed it (a second tab, a retried request): the
        ``StateSnapshot.config`` of that checkpoint (``checkpoint_id``) for ``head`` and
        ``cpid``, the interrupt's id for ``map`` and ``mapstrict``."""
        self._begin(hooks)
        spelling = self.spec["resume"]
        lg, config = self._target(h, addressed=spelling == "cpid")
        shown = self.gate_checkpoint(h, gate) if gate is not None else None
        if stale and shown is None:
            raise Missing(f"the adapter found no checkpoint of {h!r} with gate {gate} pending: "
                            "no handle to resume through")
        if (spelling == "cpid" or (stale and spelling == "head")) and shown is not None:
            config = self._config(h, lg, shown)
        if spelling in ("map", "mapstrict"):
            try:
                if shown is not None:
                    ids = self.interrupt_ids_at(h, shown, gate)
                else:
                    ids = self.pending_interrupt_ids(h) or self.last_interrupt_ids(h)
            except Exception:  # the saver could not read the interrupt: so would a script
                self.record(f"graph.get_state({self.config_src(config)})")
                raise
            command = _command(resume={i: value for i in ids})
            at = self._config(h, lg, shown) if shown is not None else self._target(h, addressed=True)[1]
            self.source = (f"Command(resume={{i.id: {value!r} for i in "
                           f"graph.get_state({self.config_src(at)}).interrupts}})")
            if spelling == "mapstrict":
                config["configurable"][STRICT_RESUME_KEY] = True
            what = f"Command(resume={{<{len(ids)} interrupt id(s)>: {value!r}}})"
        else:
            command, what = _command(resume=value), f"Command(resume={value!r})"
        self.store.saver.hold["on_read"] = self.box.hooks.race_ready
        try:
            return self._invoke(command, config, what)
        finally:
            self.store.saver.hold["on_read"] = None

    def recover(self, h: str, hooks) -> str:
        """``invoke(None)`` on the thread's tip; with nothing persisted, LangGraph would raise
        ``EmptyInputError``, so the run is started again with its original input: a run that
        died before its first checkpoint.  Not a thread the client saw a checkpoint of (a tamper
        marked it ``tampered``: the truncated file, the dropped checkpoint): that client resumes
        what it believes is stored, ``invoke(None)``, and LangGraph's answer is the observation.
        Starting over there was the adapter's choice, and it once made a ✗ of LangGraph's loud
        ``EmptyInputError`` (``sqlite-graph-sync-head-update-trunczero``)."""
        self._begin(hooks)
        info = self._info(h)
        lg = info["lg"] if info else h
        kept, tip = (info or {}).get("tampered"), self.tip(h)
        if tip is None and kept is None:
            if not info:
                self.table.set(_key(h), {"lg": lg, "hint": None})
            return self._invoke(wf.initial_input(self.spec), self._config(h, lg), "input")
        if tip is None and info.get("source"):
            # A branch shares its LangGraph thread with its source: the bare thread would resume
            # the source's checkpoint.  Its client names the tip it kept, gone or not.
            return self._invoke(None, self._config(h, lg, kept), "None")
        lg, config = self._target(h, addressed=False)
        return self._invoke(None, config, "None")

    def fork(self, h: str, gate: int, value: str, new_h: str, hooks) -> str:
        """Resume the checkpoint where ``gate`` was pending in ``h`` as the branch ``new_h``."""
        self._begin(hooks)
        lg = self._info(h)["lg"]
        try:
            source = self.gate_checkpoint(h, gate)
        except Exception:  # the saver could not read the history: what a script's lookup does
            self.record(f"list(graph.get_state_history({self.config_src(self._config(h, lg))}))")
            raise
        found = source is not None  # by its interrupt write, not from what a tamper left
        if source is None:
            source = self.tampered_source(h) or self.asked_before_tamper(h, gate)
        if source is None:  # the harness lost a checkpoint the reference says exists
            raise Missing(f"the adapter found no checkpoint of {h!r} with gate {gate} "
                            "pending in the branch's history")
        if found and self.spec["fork"] == "command" and self.spec["api"] == "func":
            # The functional API writes every gate's interrupt into the one checkpoint the run
            # started from, so the checkpoint that asked ``gate`` may ask another gate now (the
            # gate's task returned there, the next gate asked): a Command(resume) addressed at
            # it answers that gate, and the fork of ``gate`` has no checkpoint left to address
            # (sqlite-func-sync-head-command/DoubleConsume-80a1cc254014: a fork of gate 1 that
            # resumed gate 2).  Not expressible in this spelling: the harness's limit (a tool
            # error, the example discarded), never a refusal of LangGraph's.
            asked = self._asked_now(h, lg, source)
            if asked and gate not in asked:
                raise LostTrack(
                    f"fork of {h!r} at gate {gate} is not expressible with the command "
                    f"spelling: the checkpoint where gate {gate} asked asks gate "
                    f"{min(asked, key=repr)} now (gate {gate}'s task returned there), and "
                    f"Command(resume={value!r}) addressed at it would answer that gate")
        # ``source``: where the branch came from, for its own later forks (a ``__copy__`` fork
        # checkpoint's parent is the source's parent, not the source: only this records it).
        self.table.set(_key(new_h), {"lg": lg, "hint": source, "source": source})
        at_source = self._config(new_h, lg, source)
        spelling = self.spec["fork"]
        if spelling in ("update", "copy"):
            # test_time_travel.py::test_fork_from_interrupt_checkpoint_refires (update) and
            # ::test_copy_fork_retriggers_interrupt (copy): update_state, invoke(None) re-fires
            # the interrupt, Command(resume) at the fork checkpoint.
            as_node = {"as_node": "__copy__"} if spelling == "copy" else {}
            self.record(f"graph.update_state({self.config_src(at_source)}, None"
                        f"{', as_node=' + repr('__copy__') if as_node else ''})")
            if getattr(self.store, "is_async", False):
                forked = self.store.run(self.app.aupdate_state(at_source, None, **as_node))
            else:
                forked = self.app.update_state(at_source, None, **as_node)
            fork_id = forked["configurable"]["checkpoint_id"]
            self.calls.append(f"update_state(<gate checkpoint>, None"
                              f"{', as_node=__copy__' if as_node else ''})")
            self.table.set(_key(new_h), {"lg": lg, "hint": fork_id, "source": source})
            at_fork = self._config(new_h, lg, fork_id)
            outcome = self._invoke(None, at_fork, "None")
            if outcome == "interrupted":
                outcome = self._invoke(_command(resume=value), self._config(new_h, lg, fork_id),
                                       f"Command(resume={value!r})")
            return outcome
        if spelling == "travel":
            # test_time_travel.py::test_replay_from_before_interrupt_then_resume: invoke(None)
            # at the old checkpoint saves a fork checkpoint, then resume at the new head.
            outcome = self._invoke(None, at_source, "None")
            if outcome == "interrupted":
                _, config = self._target(new_h, addressed=False)
                outcome = self._invoke(_command(resume=value), config, f"Command(resume={value!r})")
            return outcome
        if spelling != "command":
            raise LostTrack(f"unknown fork spelling {spelling!r}")
        # A resume addressed at the older checkpoint.
        return self._invoke(_command(resume=value), at_source, f"Command(resume={value!r})")

    def _asked_now(self, h: str, lg: str, cid: str) -> list:
        """The gates checkpoint ``cid`` asks now: its interrupts whose task has no result."""
        saved = self.store.get_tuple(self._config(h, lg, cid))
        if saved is None or END in (saved.checkpoint.get("channel_values") or {}):
            return []
        return _open_gates(saved.pending_writes or [])

    # -- reading ---------------------------------------------------------------------------
    def read(self, h: str):
        """``(done, answers, pending)`` stored at ``h``'s tip, decoded by the saver."""
        info = self._info(h)
        # The thread's rows once: every query reads them, and the tip, the newest checkpoint
        # and the saved tuple all come from that one listing (four listings a query before).
        rows = self.store.rows(info["lg"]) if info else []
        tip, newest = self.tip(h, rows), _newest(rows)
        if tip is None:  # nothing of h's is stored: what the thread's own state shows
            lg = info["lg"] if info else h
            self.record(f"graph.get_state({self.config_src(self._config(h, lg))})", "read")
            return [], {}, None
        at = self._config(h, info["lg"], None if tip == newest else tip)
        self.record(f"graph.get_state({self.config_src(at)})", "read")
        saved = self.store.get_tuple(self._config(h, info["lg"], tip))
        if saved is None:
            return [], {}, None
        # A tip the thread has moved past (a sibling branch wrote after it) is resumed by its
        # id, and LangGraph reruns the finished tasks there (``superseded``).  What ``h``'s own
        # runs that resumed it by its id (a Command(resume)) finished there is ``h``'s, though:
        # LangGraph wrote those results into that checkpoint (``ran_at``).
        superseded = tip != newest
        return decode_state(self.spec, saved, superseded=superseded,
                            kept=self.ran_at(h, tip) if superseded else ())

    def ran_at(self, h: str, cid: str) -> tuple:
        """The tasks ``h``'s runs finished at checkpoint ``cid`` while the thread had moved
        past it: each a ``Command(resume)`` addressed at ``cid``, which LangGraph writes into
        ``cid`` itself (``_invoke`` records the tasks as they finish)."""
        ran = self.table.get(_ran_key(h))
        if not isinstance(ran, dict) or ran.get("at") != cid:
            return ()
        return tuple(ran.get("tasks") or ())

    def tip(self, h: str, rows=None) -> str | None:
        """The newest checkpoint of ``h``'s own; ``rows``: its thread's, if already listed."""
        info = self._info(h)
        if not info:
            return None
        rows = self.store.rows(info["lg"]) if rows is None else rows
        ids = {row.checkpoint_id for row in rows}
        own = [r.checkpoint_id for r in rows if r.metadata.get(BRANCH_KEY) == h]
        if info.get("hint") in ids:
            own.append(info["hint"])
        return max(own) if own else None

    def latest(self, lg: str) -> str | None:
        return _newest(self.store.rows(lg))

    def lineage(self, h: str) -> list[str]:
        """``h``'s tip and its ancestors, newest first; for a fork branch, then the checkpoint
        it was forked from and that one's ancestors (the branch's history as the caller knows
        it: a ``__copy__`` fork checkpoint's parent is not its source)."""
        info = self._info(h)
        if not info:
            return []
        parents = {r.checkpoint_id: r.parent_id for r in self.store.rows(info["lg"])}
        out: list[str] = []
        for cid in (self.tip(h), info.get("source")):
            while cid is not None and cid in parents and cid not in out:
                out.append(cid)
                cid = parents[cid]
        return out

    def remember_asked(self, h: str, cid: str) -> None:
        """Before a tamper of checkpoint ``cid`` of ``h``: the gates whose interrupts it
        stores, kept under ``asked:<cid>`` (what the clients that were asked keep)."""
        try:
            saved = self.store.get_tuple(self._config(h, self._info(h)["lg"], cid))
        except Exception:  # noqa: BLE001 - unreadable already (an earlier corrupt tamper)
            return
        gates = sorted({g for _, i in _interrupts(saved.pending_writes if saved else ())
                        if isinstance(g := _gate_of(i), int)})
        if gates:
            self.table.set(f"asked:{cid}", gates)

    def asked_before_tamper(self, h: str, gate: int) -> str | None:
        """The newest checkpoint of ``h``'s lineage that asked ``gate`` before a tamper deleted
        its interrupt writes (``remember_asked``), or None.  The tamper may have been another
        thread's: a branch's fork source, or a checkpoint a branch shares with its source (the
        functional API's ``Command(resume)`` at the thread's head writes into it), is the
        branch's checkpoint of that gate as well (the reference counts it damaged: reach
        ``listing``/``lineage``).  Its client forks from the id it kept, and LangGraph refuses
        or runs on what it reads, where a failed lookup would make the example a tool error."""
        for cid in self.lineage(h):
            if gate in (self.table.get(f"asked:{cid}") or ()):
                return cid
        return None

    def tampered_source(self, h: str) -> str | None:
        """``h``'s tip when the harness tampered with it (and nothing ran on it since), else
        ``None``: the fork's source when no checkpoint of the lineage shows its gate pending.
        A forgery of the tip's pending record (or of its done list, made to agree) deletes the
        interrupt writes the lookup finds a gate by, and the contract's fork still addresses
        that checkpoint: a client that kept the checkpoint id its question was asked at forks
        from there, and LangGraph refuses the forged checkpoint or runs on it.  So it does when
        the tampered checkpoint is gone from the store: dropped (``drophead``), or lost with
        every other to a truncation of the whole file (``trunc*``; ``tamper.keep_tips`` kept
        each thread's tip then)."""
        info = self._info(h)
        kept = info.get("tampered") if info else None
        if kept is None:
            return None
        rows = self.store.rows(info["lg"])
        gone = kept not in {row.checkpoint_id for row in rows}
        return kept if gone or self.tip(h, rows) == kept else None

    def gate_checkpoint(self, h: str, gate: int) -> str | None:
        """The newest checkpoint in ``h``'s lineage at which ``gate`` raised an interrupt."""
        lg = self._info(h)["lg"]
        for cid in self.lineage(h):
            saved = self.store.get_tuple(self._config(h, lg, cid))
            if saved and any(_gate_of(i) == gate for _, i in _interrupts(saved.pending_writes)):
                return cid
        return None

    def pending_interrupt_ids(self, h: str) -> list[str]:
        saved = self._saved(h)
        if saved is None:
            return []
        done_tasks = _completed_tasks(saved.pending_writes)
        return _ids(i for tid, i in _interrupts(saved.pending_writes) if tid not in done_tasks)

    def interrupt_ids_at(self, h: str, cid: str, gate: int) -> list[str]:
        saved = self.store.get_tuple(self._config(h, self._info(h)["lg"], cid))
        writes = saved.pending_writes if saved else ()
        return _ids(i for _, i in _interrupts(writes) if _gate_of(i) == gate)

    def last_interrupt_ids(self, h: str) -> list[str]:
        """The ids of the newest interrupt in ``h``'s lineage, answered or not: what a client
        that answers by id resends when it retries."""
        lg = self._info(h)["lg"] if self._info(h) else h
        for cid in self.lineage(h):
            saved = self.store.get_tuple(self._config(h, lg, cid))
            ids = _ids(i for _, i in _interrupts(saved.pending_writes if saved else ()))
            if ids:
                return ids
        return []

    # -- helpers ---------------------------------------------------------------------------
    def _begin(self, hooks) -> None:
        held = self.spec.get("writes") == "held"
        self.box.hooks = HeldWritesHooks(hooks, None) if held else RelayedHooks(hooks)
        self.calls, self.source = [], None

    def _info(self, h: str) -> dict | None:
        return self.table.get(_key(h))

    def _saved(self, h: str):
        tip = self.tip(h)
        if tip is None:
            return None
        return self.store.get_tuple(self._config(h, self._info(h)["lg"], tip))

    def _config(self, h: str, lg: str, checkpoint_id: str | None = None) -> dict:
        conf = {"thread_id": lg, BRANCH_KEY: h}
        if checkpoint_id is not None:
            conf.update(checkpoint_ns="", checkpoint_id=checkpoint_id)
        return {"configurable": conf}

    def _target(self, h: str, *, addressed: bool) -> tuple[str, dict]:
        """The config that reaches ``h``'s tip: the bare thread when the tip is the thread's
        newest checkpoint (and the spelling does not address), its checkpoint_id otherwise."""
        info = self._info(h)
        lg = info["lg"] if info else h
        tip = self.tip(h)
        if tip is not None and (addressed or tip != self.latest(lg)):
            return lg, self._config(h, lg, tip)
        return lg, self._config(h, lg)

    def config_src(self, config: dict) -> str:
        """``config`` as a script writes it: the thread's name (``label``), a checkpoint by its
        position in the thread's history (``checkpoint(thread, k)``: its id differs per run)."""
        conf = dict(config["configurable"])
        thread = self.label(conf.pop("thread_id"))
        extra = {k: v for k, v in conf.items()
                 if k not in ("checkpoint_id", "checkpoint_ns", BRANCH_KEY)}
        if "checkpoint_id" in conf and not extra:
            ids = sorted(row.checkpoint_id for row in self.store.rows(config["configurable"]["thread_id"]))
            k = ids.index(conf["checkpoint_id"]) if conf["checkpoint_id"] in ids else len(ids)
            return f"checkpoint({thread!r}, {k})"
        if "checkpoint_id" in conf:  # not expressible by position with extra keys: no script
            extra["checkpoint_id"] = "<unknown>"
        return repr({"configurable": {"thread_id": thread, **extra}})

    def _input_src(self, inputs) -> str:
        if inputs is None or isinstance(inputs, dict):
            return repr(inputs)
        source, self.source = self.source, None
        return source or f"Command(resume={inputs.resume!r})"

    def _writes_into_moved_past(self, inputs, conf: dict) -> str | None:
        """The checkpoint this call writes its tasks' results into although the thread has
        moved past it, or ``None``.  In the functional API a ``Command(resume)`` addressed at
        such a checkpoint reruns the tasks finished there and writes their results, and the
        interrupt it stops at, into that checkpoint, no new one (``_first`` in
        ``langgraph/pregel/_loop.py``: no fork checkpoint for a resume, unlike ``invoke(None)``,
        which time-travels into a fork checkpoint).  That checkpoint is then the branch's tip,
        shared with the writes of the runs that went on from it."""
        if self.spec["api"] != "func" or getattr(inputs, "resume", None) is None:
            return None
        cid = conf.get("checkpoint_id")
        if cid is None or conf.get(BRANCH_KEY) is None or cid == self.latest(conf["thread_id"]):
            return None
        return cid

    def _record_ran(self, h: str, cid: str, task: int) -> None:
        """Task ``task`` of a run of ``h`` finished at ``cid`` (see ``ran_at``): added to what
        ``h``'s runs finished there (a run refused, or ended before a task finished, leaves
        the earlier runs' results in place, and so does LangGraph)."""
        ran = self.table.get(_ran_key(h))
        done = set(ran.get("tasks") or ()) if isinstance(ran, dict) and ran.get("at") == cid \
            else set()
        if task not in done:
            self.table.set(_ran_key(h), {"at": cid, "tasks": sorted(done | {task}, key=repr)})

    def _invoke(self, inputs, config, what: str) -> str:
        conf = config["configurable"]
        # Which tasks this run finishes at a checkpoint the thread has moved past, kept as they
        # finish (a SIGKILL may end the run next): ``read`` counts their results there.
        into = self._writes_into_moved_past(inputs, conf)
        if into is not None:
            h = conf[BRANCH_KEY]
            self.box.hooks.finished = lambda task: self._record_ran(h, into, task)
        try:
            return self._run_invoke(inputs, config, what)
        finally:
            self.box.hooks.finished = None

    def _run_invoke(self, inputs, config, what: str) -> str:
        conf = config["configurable"]
        where = "checkpoint_id=<tip>" if "checkpoint_id" in conf else "thread head"
        self.calls.append(f"invoke({what}, {where}, durability={self.spec['durability']!r})")
        self.record(f"graph.invoke({self._input_src(inputs)}, {self.config_src(config)}, "
                    f"durability={self.spec['durability']!r})")
        if getattr(self.store, "is_async", False):  # an async saver: ainvoke on its loop
            result = self.box.hooks.serve(lambda: self.store.run(
                self.app.ainvoke(inputs, config, durability=self.spec["durability"])))
        else:
            # The hold applies inside each invocation, afresh (update_state's own put, between
            # the invocations of a fork, waits for none).
            writes = None
            if isinstance(self.box.hooks, HeldWritesHooks):
                writes = self.box.hooks.writes = WriteHold(self.spec["n"])
            self.store.saver.hold["writes"] = writes
            try:
                result = self.box.hooks.serve(
                    lambda: self.app.invoke(inputs, config, durability=self.spec["durability"]))
            finally:
                self.store.saver.hold["writes"] = None
        return "interrupted" if isinstance(result, dict) and result.get(INTERRUPT) else "completed"


def _key(h: str) -> str:
    return f"thread:{h}"


def _ran_key(h: str) -> str:
    """Side-table key: ``{"at": checkpoint, "tasks": [...]}``, what ``h``'s runs at a checkpoint
    its thread had moved past finished there (``Driver._invoke``, ``Driver.ran_at``)."""
    return f"ran:{h}"


def _command(**kwargs):
    from langgraph.types import Command

    return Command(**kwargs)


def _interrupts(writes) -> list:
    """``(task_id, Interrupt)`` for every interrupt stored in ``writes``."""
    out = []
    for tid, channel, value in writes or ():
        if channel == INTERRUPT:
            for item in value if isinstance(value, (list, tuple)) else (value,):
                out.append((tid, item))
    return out


def _newest(rows) -> str | None:
    """The newest of a thread's checkpoints (ids grow with time), ``None`` when it has none."""
    return max((row.checkpoint_id for row in rows), default=None)


def _gate_of(item):
    value = getattr(item, "value", item)
    return value.get(wf.GATE_KEY) if isinstance(value, dict) else value


def _ids(items) -> list[str]:
    return list(dict.fromkeys(getattr(i, "id", None) for i in items if getattr(i, "id", None)))


def _task_of(result):
    """The task number a stored ``@task`` result names (``workflow.build_entrypoint``)."""
    return result.get("task") if isinstance(result, dict) else None


def _open_gates(writes) -> list:
    """The gates ``writes`` (one checkpoint's, functional API) ask: interrupts whose task has
    no result there, less the gates whose own task returned (as ``decode_state`` counts).  A
    list: a tampered write may name a gate by any value, hashable or not."""
    completed = _completed_tasks(writes)
    returned = [t for _, ch, v in writes if ch == RETURN and (t := _task_of(v)) is not None]
    gates = [_gate_of(i) for tid, i in _interrupts(writes) if tid not in completed]
    return [g for k, g in enumerate(gates) if g not in returned and g not in gates[:k]]


def _completed_tasks(writes) -> set:
    """Tasks with a stored result (any write that is not an interrupt, error or resume)."""
    return {tid for tid, ch, _ in writes or () if tid != NULL_TASK_ID and ch not in NOT_A_RESULT}


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _as_dict(value) -> dict:
    if value is None:
        return {}
    return dict(value) if isinstance(value, dict) else {"<stored>": value}


def decode_state(spec: dict, saved, *, superseded: bool = False, kept=()):
    """``(done, answers, pending)`` from a checkpoint tuple: its channel values plus the
    results its pending writes already hold (what a resume from it would not run again).

    ``superseded``: the thread has moved past this checkpoint.  A resume addressed at it reruns
    the tasks that finished there ("Finished tasks rerun only on time travel, or on a resume at
    a checkpoint the thread has moved past": ``langgraph/pregel/_loop.py``, ``_first``, at the
    pinned 1.2.24), so their writes are no progress a resume keeps: only its channel values and
    the interrupts raised there count (a fork's source, still the branch's tip after the fork's
    run died, holds the writes of the run that went on from it).  ``kept`` (functional API):
    the tasks whose results there are the branch's own all the same, because its own runs,
    ``Command(resume)`` calls addressed at that checkpoint, finished them there (LangGraph
    writes such a run's results into the checkpoint it addressed: ``Driver.ran_at``)."""
    values = saved.checkpoint.get("channel_values", {})
    writes = saved.pending_writes or []
    if superseded:
        writes = [w for w in writes if w[1] == INTERRUPT
                  or (w[1] == RETURN and _task_of(w[2]) in kept)]
    completed = _completed_tasks(writes)
    if spec["api"] == "func":
        if END in values and isinstance(values[END], dict):
            end = values[END]
            return _as_list(end.get("done")), _as_dict(end.get("answers")), None
        results = [v for _, ch, v in writes if ch == RETURN]
        results.sort(key=lambda r: (0, r["task"]) if isinstance(r, dict) and isinstance(
            r.get("task"), int) else (1, 0))
        done, answers, returned = [], {}, set()
        for r in results:
            if isinstance(r, dict) and "task" in r:
                done.append(r.get("done"))
                returned.add(r["task"])
                if r.get("answer") is not None:
                    answers[r["task"]] = r["answer"]
            else:
                done.append(r)
    else:
        done, answers = _as_list(values.get("done")), _as_dict(values.get("answers"))
        returned = set()
        by_task = defaultdict(list)
        for tid, ch, v in writes:
            by_task[tid].append((ch, v))
        for tid, task_writes in by_task.items():
            if tid not in completed:
                continue
            for ch, v in task_writes:
                if ch == "done":
                    done += _as_list(v)
                elif ch == "answers":
                    answers.update(_as_dict(v))
    gates = sorted(
        {_gate_of(i) for tid, i in _interrupts(writes) if tid not in completed} - returned,
        key=repr,
    )
    return done, answers, (gates[0] if gates else None)
