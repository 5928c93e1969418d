"""The reference target's store: one directory of JSON files, written atomically.

Per thread: ``<t>.head.json`` holds the latest checkpoint (durable state, a write counter and an
integrity digest), ``<t>.bak.json`` a copy of it, ``<t>.cp<g>.json`` the checkpoint at which gate
``g`` was pending, ``<t>.lock`` exists while an operation runs, ``<t>.claim-<n>`` records who
consumed the interrupt raised by write ``n``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from adapters.protocol import Durable, StateView, Unreadable, Workflow, atomic_write_text


class Refused(Exception):
    """The reference refuses loudly (tampered store, nothing to do, interrupt already taken)."""


class Store:
    def __init__(self, workdir: Path, workflow: Workflow):
        self.dir = Path(workdir)
        self.workflow = workflow
        key = self.dir / "secret"
        if not key.exists():
            atomic_write_text(key, secrets.token_hex(16))
        self.secret = key.read_text()

    # -- checkpoints --------------------------------------------------------------------------
    def path(self, thread: str, suffix: str) -> Path:
        return self.dir / f"{thread}.{suffix}"

    def _digest(self, body: dict) -> str:
        text = json.dumps(body, sort_keys=True)
        return hashlib.sha256((self.secret + text).encode()).hexdigest()

    def write(self, thread: str, durable: Durable, seq: int) -> None:
        body = {"done": list(durable.done), "answers": {str(t): v for t, v in durable.answers},
                "pending": durable.pending, "seq": seq}
        text = json.dumps({"body": body, "digest": self._digest(body)}, sort_keys=True)
        atomic_write_text(self.path(thread, "head.json"), text)
        atomic_write_text(self.path(thread, "bak.json"), text)
        if durable.pending is not None:
            atomic_write_text(self.path(thread, f"cp{durable.pending}.json"), text)

    def read_raw(self, path: Path) -> dict | None:
        """The decoded document, ``None`` when absent; ``Unreadable`` when it does not decode."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
            doc["body"]["done"], doc["body"]["answers"], doc["body"]["pending"]
        except (ValueError, KeyError, TypeError) as exc:
            raise Unreadable(f"{path.name}: {exc}") from None
        return doc

    def load(self, path: Path, *, trusting: bool = False) -> tuple[Durable, int] | None:
        """Decode, validate against the schema and check integrity; ``Refused`` when any fails.

        ``trusting`` (the InvalidPersist mutant) skips the checks and, when the bytes do not
        decode, silently falls back to the backup copy.
        """
        try:
            doc = self.read_raw(path)
        except Unreadable:
            if not trusting:
                raise Refused(f"{path.name} does not decode") from None
            doc = self.read_raw(path.with_name(path.name.replace("head", "bak")))
        if doc is None:
            return None
        body = doc["body"]
        durable = Durable(tuple(body["done"]),
                          tuple(sorted((int(t), v) for t, v in body["answers"].items())),
                          body["pending"])
        if not trusting:
            if not durable.view(self.workflow).is_valid(self.workflow):
                raise Refused(f"{path.name} breaks the state schema: {body}")
            if doc.get("digest") != self._digest(body):
                raise Refused(f"{path.name} fails its integrity check (forged?)")
        return durable, body.get("seq", 0)

    def view(self, thread: str) -> StateView:
        doc = self.read_raw(self.path(thread, "head.json"))
        if doc is None:
            return StateView.of(self.workflow, (), (), None)
        body = doc["body"]
        answers = {(int(t) if str(t).isdigit() else t): v for t, v in body["answers"].items()}
        return StateView.of(self.workflow, body["done"], answers, body["pending"])

    # -- locks and claims ---------------------------------------------------------------------
    def lock(self, thread: str, *, break_stale: bool) -> None:
        path = self.path(thread, "lock")
        if path.exists() and not break_stale:
            raise Refused(f"{path.name} is held by a process that died (pid {path.read_text()})")
        atomic_write_text(path, str(os.getpid()))

    def unlock(self, thread: str) -> None:
        self.path(thread, "lock").unlink(missing_ok=True)

    def claim(self, thread: str, interrupt_seq: int) -> Path:
        """Take the interrupt raised by write ``interrupt_seq``, once; a claim left by a process
        that died, or by this one, is taken over (that consume never finished).

        The claim file appears whole or not at all (``link`` of a file already holding our pid
        fails if the name exists): a reader never sees an empty claim."""
        path = self.path(thread, f"claim-{interrupt_seq}")
        mine = self.path(thread, f"claim-{interrupt_seq}.{os.getpid()}")
        atomic_write_text(mine, str(os.getpid()))
        try:
            os.link(mine, path)
        except FileExistsError:
            holder = path.read_text()
            if holder == "done" or (int(holder) != os.getpid() and _alive(int(holder))):
                raise Refused(f"interrupt {interrupt_seq} already consumed ({holder})") from None
            os.replace(mine, path)  # the holder died mid-consume: take it over
            return path
        finally:
            mine.unlink(missing_ok=True)
        return path

    def settle(self, claim: Path) -> None:
        """The consume finished (the gate committed): the claim can never be taken over."""
        atomic_write_text(claim, "done")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
