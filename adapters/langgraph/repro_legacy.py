"""Write a standalone repro script for a LangGraph trace (``Adapter.repro_script``).

The script embeds the adapter's standalone modules (``store``, ``workflow``, ``driver``,
``tamper``: LangGraph, psycopg and the standard library only), so it replays the trace with
exactly the framework calls the fuzzer made, and nothing of resumefuzz.  Every operation runs in
a fresh interpreter (except on the memory saver, whose store lives in one process), so a SIGKILL
crash point really kills the process that runs LangGraph; a race starts k processes that all
read the interrupted checkpoint before any of them writes.
"""

from __future__ import annotations

import pprint
from importlib import metadata
from pathlib import Path

from adapters.protocol import Variant, Workflow

from .case import spec_for

EMBEDDED = ("store.py", "workflow.py", "driver.py", "tamper.py")
PINNED = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
          "langgraph-checkpoint-postgres", "psycopg")

MAIN = r'''
import os, shutil, signal, subprocess, sys, tempfile

HERE = os.path.abspath(__file__)


def package(root):
    pkg = os.path.join(root, "lgrepro")
    os.makedirs(pkg, exist_ok=True)
    for name, text in {**SOURCES, "__init__.py": ""}.items():
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)
    sys.path.insert(0, root)


class Table:
    """Harness thread -> LangGraph thread and fork source, in a JSON file of the workdir."""

    def __init__(self, workdir):
        self.path = os.path.join(workdir, "sidetable.json")

    def get(self, key, default=None):
        try:
            with open(self.path) as f:
                return json.load(f).get(key, default)
        except FileNotFoundError:
            return default

    def set(self, key, value):
        from lgrepro.store import write_json
        try:
            with open(self.path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            doc = {}
        doc[key] = value
        write_json(self.path, doc)


class Hooks:
    """Prints every effect; fires the op's crash point (an exception, or SIGKILL of this
    process) at task start (before_effect), right after the effect (in_flight), or when the
    next task starts or the run returns (after_commit)."""

    def __init__(self, op, branch, ready_fd=None, go_fd=None):
        self.crash, self.bad, self.branch = op.get("crash"), op.get("bad_output"), branch
        self.ready_fd, self.go_fd = ready_fd, go_fd
        self.last, self.crashed = None, False

    def task_begins(self, t):
        if self.last is not None and self.last != t:
            done, self.last = self.last, None
            self.point(done, "after_commit")
        self.point(t, "before_effect")

    def effect(self, t, value):
        print(f"  effect fired: branch={self.branch} task={t} value={value!r}", flush=True)
        self.last = t
        self.point(t, "in_flight")

    def wants_bad_output(self, t):
        return self.bad == t

    def output(self, t, value):
        return "<bad>" if self.bad == t else t

    def race_ready(self):
        if self.ready_fd is not None:
            os.write(self.ready_fd, b"r")
            os.read(self.go_fd, 1)

    def run_returned(self):
        if self.last is not None:
            self.point(self.last, "after_commit")

    def point(self, t, phase):
        c = self.crash
        if self.crashed or not c or (c["task"], c["phase"]) != (t, phase):
            return
        self.crashed = True
        print(f"  crash point: task {t} {phase} ({c.get('kind', 'exception')})", flush=True)
        if c.get("kind") == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"injected crash at task {t}, {phase}")


def forge(done, answers):
    """A well-formed state the run did not produce (resumefuzz's refmodel.forge)."""
    answers = dict(answers)
    if answers:
        task = sorted(answers)[-1]
        old = answers[task]
        answers[task] = next(v for v in SPEC["values"] + [old + "'"] if v != old)
        return done, answers
    if len(done) < SPEC["n"]:
        return done + [len(done) + 1], answers
    return done[:-1], answers


def open_driver(workdir):
    from lgrepro import driver, store
    opened = store.open_store(SPEC["saver"], workdir, SPEC.get("store_factory"))
    return driver.Driver(SPEC, opened, Table(workdir))


def show(d, thread):
    done, answers, pending = d.read(thread)
    print(f"  state of {thread}: done={done} answers={answers} pending={pending}", flush=True)


def apply(d, op, ready_fd=None, go_fd=None):
    from lgrepro import tamper
    kind, thread = op["op"], op["thread"]
    branch = op.get("new_thread") if kind == "fork" else thread
    hooks = Hooks(op, branch, ready_fd, go_fd)
    try:
        if kind == "start":
            outcome = d.start(thread, hooks)
        elif kind in ("resume", "race"):
            outcome = d.resume(thread, op["value"], hooks)
        elif kind in ("recover", "twin_recover"):
            outcome = d.recover(thread, hooks)
        elif kind == "stale_resume":
            outcome = d.resume(thread, op["value"], hooks, gate=op["gate"], stale=True)
        elif kind == "fork":
            outcome = d.fork(thread, op["gate"], op["value"], op["new_thread"], hooks)
        elif kind == "tamper":
            forged = forge(*d.read(thread)[:2]) if op["how"] == "forged" else None
            print("  " + tamper.tamper(d, thread, op["how"], SPEC["tamper"], forged))
            outcome = "ok"
        else:
            outcome = "ok"
        if kind in ("start", "resume", "race", "recover", "twin_recover", "fork", "stale_resume"):
            hooks.run_returned()
    except Exception as exc:
        outcome = f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    for call in d.calls:
        print(f"  langgraph: {call}")
    print(f"  outcome: {outcome}", flush=True)
    try:
        show(d, branch)
    except Exception as exc:
        print(f"  state of {branch}: unreadable ({type(exc).__name__}: {exc})")


def child(argv):
    workdir, index = argv[0], int(argv[1])
    package(os.path.join(workdir, ".pkg"))
    d = open_driver(workdir)
    if len(argv) > 2:  # a racer
        apply(d, dict(OPS[index], value=argv[2]), int(argv[3]), int(argv[4]))
    else:
        apply(d, OPS[index])
    d.store.release()


def run_child(args, **kw):
    proc = subprocess.run([sys.executable, HERE, "--child", *args], **kw)
    if proc.returncode == -signal.SIGKILL:
        print("  (the process was killed with SIGKILL)")
    elif proc.returncode:
        print(f"  (the process exited with {proc.returncode})")


def race(workdir, index, values):
    ready_r, ready_w = os.pipe()
    gos = [os.pipe() for _ in values]
    procs = []
    for (go_r, go_w), value in zip(gos, values):
        procs.append(subprocess.Popen(
            [sys.executable, HERE, "--child", workdir, str(index), value, str(ready_w), str(go_r)],
            pass_fds=(ready_w, go_r)))
    for _ in values:  # every racer has read the interrupted checkpoint
        os.read(ready_r, 1)
    for _, go_w in gos:
        os.write(go_w, b"g")
    for p in procs:
        p.wait()


def twin(workdir, index):
    copy = tempfile.mkdtemp(prefix="twin-")
    d = open_driver(workdir)
    d.store.clone(copy)
    import shutil
    shutil.copyfile(os.path.join(workdir, "sidetable.json"), os.path.join(copy, "sidetable.json"))
    d.store.release()
    for where in (workdir, copy):
        print(f"  recover on {'the original' if where == workdir else 'the copy'}:")
        run_child([where, str(index)])
    return copy


def main():
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2:])
    workdir = tempfile.mkdtemp(prefix="langgraph-repro-")
    package(os.path.join(workdir, ".pkg"))
    print(f"LangGraph repro, variant {VARIANT}; store in {workdir}")
    in_process = open_driver(workdir) if SPEC["saver"] == "memory" else None
    extra = []
    try:
        for i, op in enumerate(OPS):
            print(f"op {i}: {json.dumps(op)}", flush=True)
            if in_process is not None:
                if op["op"] in ("race", "twin_recover"):
                    print("  (not expressible on the memory saver)")
                    continue
                apply(in_process, op)
            elif op["op"] == "race":
                race(workdir, i, op["values"])
            elif op["op"] == "twin_recover":
                extra.append(twin(workdir, i))
            else:
                run_child([workdir, str(i)])
    finally:
        if SPEC["saver"] == "postgres":
            from lgrepro import store
            for where in [workdir, *extra]:
                store.drop_postgres(where)
        for where in [workdir, *extra]:  # the children ran in these; none is left behind
            shutil.rmtree(where, ignore_errors=True)


'''

FOOTER = '''

if __name__ == "__main__":
    main()
'''


def write_script(variant: Variant, workflow: Workflow, ops) -> str:
    here = Path(__file__).parent
    sources = {name: (here / name).read_text() for name in EMBEDDED}
    spec = spec_for(variant, workflow)
    spec_json = {**spec, "gates": sorted(spec["gates"])}
    versions = []
    for dist in PINNED:
        try:
            versions.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    op_docs = [op.to_json() for op in ops]
    header = (
        "#!/usr/bin/env python3\n"
        f'"""LangGraph repro: variant {variant.name}.\n\n'
        f"{variant.description}.\n"
        f"Workflow: {workflow.n} tasks, gates {sorted(workflow.gates)}, "
        f"values {list(workflow.values)}.\n"
        f"Versions: {' '.join(versions)}\n\n"
        f"Install: pip install {' '.join(repr(v) for v in versions)}\n"
        "Run:     python this_file.py   (PostgreSQL variants: RESUMEFUZZ_PG_DSN, default "
        "postgresql://postgres@127.0.0.1:5432/postgres)\n"
        + (f"Custom store: the factory {spec['store_factory']} builds the saver; its module and "
           "resumefuzz (adapters.storefactory) must be importable.\n"
           if spec.get("saver") == "custom" else "")
        + '"""\n'
        "import json\n"
        "import os\n"
        "for _k, _v in {'LANGSMITH_TRACING': 'false', 'LANGCHAIN_TRACING_V2': 'false', "
        "'LANGSMITH_OTEL_ENABLED': 'false', 'OTEL_SDK_DISABLED': 'true'}.items():\n"
        "    os.environ.setdefault(_k, _v)\n\n"
        f"VARIANT = {variant.name!r}\n"
        f"SPEC = {pprint.pformat(spec_json, width=96, sort_dicts=False)}\n"
        "SPEC['gates'] = set(SPEC['gates'])\n"
        "# The trace, one operation a line (crash points fire inside the named task).\n"
        "OPS = [\n" + "".join(f"    {doc!r},\n" for doc in op_docs) + "]\n"
    )
    embedded = ("\n\n# The adapter's standalone modules "
                "(LangGraph, psycopg and the standard library only).\n")
    embedded += "SOURCES = {}\n"
    for name, text in sources.items():
        assert "\'\'\'" not in text and not text.endswith("\\")
        embedded += f"SOURCES[{name!r}] = r\'\'\'{text}\'\'\'\n"
    return header + MAIN + embedded + FOOTER
