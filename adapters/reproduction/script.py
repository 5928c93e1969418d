"""Compose a standalone reproduction script: ``Script(...).source()``.

An adapter's ``repro.py`` supplies the parts in its framework's terms: the workflow definition
(source of real functions of its own, taken with ``inspect.getsource``), the framework calls it
recorded while replaying the trace, one ``Step`` per operation, and the ``Check`` of the step
that diverged.  This module adds the runtime functions the steps need (``runtime.py``, by
name) and the few glue lines that run a step: straight lines when the step can neither fail nor
crash, ``observe(step_n)`` around one that may, ``with contextlib.suppress(...)`` around one that
survives its task's own raise and reads nothing of it (``suppressed``), ``in_child(step_n,
...)`` for a SIGKILL.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from dataclasses import dataclass

from adapters.files import installed_versions

from . import runtime, runtime_local

MOMENTS = {"before_effect": "before its effect", "in_flight": "after its effect",
           "after_commit": "after it completed"}


def crash_spot(crash) -> tuple | None:
    """``(task, phase, kind)`` -> what the script's ``crash_point`` takes: ``(task, moment,
    kind)``; a task that dies "after it completed" dies when the next task starts or, if it is
    the last to run, once the call has returned (the engine's after_commit)."""
    if crash is None:
        return None
    task, phase, kind = crash
    return (task, MOMENTS[phase], kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One operation: ``calls`` are Python statements, as the adapter recorded them."""

    comment: str
    calls: tuple = ()
    crash: tuple | None = None  # (task, moment, "exception" | "sigkill"), moment from MOMENTS
    guarded: bool = False  # the framework may raise here: run it through observe()
    crashed: bool = False  # the fuzzer saw it die at its crash point (not a refusal)
    observed: bool = False  # the step the check looks at
    child_setup: tuple = ()  # statements a child process runs first (its own connection)
    bad_output: int | None = None  # this task writes a value outside the state schema
    racers: tuple = ()  # a race: each racer's statements, run at once in child processes


def step_of(evidence, i: int, calls, *, note: str = "", **extra) -> Step:
    """The ``Step`` of operation ``i`` of ``evidence``, its calls given: its words (``note``
    appended), its crash point and BadOutput, whether the framework may raise there, and
    whether it is the step the check looks at; ``extra``: the other ``Step`` fields."""
    op = evidence.ops[i]
    crash = getattr(op, "crash", None)
    observed = evidence.observed[i] if i < len(evidence.observed) else None
    return Step(comment=op_words(op, observed) + note, calls=tuple(calls),
                crash=(crash.task, crash.phase, crash.kind) if crash else None,
                bad_output=getattr(op, "bad_output", None),
                guarded=observed is not None and observed.outcome in ("rejected", "crashed"),
                crashed=observed is not None and observed.outcome == "crashed",
                observed=i == evidence.step, **extra)


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """What the diverging step must show: ``aspect`` is ``outcome``, ``effects`` (the
    ``(task, value)`` rows it fired, sorted), ``state`` (``state_src`` evaluated after it) or
    ``joint``: the three together, ``(outcome, rows, state)``, where each alone matches some
    allowed observation but no allowed observation matches all three."""

    aspect: str
    allowed: tuple
    expected: str
    observed: str
    state_src: str = ""

    @property
    def reads_outcome(self) -> bool:
        """Does the script need the step's outcome (``status``)?"""
        return self.aspect in ("outcome", "joint")

    @property
    def reads_state(self) -> bool:
        """Does the script read the stored state after the step (``state_src``)?"""
        return self.aspect in ("state", "joint")


@dataclass(frozen=True, slots=True, kw_only=True)
class Script:
    header: str  # the docstring: the defect, versions, how to run
    imports: tuple  # import statements of the framework (the runtime's are added)
    workflow_src: str  # the workflow definition and the small readers the calls use
    steps: tuple
    check: Check
    stdlib: tuple = ()  # standard-library modules the workflow definition imports
    asynchronous: bool = False  # the calls are awaited: each step is an ``async def``
    # Each step runs in a fresh copy of the context (``contextvars``), as separate requests to a
    # server would: for a framework that keeps per-run state in context variables.
    fresh_context: bool = False
    # Every step runs in a forked child process (``in_child``): for a framework whose threads do
    # not survive a fork, so that the process that forks racers or crashing calls runs nothing.
    isolated: bool = False
    # Statements that release the store before the verdict exits (an async connection's worker
    # thread, not a daemon, would keep the script alive): the store's ``ScriptStore.close``.
    teardown: tuple = ()

    def _killed(self) -> bool:
        """Does a process die or several share the effect log (a SIGKILL, a race, isolated
        steps)?  Then the log is the SQLite file of ``runtime``, read with ``effects()``;
        otherwise the list ``EFFECTS`` of ``runtime_local``."""
        return self.isolated or any(s.racers or (s.crash and s.crash[2] == "sigkill")
                                    for s in self.steps)

    def _log(self) -> str:
        return "effects()" if self._killed() else "EFFECTS"

    def source(self) -> str:
        crashes = [s.crash for s in self.steps if s.crash]
        raced = any(s.racers for s in self.steps)
        killed = self._killed()
        workflow_src = self.workflow_src
        if "BAD_OUTPUT" in workflow_src and "\nBAD_OUTPUT = " not in f"\n{workflow_src}":
            # The steps set it around the call whose task writes outside the schema.
            workflow_src = ("BAD_OUTPUT = None  # the task that writes a value outside the "
                            "schema\n" + workflow_src)
        names, imports = [], {"sys", *self.stdlib, *(["asyncio"] if self.asynchronous else []),
                              *(["contextvars"] if self.fresh_context else [])}
        if killed or "WORKDIR" in workflow_src:
            names += ["WORKDIR", "atexit:WORKDIR"]  # the folder, and its removal at exit
            imports |= {"atexit", "os", "shutil", "tempfile"}
        if killed:  # the effect log must survive the process (or be shared by several): SQLite
            names += ["EFFECTS", "effect", "effects"]
            imports.add("sqlite3")
        else:
            names += ["local:EFFECTS", "local:effect"]
        crashing = bool(crashes) or "crash_point(" in workflow_src
        # The ``observe`` of ``runtime`` (it tells "crashed" from "rejected" and reads the
        # SQLite log) where a process dies or several share the log, where the checked step
        # crashes, and where ``observe_crashing`` calls it; elsewhere a crashing step's status
        # is never looked at, and the list's ``observe`` does.
        telling = killed or (crashes and not self._raising_only()) or any(
            s.crash and s.observed and self.check.reads_outcome for s in self.steps)
        if any("contextlib." in c for s in self.steps for c in s.calls):
            imports.add("contextlib")
        if raced or any(map(self._observes, self.steps)):
            names += ["observe" if telling else "local:observe"]
        names += ["verdict"]
        if crashing and self._raising_only():
            names += ["CRASH", "Crash", "local:crash_point"]
        elif crashing:
            names += ["CRASH", "Crash", "crash_point"]
            imports |= {"os", "signal"}
        if crashes and not self._raising_only():
            names.append("observe_crashing")
        if not killed and {"observe", "observe_crashing"} & set(names):
            names.insert(names.index("local:effect") + 1, "local:effects")  # what they call
        if self.isolated or any(c[2] == "sigkill" for c in crashes):
            names.append("in_child")
        if raced:
            names.append("race")
            imports.add("os")
        # Before the framework's imports: a script that cannot import it exits 2, not 1.
        imports |= {"atexit", "os"}
        body = [f'"""{self.header.strip()}"""', "import " + ", ".join(sorted(imports)),
                snippet("atexit:last_value"), *self.imports]
        body += [snippet(name) for name in names]
        body += [workflow_src.strip()]
        for i, step in enumerate(self.steps, 1):
            body += self._step(i, step)
        body += [f"# Expected: {self.check.expected}", f"# Observed: {self.check.observed}"]
        body += self._check()
        return "\n".join(body).rstrip() + "\n"

    def _raising_only(self) -> bool:
        """Do all crash points raise at a task's own moment (no SIGKILL, no "after it
        completed")?  Then the script takes the three-line ``crash_point`` and a step sets
        ``CRASH`` around its call, with no ``observe_crashing``."""
        return not self.isolated and all(
            s.crash[2] == "exception" and s.crash[1] != "after_commit"
            for s in self.steps if s.crash)

    def _step(self, i: int, step: Step) -> list:
        if step.bad_output is None:
            return self._run_step(i, step)
        reset = [] if step.observed else ["BAD_OUTPUT = None"]  # the check comes next: no reset
        return [f"BAD_OUTPUT = {step.bad_output!r}", *self._run_step(i, step), *reset]

    def _run_step(self, i: int, step: Step) -> list:
        lines = [f"# {i}. {step.comment}"]
        if not (step.calls or step.racers or step.observed):
            return lines  # a read (or nothing the framework is asked): the comment says it
        if step.racers:
            names = []
            for r, calls in enumerate(step.racers, 1):
                names.append(f"racer_{r}")
                lines += [f"def racer_{r}():", *(f"    {c}" for c in step.child_setup),
                          *(f"    {c}" for c in calls)]
            run = f"race({', '.join(names)})"
            if not step.observed:
                return lines + [run]
            return lines + ["before = len(effects())", run,
                            "status, fired = 'completed', effects()[before:]"]
        spot = crash_spot(step.crash)
        crash = repr(spot) if spot else ""
        if not self._observes(step):
            calls = list(step.calls)
            if self.fresh_context and not self.asynchronous and len(calls) == 1 and _is_expression(calls[0]):
                calls = [f"contextvars.copy_context().run(lambda: {calls[0]})"]
            elif self.asynchronous and not self.fresh_context and self._plain(calls):
                pass  # awaits nothing: straight lines, no ``async def`` to run it
            elif self.asynchronous or self.fresh_context:
                lines += [f"{'async ' if self.asynchronous else ''}def step_{i}():",
                          *(f"    {c}" for c in calls)]
                calls = [f"asyncio.run(step_{i}())" if self.asynchronous
                         else f"contextvars.copy_context().run(step_{i})"]
            if step.observed:  # the effects it fires are all the check needs
                log = self._log()
                return lines + [f"before = len({log})", *calls, f"fired = {log}[before:]"]
            return lines + calls
        calls = list(step.calls) or ["pass"]
        sigkill = (step.crash is not None and step.crash[2] == "sigkill") or self.isolated
        if step.observed and self.check.reads_outcome:
            calls = _returning(calls)
        if sigkill:
            if self.asynchronous:  # awaited calls: a coroutine, which the child runs to its end
                lines += [f"async def calls_{i}():", *(f"    {c}" for c in calls)]
                calls = [f"return asyncio.run(calls_{i}())"]
            lines += [f"def step_{i}():", *(f"    {c}" for c in step.child_setup)]
            lines += [f"    {c}" for c in calls]
            run = f"in_child(step_{i}, {crash})" if crash else f"in_child(step_{i})"
            if not step.observed:
                return lines + [run]
            return lines + ["before = len(effects())", f"status = {run}", "fired = effects()[before:]"]
        target = "status, fired = " if step.observed else ""
        one = None if self.fresh_context or self.asynchronous else _one_expression(calls)
        if one is not None:  # one expression: a lambda, no function to name
            call = f"lambda: {one}"
        else:
            lines += [f"{'async ' if self.asynchronous else ''}def step_{i}():",
                      *(f"    {c}" for c in calls)]
            call = (f"lambda: asyncio.run(step_{i}())" if self.asynchronous else
                    f"lambda: contextvars.copy_context().run(step_{i})" if self.fresh_context
                    else f"step_{i}")
        if crash and self._raising_only():
            return lines + [f"CRASH = {spot[:2]!r}", f"{target}observe({call})", "CRASH = None"]
        run = f"observe_crashing({call}, {crash})" if crash else f"observe({call})"
        lines.append(target + run)
        return lines

    def _plain(self, calls: list) -> bool:
        """Can an asynchronous step's ``calls`` run as straight lines at the top of the script:
        they await nothing, and no name they assign is one the workflow definition or the
        runtime binds (a step's own variables, ``p`` say, may outlive it there: harmless)?  (A
        call that needs a running event loop without awaiting would fail there: the script's
        verification shows it, as a script that does not reproduce.)"""
        try:
            tree = ast.parse("\n".join(calls))
        except SyntaxError:  # the header of a block ("async with ...:")
            return False
        if any(isinstance(n, (ast.Await, ast.AsyncWith, ast.AsyncFor)) for n in ast.walk(tree)):
            return False
        assigned = {n.id for n in ast.walk(tree)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return not assigned & (_top_level_names(self.workflow_src) | _RUNTIME_NAMES)

    def _observes(self, step: Step) -> bool:
        """Does the step run through ``observe`` (it may raise, or its outcome is checked)?"""
        return bool(step.crash or step.guarded or self.isolated
                    or (step.observed and self.check.reads_outcome))

    def _check(self) -> list:
        c = self.check
        allowed = repr(sorted(c.allowed, key=repr))
        if c.aspect == "outcome":
            what, observed = "outcome", "status"
        elif c.aspect == "effects":  # lists of (task, value) tuples, as the script's log has them
            rows = [sorted(map(tuple, a), key=repr) for a in c.allowed]
            what, observed, allowed = "effects fired", "sorted(fired, key=repr)", repr(sorted(rows, key=repr))
        elif c.aspect == "joint":
            what, observed = "outcome, effects fired and stored state", \
                f"(status, sorted(fired, key=repr), {c.state_src})"
            allowed = repr(_joint(c.allowed))
        else:
            what, observed = "stored state", c.state_src
        if not self.teardown:
            return [f"verdict({what!r}, {observed}, {allowed})"]
        read = [f"observed = {observed}"] if c.reads_state else []  # read before the store closes
        return [*read, *self.teardown,
                f"verdict({what!r}, {'observed' if read else observed}, {allowed})"]


# Names the runtime may define at the top of a script: a straight-line step must not rebind them.
_RUNTIME_NAMES = {"WORKDIR", "EFFECTS", "CRASH", "Crash", "effect", "effects", "observe", "verdict",
                  "crash_point", "observe_crashing", "in_child", "race", "status", "fired",
                  "before", "asyncio", "contextvars", "sys", "os"}


def _top_level_names(src: str) -> set:
    """The names ``src`` (a workflow definition) binds at its top level."""
    names = set()
    for node in ast.parse(src).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _one_expression(calls: list) -> str | None:
    """A synchronous step that is one expression (``return`` of one, after ``_returning``) as
    the expression a ``lambda`` returns; ``None`` when the step is more than that.  (Not for an
    asynchronous step: taken out of its coroutine, the expression's other calls would run with
    no event loop; LlamaIndex's ``wf.run()`` needs one.)"""
    if len(calls) != 1:
        return None
    text = calls[0].strip()
    try:
        node = ast.parse(text).body[0]
    except SyntaxError:
        return None
    if not isinstance(node, (ast.Expr, ast.Return)) or node.value is None:
        return None
    return text.removeprefix("return ") if isinstance(node, ast.Return) else text


def _joint(allowed) -> list:
    """A joint check's allowed ``(outcome, rows, state)`` as the script compares them: rows as
    sorted lists of ``(task, value)`` tuples, like the script's effect log."""
    return sorted(((o, sorted(map(tuple, rows), key=repr), state) for o, rows, state in allowed),
                  key=repr)


def _is_expression(src: str) -> bool:
    try:
        return isinstance(ast.parse(src).body[0], ast.Expr)
    except SyntaxError:
        return False


def _returning(calls: list) -> list:
    """The step's statements, its last expression returned through the workflow's
    ``outcome(result)`` ("interrupted" or "completed"), at the last line's indentation."""
    text = calls[-1].lstrip()
    indent = calls[-1][: len(calls[-1]) - len(text)]
    try:
        last = ast.parse(text).body[0]
    except SyntaxError:  # the header of a block ("async with ...:"): the block is empty
        return calls + [indent + "    pass", "return 'completed'"]
    if not isinstance(last, ast.Expr):
        return calls + ["return 'completed'"]
    value = last.value
    is_outcome = (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                  and value.func.id == "outcome")
    if not is_outcome:
        value = ast.Call(ast.Name("outcome", ast.Load()), [value], [])
    return calls[:-1] + [indent + ast.unparse(ast.Return(value))]


def snippet(name: str) -> str:
    """The source of ``name`` in ``runtime`` (``local:name``: in ``runtime_local``):
    a function or class, or a module-level assignment (``"A, B"`` names the assignment whose
    targets are those).  Docstrings and comment lines are left out: they explain the runtime to
    us; the script is short, and the names say what it does.  ``atexit:WORD``: the statement
    ``atexit.register(...)`` that mentions ``WORD`` (what a script does as it exits), at the
    top level or under ``if __name__ == "__main__"`` (what only a script runs)."""
    module = runtime
    if name.startswith("local:"):
        module, name = runtime_local, name.partition(":")[2]
    obj = getattr(module, name.split(",")[0].strip(), None)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        source = without_docstring(inspect.getsource(obj))
        return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    text = inspect.getsource(module)
    nodes = []
    for node in ast.parse(text).body:  # and a script's own statements, which the engine skips
        main = isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
        nodes += node.body if main else [node]
    for node in nodes:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).strip("()") == name:
            return ast.get_source_segment(text, node)
        if isinstance(node, ast.Expr) and name.startswith("atexit:"):
            segment = ast.get_source_segment(text, node)
            if segment.startswith("atexit.register(") and name[7:] in segment:
                return segment
    raise KeyError(f"{module.__name__} has no {name!r}")


def source_as(obj, name: str) -> str:
    """``obj``'s source without its docstring, defined under ``name``: where an adapter keeps
    one function per store or shape (``save_json``, ``save_sqlite``), the script defines the
    one it needs under the name its calls use (``save``), with no alias line."""
    source = without_docstring(inspect.getsource(obj))
    return re.sub(rf"^((?:async )?def ){obj.__name__}\(", rf"\g<1>{name}(", source, count=1,
                  flags=re.MULTILINE)  # below its decorators, if any


def store_parts(recipe) -> tuple[tuple, tuple, str]:
    """A store factory's ``ScriptStore`` as a script's parts: the standard-library modules its
    module imports at the top level (``import os``), that module's other import statements
    (``from langgraph_checkpoint_lmdb import LMDBSaver``), each only if the pasted functions use
    it and resumefuzz's own left out (``WORKDIR`` is the script's runtime's), and the source of
    its functions followed by its ``setup``."""
    source = "\n".join([*(without_docstring(inspect.getsource(f)) for f in recipe.functions),
                        *recipe.setup])
    used = {ast.unparse(n) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.Name, ast.Attribute))}
    tree = ast.parse(inspect.getsource(inspect.getmodule(recipe.functions[0])))
    stdlib, imports = [], []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None and alias.name not in used:
                    continue
                if alias.asname is not None and alias.asname not in used:
                    continue
                top = alias.name.split(".")[0]
                if top in sys.stdlib_module_names and alias.asname is None:
                    stdlib.append(alias.name)
                elif top not in _OURS:
                    imports.append(ast.unparse(ast.Import([alias])))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [a for a in node.names if (a.asname or a.name) in used]
            if names and node.module.split(".")[0] not in _OURS:
                imports.append(ast.unparse(ast.ImportFrom(node.module, names, 0)))
    return tuple(stdlib), tuple(imports), source


def store_class(recipe) -> str:
    """The name of the class a ``ScriptStore``'s ``build`` function instantiates by default (its
    ``cls`` parameter): what a forced race subclasses."""
    build = recipe.builder
    return inspect.signature(build).parameters["cls"].default.__name__


_OURS = {"__future__", "adapters", "resumefuzz", "fuzz", "refmodel"}


def without_docstring(source: str) -> str:
    """``source`` of one function or class without its docstring and blank lines (``pass`` if
    nothing is left)."""
    source = "\n".join(line for line in source.splitlines() if line.strip())  # no blank lines
    node = ast.parse(source).body[0]
    doc = node.body[0] if node.body else None
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)):
        return source.rstrip()
    lines = source.splitlines()
    after = doc.end_lineno + (doc.end_lineno < len(lines) and not lines[doc.end_lineno].strip())
    rest = lines[: doc.lineno - 1] + lines[after:]
    if len(node.body) == 1:
        rest.insert(doc.lineno - 1, lines[doc.lineno - 1][: doc.col_offset] + "pass")
    return "\n".join(rest).rstrip()


def looped(calls: list) -> list:
    """Runs of the same two lines (a run() and its save, again and again) as one ``for`` loop."""
    out, i = [], 0
    while i < len(calls):
        pair, k = calls[i:i + 2], 1
        while len(pair) == 2 and calls[i + 2 * k: i + 2 * k + 2] == pair:
            k += 1
        if k > 2:
            out += [f"for _ in range({k}):", *(f"    {c}" for c in pair)]
            i += 2 * k
        else:
            out.append(calls[i])
            i += 1
    return out


def race_interleaving(log, *, rename: str, read: str) -> list | None:
    """A race as straight lines: the lines each racer recorded (``log``: ``(kind, source)``, a
    racer's kind ``"racer <id>"``), every racer's reads first (its lines up to the one containing
    ``read``), then the rest of each racer in turn: the interleaving in which all racers read
    before any writes.  Variable ``rename`` becomes ``<rename>_<racer>``.  ``None``: no racer
    recorded a line."""
    racers = list(dict.fromkeys(kind for kind, _ in log if kind.startswith("racer ")))
    if not racers:
        return None
    reads, rest = [], []
    for r, racer in enumerate(racers, 1):
        lines = [re.sub(rf"\b{rename}\b", f"{rename}_{r}", src) for kind, src in log if kind == racer]
        cut = next((i + 1 for i, src in enumerate(lines) if read in src), len(lines))
        reads += lines[:cut]
        rest += looped(lines[cut:])
    return reads + rest


def unwritten(lines) -> bool:
    """Does any of ``lines`` (a step's recorded calls) say ``<unknown: ...>``?  A case records
    that for a call it cannot write as a script yet; the checked script then falls back to the
    adapter's older one, since such a line would not even parse."""
    return any("<unknown" in line for line in lines)


# -------------------------------------------------------------------------------------------------
# The check and the words: shared by every adapter, in the terms a framework maintainer uses.
# -------------------------------------------------------------------------------------------------


def thread_label(thread: str) -> str:
    """A harness thread's name as a user would write it: ``t0`` -> ``run-1``, ``f2`` ->
    ``branch-2`` (the fuzzer's names are its own; scripts and reports use these)."""
    if thread[:1] == "t" and thread[1:].isdigit():
        return f"run-{int(thread[1:]) + 1}"
    if thread[:1] == "f" and thread[1:].isdigit():
        return f"branch-{thread[1:]}"
    return thread


def ran(effects) -> str:
    """``[(1, "a"), (2, None)]`` -> "task 1 ran with 'a', task 2 ran"."""
    words = [f"task {t} ran" + (f" with {v!r}" if v is not None else "") for t, v in effects]
    return ", ".join(words) or "no task ran"


OUTCOME_WORDS = {"interrupted": "stops at an interrupt", "completed": "runs to the end",
                 "rejected": "raises an error", "crashed": "dies at the crash point",
                 "ok": "succeeds", "stuck": "never returns"}


TAMPER_WORDS = {"corrupt": "bytes that do not decode",
                "invalid": "content outside the state schema",
                "forged": "well-formed content the run never produced"}
# Where a forgery of one stored part (``Tamper.part``) writes it.
PART_WORDS = {"pending": ", in the record of which interrupt waits for an answer alone",
              "done": ", in the tasks marked done (the record of the waiting interrupt made to "
                      "agree)",
              "answer": ", in the answer given to task {} (the record of the waiting interrupt "
                        "made to agree)"}


def tamper_words(op) -> str:
    """What a tamper writes, in a user's words: its kind, and the part a forgery edits alone."""
    part = getattr(op, "part", None)
    kind, _, task = (part or "").partition(":")
    return TAMPER_WORDS.get(getattr(op, "how", ""), "") + PART_WORDS.get(kind, "").format(task)


def state_value(view) -> dict | None:
    """A ``StateView`` as a script's state reader returns it: done, answers, pending."""
    if view is None:
        return None
    doc = view.to_json()
    return {"done": doc["done"], "answers": doc["answers"], "pending": doc["pending"]}


def stored(state: dict) -> str:
    done = ", ".join(map(str, state["done"])) or "none"
    answers = ", ".join(f"task {t} answered {v!r}" for t, v in state["answers"].items())
    pending = f"the interrupt of task {state['pending']} pending" if state["pending"] else "nothing pending"
    return f"tasks done: {done}; {answers + '; ' if answers else ''}{pending}"


def effect_rows(observation) -> list:
    return sorted(((t, v) for _, t, v in observation.effects), key=repr)


def check_for(evidence, *, state_readable: bool, outcome_readable: bool = True,
              joint: bool = False) -> Check | None:
    """The one aspect of the diverging step that tells the observation apart from every allowed
    one, simplest first: the outcome (unless the script cannot tell it, as in a race), the
    effects fired, the stored state (when the script can read it); with ``joint`` (an adapter
    whose script supports it), last, the three together.  ``None`` when none can (a stuck run:
    the script would hang)."""
    observed, allowed = evidence.observed[evidence.step], evidence.allowed
    if observed.outcome == "stuck" or not allowed:
        return None
    say = lambda values, words: " or ".join(dict.fromkeys(words(v) for v in values))  # noqa: E731
    injected = (observed.error or "").startswith("CrashInjected")  # "dies at the crash point" says it
    if outcome_readable and observed.outcome not in {a.outcome for a in allowed}:
        values = tuple(dict.fromkeys(a.outcome for a in allowed))
        return Check(aspect="outcome", allowed=values,
                     expected="the call " + say(values, OUTCOME_WORDS.get),
                     observed="the call " + OUTCOME_WORDS[observed.outcome]
                     + (f" ({observed.error})" if observed.error and not injected else ""))
    rows = effect_rows(observed)
    allowed_rows = [effect_rows(a) for a in allowed]
    if rows not in allowed_rows:
        unique = [list(r) for r in dict.fromkeys(map(tuple, allowed_rows))]
        return Check(aspect="effects", allowed=tuple(unique),
                     expected=say(allowed_rows, ran), observed=ran(rows))
    states = list({json.dumps(v, sort_keys=True): v for v in
                   (state_value(a.state) for a in allowed if a.state is not None)}.values())
    mine = state_value(observed.state)
    # An allowed observation with this outcome and these effects whose state is not compared
    # (a tampered thread that refused) allows any state: the state tells nothing apart then.
    unchecked = any(a.state is None and effect_rows(a) == rows
                    and (a.outcome == observed.outcome or not outcome_readable) for a in allowed)
    if state_readable and mine is not None and states and mine not in states and not unchecked:
        return Check(aspect="state", allowed=tuple(states),
                     expected="stored afterwards: " + say(states, stored),
                     observed="stored afterwards: " + stored(mine))
    # Each aspect alone matches some allowed observation: the three together may not.  Only
    # where every allowed observation has a compared state (an uncompared one allows any).
    if not (joint and outcome_readable and state_readable and mine is not None
            and all(a.state is not None for a in allowed)):
        return None
    triples = list({json.dumps(t, sort_keys=True): t for t in (
        (a.outcome, [list(r) for r in effect_rows(a)], state_value(a.state))
        for a in allowed)}.values())
    if (observed.outcome, [list(r) for r in rows], mine) in triples:
        return None
    words = lambda o, r, st: f"the call {OUTCOME_WORDS[o]}, {ran(r)}; {stored(st)}"  # noqa: E731
    return Check(aspect="joint", allowed=tuple(triples),
                 expected=" or ".join(words(*t) for t in triples),
                 observed=words(observed.outcome, rows, mine))


def pins(evidence, distributions) -> str:
    """``name==version`` of each distribution, as the trace was found with (else as installed):
    what the header's "Needs: pip install" line names."""
    versions = {**installed_versions(distributions), **dict(evidence.versions)}
    return " ".join(f"{d}=={versions[d]}" for d in distributions if d in versions)


def header(framework: str, description: str, evidence, pins: str) -> str:
    """The script's docstring: what it shows (the check's comment at the end says expected
    versus observed), and how to run it."""
    op = evidence.ops[evidence.step]
    return "\n".join([
        f"{evidence.category} in {framework} ({description}).",
        f"Checks step {evidence.step + 1} ({op_words(op)}): exit 1 when the defect shows, 0 when "
        f"not.  Needs: pip install {pins}",
    ])


def op_words(op, observed=None) -> str:
    """What an operation does, in a user's words (``fork of run-1 at task 1's interrupt ...``)."""
    thread = thread_label(op.thread)
    text = {
        "start": f"Start {thread}",
        "resume": f"Resume {thread} with {getattr(op, 'value', '')!r}",
        "recover": f"Continue {thread} after the failure",
        # The fuzzer then recovered a copy of the store taken before this call, apart; a check
        # of this call's own observation needs only this one (fuzz/runner.py, _twin).
        "twin_recover": f"Continue {thread} after the failure, the first of two recoveries each on "
                        "its own copy of the store",
        "fork": f"Fork {thread} at the interrupt of task {getattr(op, 'gate', '')}, answering "
                f"{getattr(op, 'value', '')!r}, as {thread_label(getattr(op, 'new_thread', ''))}",
        "query": f"Read the state of {thread}",
        "tamper": f"Alter the newest checkpoint of {thread} in the store, not through the API: "
                  + tamper_words(op),
        "race": f"{len(getattr(op, 'values', ()))} processes resume {thread} at once, with "
                + " and ".join(map(repr, getattr(op, "values", ()))),
        "stale_resume": f"Resume {thread} with {getattr(op, 'value', '')!r} through the handle "
                        f"obtained while task {getattr(op, 'gate', '')} was asking (it was "
                        "answered since)",
    }.get(op.name, f"{op.name} {thread}")
    if getattr(op, "bad_output", None) is not None:
        text += f"; task {op.bad_output} writes a value outside the state schema"
    crash = getattr(op, "crash", None)
    if crash is not None:
        how = "kills its process (SIGKILL)" if crash.kind == "sigkill" else "raises"
        text += f"; task {crash.task} {how} {MOMENTS[crash.phase]}"
    if observed is not None:
        outcomes = observed.outcome.split("|")  # a race: one outcome per racer
        text += ": " + (" / ".join(OUTCOME_WORDS.get(o, o) for o in outcomes))
        rows = effect_rows(observed)
        if rows:
            text += f", {ran(rows)}"
    return text
