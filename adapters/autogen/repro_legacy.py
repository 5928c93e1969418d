"""The standalone repro script for a shrunk trace: AutoGen's API and the standard library only.

The script embeds the adapter's own framework-side modules verbatim (``workflow.py``,
``statefmt.py``, ``store.py``, ``driver.py``: none imports resumefuzz), so what it replays is
exactly what the fuzzer ran, and adds a small main: every operation runs in a forked child, so a
``sigkill`` crash point really kills a process and the next operation starts in a fresh one.
"""

from __future__ import annotations

from pathlib import Path

MODULES = ("workflow.py", "statefmt.py", "store.py", "driver.py")

MAIN = r'''
# ============================================================================================
# The replay: every operation in a forked child process, effects printed as they fire.
# ============================================================================================

import atexit
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading

OPTIONS = __OPTIONS__
N = __N__
GATES = frozenset(__GATES__)
VALUES = __VALUES__
OPS = __OPS__
CTX = multiprocessing.get_context("fork")


class Crash(Exception):
    """The crash point of the operation, of kind ``exception``."""


class ReproHooks:
    """Prints each effect and fires the operation's crash point where the fuzzer fired it."""

    def __init__(self, op, branch, barrier=None):
        self.crash, self.bad, self.branch = op.get("crash"), op.get("bad_output"), branch
        self.barrier, self.last, self.fired_crash = barrier, None, False

    def _point(self, task, phase):
        c = self.crash
        if self.fired_crash or not c or (c["task"], c["phase"]) != (task, phase):
            return
        self.fired_crash = True
        print(f"    crash point: {c['kind']} at task {task}, {phase}", flush=True)
        if c["kind"] == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise Crash(f"injected crash at task {task}, {phase}")

    def task_begins(self, task):
        if self.last is not None and self.last != task:
            done, self.last = self.last, None
            self._point(done, "after_commit")
        self._point(task, "before_effect")

    def effect(self, task, value):
        print(f"    EFFECT branch={self.branch} task={task} value={value}", flush=True)
        self.last = task
        self._point(task, "in_flight")

    def output(self, task, value):
        return "<bad>" if self.bad == task else task

    def race_ready(self):
        if self.barrier is not None:
            try:
                self.barrier.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass

    def returned(self):
        if self.last is not None:
            done, self.last = self.last, None
            self._point(done, "after_commit")


class Book:
    """The input of the run in progress, per thread (so a new process can re-issue it)."""

    def __init__(self, workdir):
        self.path = os.path.join(workdir, "inputs.json")

    def get(self, key):
        try:
            with open(self.path) as f:
                return json.load(f).get(key)
        except FileNotFoundError:
            return None

    def set(self, key, value):
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            data = {}
        data[key] = value
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)


def child(workdir, op, barrier=None):
    import logging
    import warnings

    logging.getLogger("autogen_core").setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    branch = op.get("new_thread") or op["thread"]
    hooks = ReproHooks(op, branch, barrier)
    store = STORES[OPTIONS["store"]](workdir)
    runner = Runner(shape=OPTIONS["gate"], save=OPTIONS["save"], n=N, gates=GATES,
                    store=store, book=Book(workdir), hooks=hooks)
    try:
        kind = op["op"]
        if kind == "start":
            how = runner.start(op["thread"])
        elif kind == "resume":
            how = runner.resume(op["thread"], op["value"], op.get("gate"))
        elif kind == "recover":
            how = runner.recover(op["thread"])
        elif kind == "fork":
            how = runner.fork(op["thread"], op["gate"], op["value"], op["new_thread"])
        elif kind == "stale_resume":
            how = runner.stale_resume(op["thread"], op["gate"], op["value"])
        else:
            raise ValueError(kind)
        hooks.returned()
        print(f"    outcome: {'nothing to do' if how == NOOP else how}", flush=True)
    except Exception as exc:
        if hooks.fired_crash:
            print("    outcome: crashed (exception)", flush=True)
        else:
            print(f"    outcome: REFUSED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    finally:
        store.close()


def in_child(workdir, op, barrier=None):
    p = CTX.Process(target=child, args=(workdir, op, barrier))
    p.start()
    return p


def wait(p):
    p.join()
    if p.exitcode == -signal.SIGKILL:
        print("    outcome: crashed (SIGKILL)", flush=True)


def show(workdir, thread):
    store = STORES[OPTIONS["store"]](workdir)
    try:
        text = store.latest(thread)
        if text is None:
            print(f"    state of {thread}: nothing saved")
            return
        try:
            done, answers, pending = parse(json.loads(text))
        except Exception as exc:
            print(f"    state of {thread}: unreadable ({type(exc).__name__})")
            return
        print(f"    state of {thread}: done={done} answers={answers} pending={pending}")
    finally:
        store.close()


def forge_content(done, answers):
    """A well-formed state the run did not produce (resumefuzz's ``forge``)."""
    if answers:
        task = sorted(answers)[-1]
        answers = dict(answers)
        answers[task] = next(v for v in list(VALUES) + [answers[task] + "'"] if v != answers[task])
        return done, answers
    if len(done) < N:
        return done + [len(done) + 1], answers
    return done[:-1], answers


def tamper(workdir, thread, how):
    store = STORES[OPTIONS["store"]](workdir)
    try:
        text = store.latest(thread)
        if how == "corrupt":
            new = corrupt(text)
        else:
            state = json.loads(text)
            if how == "invalid":
                state = make_invalid(state)
            else:
                done, answers, _ = parse(state)
                state = rewrite(state, *forge_content(done, answers))
            new = json.dumps(state)
        store.overwrite_latest(thread, new)
    finally:
        store.close()


def main():
    root = tempfile.mkdtemp(prefix="autogen-repro-")
    # Removed at exit, by this process only: each operation runs in a forked child.
    atexit.register(lambda pid=os.getpid(): os.getpid() == pid and shutil.rmtree(root, True))
    workdir = os.path.join(root, "case")
    os.makedirs(workdir)
    print(f"store in {workdir}")
    for i, op in enumerate(OPS, 1):
        print(f"[{i}] {json.dumps(op)}", flush=True)
        kind = op["op"]
        if kind == "query":
            pass
        elif kind == "tamper":
            tamper(workdir, op["thread"], op["how"])
        elif kind == "race":
            barrier = CTX.Barrier(len(op["values"])) if op.get("forced") else None
            shown = None
            text = STORES[OPTIONS["store"]](workdir).latest(op["thread"])
            try:
                shown = parse(json.loads(text))[2]
            except Exception:
                pass
            racers = [
                in_child(workdir, {"op": "resume", "thread": op["thread"], "value": v, "gate": shown},
                         barrier)
                for v in op["values"]
            ]
            for p in racers:
                wait(p)
        elif kind == "twin_recover":
            twin = os.path.join(root, f"twin-{i}")
            import shutil
            shutil.copytree(workdir, twin)
            for where, label in ((workdir, "copy 1"), (twin, "copy 2")):
                print(f"  recover on {label}:")
                wait(in_child(where, {"op": "recover", "thread": op["thread"]}))
                show(where, op["thread"])
            continue
        else:
            wait(in_child(workdir, op))
        show(workdir, op.get("new_thread") or op["thread"])


if __name__ == "__main__":
    main()
'''


def _module_body(name: str) -> str:
    """A module's source without its package-relative and ``__future__`` imports."""
    lines = (Path(__file__).with_name(name)).read_text().splitlines()
    kept = [ln for ln in lines if not ln.startswith("from .") and ln != "from __future__ import annotations"]
    return "\n".join(kept)


def script(variant, workflow, ops, versions) -> str:
    pins = " ".join(f"{d}=={v}" for d, v in versions.items() if d.startswith("autogen"))
    header = (
        f'"""Replays a resumefuzz trace on AutoGen AgentChat with its own API (no resumefuzz).\n\n'
        f"Variant {variant.name}: {variant.description}.\n"
        f"Workflow: tasks 1..{workflow.n}, gates {sorted(workflow.gates)}, values {list(workflow.values)}.\n"
        f"Install: pip install {pins}\n"
        f"Run: python this_file.py  (each operation runs in a forked child; effects print as EFFECT)\n"
        f'"""\n\nfrom __future__ import annotations\n'
    )
    bodies = [f"\n# {'=' * 92}\n# {name}\n# {'=' * 92}\n{_module_body(name)}\n" for name in MODULES]
    main = (
        MAIN.replace("__OPTIONS__", repr(dict(variant.options)))
        .replace("__N__", repr(workflow.n))
        .replace("__GATES__", repr(sorted(workflow.gates)))
        .replace("__VALUES__", repr(list(workflow.values)))
        .replace("__OPS__", "[\n" + "".join(f"    {op.to_json()!r},\n" for op in ops) + "]")
    )
    return header + "".join(bodies) + main
