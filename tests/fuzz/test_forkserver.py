"""The fork server (``fuzz.internal.forkserver``): workers are forked from it, never from the
parent once it runs; their exit statuses, kills and deaths are what a direct child's would be."""

import os
import signal
from pathlib import Path

import pytest

from adapters.reference import ReferenceAdapter
from fuzz.internal.forkserver import ForkServer
from fuzz.runner import Session, Settings
from fuzz.testing import run_cases
from fuzz.transport import child_main
from refmodel import CrashAt, Race, Recover, Resume, Start, TwinRecover, Workflow

WF = Workflow(3, {2}, ("a", "b"))
# A case that forks every kind of worker: a spare for the sigkill, two racers, a twin.
OPS = (Start("t0", crash=CrashAt(1, "before_effect", "sigkill")), Recover("t0"),
       Race("t0", values=("a", "b")), TwinRecover("t0"), Resume("t0", value="a"))


def _settled(seen):
    """The outcomes: which racer wins, and so what follows, is the race's to decide."""
    return [[o.outcome for o in case] for case in seen]


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


@pytest.mark.parametrize("server", [True, False])
def test_once_the_fork_server_runs_the_parent_forks_no_worker(tmp_path, monkeypatch, server):
    """The parent's own copy-on-write faults after each fork are what the server saves: after
    the first case (which starts it), a case that forks a spare, racers and a twin calls no
    ``fork`` in the parent, and its workers are the server's children.  Without the server
    (``Settings(fork_server=False)``), the parent forks each.  The observations are the same."""
    adapter = ReferenceAdapter()
    seen = {}
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(fork_server=server)) as session:
        first, seen["first"] = run_cases(session, WF, OPS, 1)
        forks = []
        real_fork = os.fork

        def fork():
            forks.append(1)
            return real_fork()

        monkeypatch.setattr(os, "fork", fork)
        pids, seen["second"] = run_cases(session, WF, OPS, 1)
        runner = session.case(WF)
        runner.apply(Start("t0"))
        parent = _ppid(runner.worker.pid)
        grandparent = _ppid(parent)
        runner.close()
        monkeypatch.setattr(os, "fork", real_fork)
    assert _settled(seen["first"]) == _settled(seen["second"])
    assert [o.outcome for o in seen["second"][0]][:2] == ["crashed", "interrupted"]
    if server:
        assert forks == [] and parent != os.getpid()
        assert grandparent == os.getpid()  # the server is the parent's child
    else:
        # A spare and a twin (the racers are the first case's, reused: ``test_runner.py``).
        assert len(forks) >= 2 and parent == os.getpid()


def _exit_with(code):
    os._exit(code)


def _sleep():
    signal.pause()


def test_a_child_of_the_server_reports_its_exit_status_and_is_reaped_once_released(tmp_path):
    server = ForkServer({"exit": (_exit_with, ()), "sleep": (_sleep, ())}, child_main)
    try:
        exited = server.start("exit", (), (3,))
        exited.join(30)
        assert not exited.is_alive() and exited.exitcode == 3
        killed = server.start("sleep", (), ())
        assert killed.is_alive() and killed.exitcode is None
        with pytest.raises(ValueError):
            killed.close()  # still running
        killed.kill()
        killed.join(30)
        assert killed.exitcode == -signal.SIGKILL
        assert _ppid(exited.pid) == server.process.pid  # a zombie until released
        exited.close()
        killed.close()
        server.start("exit", (), (0,)).join(30)  # the next request reaps what was released
        assert not Path(f"/proc/{exited.pid}").exists() or _ppid(exited.pid) != server.process.pid
        with pytest.raises(ProcessLookupError):
            killed.signal(signal.SIGKILL)  # never another process that reused its pid
    finally:
        server.close()
    assert not server.alive() and not Path(f"/proc/{server.pid}").exists()


def test_a_dead_fork_server_is_replaced(tmp_path):
    adapter = ReferenceAdapter()
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(fork_server=True)) as session:
        _, before = run_cases(session, WF, OPS, 1)
        old = session.transport.servers[0]
        os.kill(old.pid, signal.SIGKILL)
        old.process.join(30)
        for worker in list(session.pool.spares):  # its children died with it
            worker.process.join(30)
        _, after = run_cases(session, WF, OPS, 1)
        assert session.transport.servers[0] is not old and session.transport.servers[0].alive()
    assert _settled(before) == _settled(after)


def test_the_servers_socket_and_pipes_are_not_left_open(tmp_path):
    """The session's close ends its server; the parent keeps no descriptor of it."""
    adapter = ReferenceAdapter()
    before = set(os.listdir("/proc/self/fd"))
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(fork_server=True)) as session:
        run_cases(session, WF, OPS, 2)
        server = session.transport.servers[0]
    assert not server.alive() and not Path(f"/proc/{server.pid}").exists()
    assert server.sock.fileno() == -1
    left = set(os.listdir("/proc/self/fd")) - before
    assert not [fd for fd in left if Path(f"/proc/self/fd/{fd}").exists()], left



class _NoReuse(ReferenceAdapter):
    def tuning(self, variant):
        from dataclasses import replace

        return replace(super().tuning(variant), reuse_worker=False)


def test_a_variant_that_does_not_reuse_workers_forks_them_from_the_parent(tmp_path):
    """``Policy.serves_forks``: the fork server only where workers are reused (where it was
    measured); elsewhere each worker is the parent's own child, as before it."""
    adapter = _NoReuse()
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(fork_server=True)) as session:
        runner = session.case(WF)
        runner.apply(Start("t0"))
        parent = _ppid(runner.worker.pid)
        runner.close()
        assert not session.policy.serves_forks and session.transport.servers == []
    assert parent == os.getpid()
