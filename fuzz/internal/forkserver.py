"""A session's fork server: the one process its workers are forked from (opt-in,
``Settings(fork_server=True)``, where the variant reuses workers: ``Policy.serves_forks``).

Why: a fork marks every writable page of the forking process copy-on-write, and the forking
process then pays a page fault and a page copy for each of them it writes afterwards.  The
parent writes to most of its working set between two forks (Hypothesis's engine, the oracle,
every object whose reference count it touches), so a worker forked from it cost the parent
about 8 ms of page faults, on its own critical path: 40 % of the parent's CPU in a campaign on
the reference target (``perf``, benchmarks/history/round-24.md).  The fork server is
forked from the parent once, when the session first needs a worker, and does nothing but fork
and wait: its pages stay as they were, shared with the workers, and the parent copies each of
its own pages at most once.  A worker forked from it is the same process it would have been
forked from the parent then (the framework imported, the adapter and variant prepared): the
session's objects never change after it starts (``Session``: one adapter, one variant; each
case's own things come in messages).

The protocol, over a ``SOCK_SEQPACKET`` socket pair: the parent sends a pickled ``(kind,
args)`` with the descriptors the child needs (a worker's end of its pipe); the server forks,
closes its copies, and answers the child's pid with a pidfd of it (``os.pidfd_open``), through
which the parent waits for it and signals it (``Forked``): a grandchild cannot be waited for
with ``waitpid``, and a pid alone could be reused once the server has reaped it.  A pidfd is
readable once the process has exited, its files closed and its locks released (the runner's
wait for a killed worker relies on that: its SQLite locks must be gone).

Lifetime: the server dies with the parent (the parent-death signal, and the lifeline pipe in
its loop, ``fuzz.internal.lifetime``); its children die with it and with the parent (their own
parent-death signal names the server; their lifeline is the parent's).  It reaps a child once
the parent has released it (``Forked.close``: until then the zombie holds the exit status the
runner reads); ``close``, or an end of file on its socket, ends it.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import selectors
import signal
import socket
import struct
from pathlib import Path

from multiprocess import connection, get_context

from . import lifetime

_MAX_FDS = 4
_ANSWER_WITHIN = 30.0  # seconds
_PID = struct.Struct("<q")


class ForkServer:
    """The parent's end: ``start(kind, fds, args)`` forks a child of the server's and returns
    its ``Forked``; ``close()`` ends the server.  ``OSError`` from ``start``: the server is gone
    (the caller makes another, or gives up as on a failed fork)."""

    def __init__(self, targets: dict, child):
        """``targets``: kind -> ``(function, objects)``: a child of kind ``kind`` runs
        ``child(server_pid, lifeline_read, call)``, where ``call()`` is ``function(*fds as
        connections, *objects, *args)`` (``child``: ``fuzz.transport.child_main``, which makes it
        die with its parent and the fuzzer).  Forks the server now."""
        self._done: list[int] = []  # children released (``Forked.close``), not reaped yet
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # A fork takes the server a millisecond; a server that does not answer in this long
        # is wedged, and the fork fails as a fork can (``OSError``).
        self.sock.settimeout(_ANSWER_WITHIN)
        try:
            self.process = get_context("fork").Process(
                target=_server_main, args=(os.getpid(), lifetime.lifeline()[0], theirs,
                                           self.sock.fileno(), targets, child), daemon=True)
            self.process.start()
        finally:
            theirs.close()
        self.pid = self.process.pid
        self.closed = False

    def start(self, kind: str, fds: tuple, args: tuple) -> Forked:
        # With the request go the children the parent is done with, for the server to reap:
        # until then each stays a zombie, whose exit status ``Forked.exitcode`` reads.
        reap, self._done[:] = tuple(self._done), []
        socket.send_fds(self.sock, [pickle.dumps((kind, args, reap))], list(fds))
        data, got, _, _ = socket.recv_fds(self.sock, _PID.size, 1)
        if len(data) != _PID.size or len(got) != 1:
            for fd in got:
                os.close(fd)
            raise OSError(f"the fork server did not fork ({data!r})")
        return Forked(_PID.unpack(data)[0], got[0], self._done)

    def alive(self) -> bool:
        return not self.closed and self.process.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """End the server (its children live on: the session's own ``close`` ends those)."""
        if self.closed:
            return
        self.closed = True
        try:
            # Asked, not left to an end of file: a fork server of another session, forked
            # while this one ran, holds a copy of this end.
            self.sock.send(pickle.dumps(None))
        except OSError:
            pass
        self.sock.close()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        if self.process.exitcode is not None:
            self.process.close()


class Forked:
    """What the runner uses of a ``multiprocess.Process``, for a child of the fork server:
    ``pid``, ``sentinel`` (the pidfd: readable once the process has exited), ``is_alive``,
    ``join``, ``exitcode``, ``kill``, ``signal``, ``close``.  The server reaps the child only
    once it is closed here, so that ``exitcode`` can read its exit status from its zombie
    (``/proc/<pid>/stat``): ``None`` while it runs, as ``multiprocess`` gives it after
    (``-N``: killed by signal N)."""

    def __init__(self, pid: int, pidfd: int, done: list | None = None):
        self.pid, self.sentinel = pid, pidfd
        self._done = done  # the server's list of children to reap
        self._ended = False
        self._code: int | None = None
        self._poll = select.poll()  # no FD_SETSIZE limit, unlike select.select
        self._poll.register(pidfd, select.POLLIN)

    def _wait(self, timeout: float | None) -> bool:
        if not self._ended:
            wait = None if timeout is None else max(0, int(timeout * 1000))
            self._ended = bool(self._poll.poll(wait))
        return self._ended

    def is_alive(self) -> bool:
        return not self._wait(0)

    def join(self, timeout: float | None = None) -> None:
        self._wait(timeout)

    @property
    def exitcode(self) -> int | None:
        if self._code is None and self.sentinel is not None and self._wait(0):
            self._code = _zombie_exitcode(self.pid)
        return self._code

    def signal(self, signum: int) -> None:
        if self._ended:
            raise ProcessLookupError(self.pid)
        signal.pidfd_send_signal(self.sentinel, signum)

    def kill(self) -> None:
        try:
            self.signal(signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Release the pidfd (the child has ended: ``ValueError`` otherwise, as
        ``multiprocess``'s ``close``); the server then reaps it."""
        if self.sentinel is None:
            return
        if self.exitcode is None:
            raise ValueError(f"process {self.pid} is still running")
        os.close(self.sentinel)
        self.sentinel = None
        if self._done is not None:
            self._done.append(self.pid)


def _zombie_exitcode(pid: int) -> int:
    """The exit status of an ended child of the server's, from its zombie's ``stat`` (field
    52, ``exit_code``, since Linux 3.5), as ``multiprocess`` reports one (``-N``: signal N).
    The zombie stays until the parent releases it (``Forked.close``); if it is gone anyway (the
    server died, and init reaped its children), 1: ended, status unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 1
    fields = stat[stat.rindex(")") + 2:].split()  # from field 3, the state, on
    if len(fields) < 50 or fields[0] != "Z":
        return 1
    return os.waitstatus_to_exitcode(int(fields[49]))


def _server_main(parent_pid: int, lifeline_read: int, sock: socket.socket, theirs: int,
                 targets: dict, child) -> None:
    """The server's loop: fork a child for each request until the socket's end of file, or
    the parent's death (its lifeline, watched here: the server forks with no other thread)."""
    # Nothing here allocates much, and a collection would walk (and write) every page the
    # children share: the server never collects.
    gc.freeze()
    gc.disable()
    lifetime.become_child(parent_pid, lifeline_read, watch=False)
    os.close(theirs)  # the parent's end, inherited
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    if lifeline_read is not None:
        sel.register(lifeline_read, selectors.EVENT_READ)
    unreaped: set = set()  # children the parent released that had not ended when asked
    while True:
        events = sel.select()
        if lifeline_read is not None and any(k.fd == lifeline_read for k, _ in events):
            os._exit(0)  # the parent is gone (the lifeline's only write end was its)
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, _MAX_FDS)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the session closed its end
        request = pickle.loads(msg)
        if request is None:  # ``close``
            os._exit(0)
        kind, args, done = request
        unreaped = _reap(unreaped | set(done))
        function, objects = targets[kind]
        pid = _fork_child(sock, child, lifeline_read, function, fds, objects, args)
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)  # not reaped yet (only this loop reaps): still its pid
            socket.send_fds(sock, [_PID.pack(pid)], [pidfd])
            os.close(pidfd)
        except OSError:
            os._exit(0)


def _fork_child(sock, child, lifeline_read, function, fds, objects, args) -> int:
    server = os.getpid()
    process = get_context("fork").Process(
        target=child, args=(server, lifeline_read, _bind, function, fds, objects, args),
        daemon=True)
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        sock.close()
        gc.enable()
        # What ``multiprocess``'s own fork does in the child (popen_fork.Popen._launch): the
        # same bootstrap (the process object, stdin, the after-fork hooks, the exit code).
        code = process._bootstrap(parent_sentinel=None)
    finally:
        os._exit(code)


def _bind(function, fds, objects, args):
    """In the child: the descriptors as ``multiprocess`` connections, then the call."""
    return function(*(connection.Connection(fd) for fd in fds), *objects, *args)


def _reap(pids: set) -> set:
    """Reap these children (released by the parent); returns those not ended yet."""
    left = set()
    for pid in pids:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                left.add(pid)
        except ChildProcessError:
            pass
    return left
