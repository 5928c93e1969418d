"""A complete minimal adapter: a home-made checkpointer that saves one JSON file per thread.

Run it with:  resumefuzz fuzz toy_adapter:ToyAdapter   (with docs/examples on PYTHONPATH)
"""

import json
import shutil
from pathlib import Path

from adapters.files import atomic_write_text
from adapters.protocol import (
    Adapter, Capabilities, Case, Fork, Recover, Refused, Resume, Start, StateView, Variant,
    forge, Durable,
)


class ToyCase(Case):
    def __init__(self, workflow, workdir: Path):
        self.workflow, self.dir = workflow, workdir

    def _path(self, thread):
        return self.dir / f"{thread}.json"

    def _load(self, thread):
        path = self._path(thread)
        return json.loads(path.read_text()) if path.exists() else None

    def _save(self, thread, state):
        atomic_write_text(self._path(thread), json.dumps(state))

    def run(self, op, hooks):
        if isinstance(op, Start):
            thread, state = op.thread, {"done": [], "answers": {}, "pending": None}
        elif isinstance(op, Fork):  # copy the gate's checkpoint into the new branch
            thread, state = op.new_thread, self._load(f"{op.thread}.cp{op.gate}")
            self._save(f"{thread}.cp{op.gate}", state)  # the branch owns its fork point
        else:
            thread, state = op.thread, self._load(op.thread)
            if state is None:
                # The toy *is* its framework: its refusals are raised as ``Refused`` (an
                # exception of adapter code would count as a harness error, not a refusal).
                raise Refused("no such thread")
        answer = getattr(op, "value", None) if not isinstance(op, Recover) else None
        if isinstance(op, Resume) and state["pending"] is None:
            raise Refused("nothing is pending")
        for t in range(len(state["done"]) + 1, self.workflow.n + 1):
            hooks.task_begins(t)
            value = None
            if t in self.workflow.gates:
                if answer is None:
                    state["pending"] = t
                    self._save(thread, state)
                    self._save(f"{thread}.cp{t}", state)
                    return "interrupted"
                value, answer = answer, None
            hooks.effect(t, value)
            state["done"].append(hooks.output(t, value))
            if value is not None:
                state["answers"][str(t)] = value
            state["pending"] = None
            self._save(thread, state)
        return "completed"

    def query(self, thread):
        state = self._load(thread) or {"done": [], "answers": {}, "pending": None}
        answers = {int(t): v for t, v in state["answers"].items()}
        return StateView.of(self.workflow, state["done"], answers, state["pending"])

    def tamper(self, thread, how, part=None):
        state = self._load(thread)
        if how == "corrupt":
            self._path(thread).write_text("{garbage")
            return
        if how == "invalid":
            state["done"].append(99)
        else:
            durable = Durable(tuple(state["done"]),
                              tuple((int(t), v) for t, v in state["answers"].items()),
                              state["pending"])
            forged = forge(self.workflow, durable, part)
            state = {"done": list(forged.done), "pending": forged.pending,
                     "answers": {str(t): v for t, v in forged.answers}}
        self._save(thread, state)

    def clone_store(self, dest):
        for path in self.dir.iterdir():
            shutil.copyfile(path, Path(dest) / path.name)


class ToyAdapter(Adapter):
    name = "toy"

    def variants(self):
        return [Variant("json-files", "one JSON file per thread, no locking")]

    def capabilities(self, variant):
        return Capabilities(not_expressible={})

    def open(self, variant, workflow, workdir):
        return ToyCase(workflow, Path(workdir))
