"""The reference target's store: one directory of JSON files, written atomically.

Per thread: ``<t>.head.json`` holds the latest checkpoint (durable state, a write counter and an
integrity digest), ``<t>.bak.json`` a copy of it, ``<t>.cp<g>.json`` the checkpoint at which gate
``g`` was pending, ``<t>.lock`` exists while an operation runs, ``<t>.claim-<n>`` records who
consumed the interrupt raised by write ``n`` (changed only under an ``flock`` of ``<t>.claims``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path

from adapters import protocol
from adapters.protocol import Durable, StateView, Unreadable, Workflow
from refmodel.workflow import sorted_pairs
from adapters.files import atomic_write_text


def write_file(path: Path, text: str) -> None:
    """Every file of this store, written atomically without an ``fsync``.  What the fuzzer
    injects is a process's death, never the machine's: the renamed file is in the page cache
    the next process reads, so a crash point sees the old file or the new one with or without
    the ``fsync``, which only waited for a journal commit (three or four a checkpoint): without
    it the reference set runs 1.06x the operations a second with one job and 1.13x with two
    (``nightly --jobs 2``; benchmarks/history/round-23.md)."""
    atomic_write_text(path, text, sync=False)


class Refused(protocol.Refused):
    """The reference refuses loudly (tampered store, nothing to do, interrupt already taken).

    The reference is a mock *framework*: its refusals are the framework's refusals.  Raised from
    adapter code (this package), an exception would count as a harness error (see
    ``adapters/protocol.py``, "Who raised it"); deriving from ``protocol.Refused`` is how the
    reference says "this is the framework saying no", wherever in the package it is raised."""


class Store:
    def __init__(self, workdir: Path, workflow: Workflow, *, unchecked: tuple = ()):
        self.dir = Path(workdir)
        self.workflow = workflow
        self.unchecked = tuple(unchecked)  # body fields the digest leaves out (a mutant's switch)
        key = self.dir / "secret"
        if not key.exists():
            write_file(key, secrets.token_hex(16))
        self.secret = key.read_text()

    # -- checkpoints --------------------------------------------------------------------------
    def path(self, thread: str, suffix: str) -> Path:
        return self.dir / f"{thread}.{suffix}"

    def _digest(self, body: dict) -> str:
        text = json.dumps({k: v for k, v in body.items() if k not in self.unchecked}, sort_keys=True)
        return hashlib.sha256((self.secret + text).encode()).hexdigest()

    def write(self, thread: str, durable: Durable, seq: int) -> None:
        body = {"done": list(durable.done), "answers": {str(t): v for t, v in durable.answers},
                "pending": durable.pending, "seq": seq}
        text = json.dumps({"body": body, "digest": self._digest(body)}, sort_keys=True)
        write_file(self.path(thread, "head.json"), text)
        write_file(self.path(thread, "bak.json"), text)
        # A shape's pending record is its tuple of question ids, each with a checkpoint file.
        pending = durable.pending
        gates = pending if isinstance(pending, tuple) else () if pending is None else (pending,)
        for gate in gates:
            write_file(self.path(thread, f"cp{gate}.json"), text)

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
        pending = body["pending"]
        durable = Durable(tuple(body["done"]),
                          sorted_pairs((_key(t), v) for t, v in body["answers"].items()),
                          tuple(pending) if isinstance(pending, list) else pending)
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
        write_file(path, str(os.getpid()))

    def unlock(self, thread: str) -> None:
        self.path(thread, "lock").unlink(missing_ok=True)

    @contextmanager
    def _claims_locked(self, thread: str):
        """Hold the thread's claim lock (``flock`` on ``<t>.claims``): every change to a claim
        file happens under it, so a check of the holder and the takeover that follows are one
        step no other racer can interleave with.  The kernel drops the lock when its holder
        dies, so a SIGKILL inside can never leave it held."""
        fd = os.open(self.path(thread, "claims"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def claim(self, thread: str, interrupt_seq: int) -> Path:
        """Take the interrupt raised by write ``interrupt_seq``, once; a claim left by a process
        that died, or by this one, is taken over (that consume never finished).

        Exclusive: the read of the holder, the liveness check and the takeover happen under the
        claim lock, so of k racers that find a dead holder exactly one takes over; the others
        then find a live holder and are refused.  (Before: a check-then-replace that two racers
        could both win, a LostUpdate of the reference itself.)  The holder is recorded with its
        process start time, so a recycled pid is not mistaken for the holder."""
        path = self.path(thread, f"claim-{interrupt_seq}")
        me = _identity(os.getpid())
        with self._claims_locked(thread):
            try:
                holder = path.read_text()
            except FileNotFoundError:
                holder = None
            if holder is not None and holder != me and (holder == "done" or _holds(holder)):
                raise Refused(f"interrupt {interrupt_seq} already consumed ({holder})")
            write_file(path, me)  # new, or taken over from a holder that died
        return path

    def release(self, claim: Path) -> None:
        """The consume failed: the interrupt is open again."""
        with self._claims_locked(claim.name.rsplit(".claim-", 1)[0]):
            claim.unlink(missing_ok=True)

    def settle(self, claim: Path) -> None:
        """The consume finished (the gate committed): the claim can never be taken over."""
        with self._claims_locked(claim.name.rsplit(".claim-", 1)[0]):
            write_file(claim, "done")


def _key(key: str):
    """An answer's key as the run wrote it: a chain's task number, a shape's question id."""
    return int(key) if key.lstrip("-").isdigit() else key


def _identity(pid: int) -> str:
    """``"<pid> <start time>"``: a process, not just a (reusable) pid."""
    return f"{pid} {_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1].split()[19]
    except (FileNotFoundError, IndexError):
        return "?"


def _holds(holder: str) -> bool:
    """Is the process recorded in a claim still alive (the same process, not a recycled pid)?"""
    pid, _, started = holder.partition(" ")
    return _alive(int(pid)) and _start_time(int(pid)) == started


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
