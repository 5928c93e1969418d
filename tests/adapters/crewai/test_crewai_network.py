"""CrewAI phones home unless told not to: with the adapter's environment it must not try.

A fresh interpreter patches the socket layer *before* importing anything (``socket.socket.connect``
/ ``connect_ex``, ``socket.create_connection`` and ``socket.getaddrinfo`` for non-local names), so
that every non-loopback attempt is refused and recorded; then it prepares the adapter (which
imports CrewAI), runs flows through two variants (``@persist`` pause/resume/recover/fork, and
checkpoints with a ``from_checkpoint`` restore), and prints what was recorded.  A positive control
checks that the guard does record an attempt.
"""

from __future__ import annotations

import json
import os
import subprocess

from crewai_test_support import HERE, PYTHON, require_crewai

require_crewai()

ROOT = HERE.parents[2]

SCRIPT = r'''
import ipaddress, json, os, socket, sys
attempts = []

def local(host):
    if host in (None, "", "localhost", b"localhost"):
        return True
    host = host.decode() if isinstance(host, bytes) else str(host)
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host.endswith(".localhost")
    return address.is_loopback or address.is_unspecified

def refuse(kind, target):
    attempts.append([kind, repr(target)])
    raise ConnectionRefusedError(f"test guard: refused {kind} to {target!r}")

_connect, _connect_ex, _create, _gai = (socket.socket.connect, socket.socket.connect_ex,
                                        socket.create_connection, socket.getaddrinfo)

def connect(self, address):
    if isinstance(address, tuple) and not local(address[0]):
        refuse("connect", address)
    return _connect(self, address)

def connect_ex(self, address):
    if isinstance(address, tuple) and not local(address[0]):
        refuse("connect_ex", address)
    return _connect_ex(self, address)

def create_connection(address, *args, **kwargs):
    if not local(address[0]):
        refuse("create_connection", address)
    return _create(address, *args, **kwargs)

def getaddrinfo(host, *args, **kwargs):
    if not local(host):
        refuse("getaddrinfo", host)
    return _gai(host, *args, **kwargs)

socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
socket.create_connection, socket.getaddrinfo = create_connection, getaddrinfo

sys.path.insert(0, sys.argv[1])
import sqlite3, tempfile
from pathlib import Path
from adapters.crewai import CrewAIAdapter
from adapters.protocol import Fork, Recover, Resume, Start, Workflow
from fuzz.internal.hooks import EngineHooks
from fuzz.internal.ledger import Ledger
import sqlite_utils

adapter = CrewAIAdapter()
os.environ.update(adapter.environment())
adapter.prepare()  # imports crewai
home = os.environ["HOME"]
stdout = sys.stdout
report = {"crewai_imported": "crewai" in sys.modules}
for name in ("persist-sqlite", "checkpoint-json-from_checkpoint"):
    variant = next(v for v in adapter.variants() if v.name == name)
    work = Path(tempfile.mkdtemp(prefix="netcheck-"))
    ledger = Ledger(work / "ledger.sqlite")
    (work / "case").mkdir()
    case = adapter.open(variant, Workflow(3, {2}), work / "case")
    ops = [Start("t0"), Resume("t0", value="a"), Fork("t0", gate=2, value="b", new_thread="f1"),
           Recover("t0")]
    outcomes = []
    for i, op in enumerate(ops, 1):
        hooks = EngineHooks(op, seq=i, branch=getattr(op, "new_thread", "") or op.thread, ledger=ledger)
        try:
            outcomes.append(case.run(op, hooks))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a pydantic-core PanicException is a BaseException
            outcomes.append(type(exc).__name__)
    report[name] = outcomes
report["attempts"] = list(attempts)
report["home_is_sandbox"] = "resumefuzz-crewai-" in home
try:  # positive control: the guard refuses and records
    socket.create_connection(("example.invalid", 80), timeout=1)
except OSError:
    pass
report["control"] = attempts[len(report["attempts"]):]
print(json.dumps(report), file=stdout)
stdout.flush()
'''


def test_no_outbound_connection_attempt_on_import_and_flows(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CREWAI_", "OTEL_"))}
    done = subprocess.run(
        [PYTHON, "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, timeout=600,
        env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["crewai_imported"]
    for name in ("persist-sqlite", "checkpoint-json-from_checkpoint"):  # the flows really ran
        assert report[name][0] in ("interrupted", "PanicException"), report[name]
    assert report["attempts"] == []
    assert report["home_is_sandbox"]
    assert report["control"] and report["control"][0][0] == "create_connection"


def test_adapter_import_does_not_import_crewai():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import adapters.crewai; "
        "print(any(m == 'crewai' or m.startswith('crewai.') for m in sys.modules))"
    )
    done = subprocess.run([PYTHON, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_environment_turns_every_switch_off_and_sandboxes_the_home():
    from adapters.crewai import CrewAIAdapter, sandbox

    env = CrewAIAdapter().environment()
    for key, value in sandbox.SWITCHES.items():
        assert env[key] == value
    root = os.path.commonpath([env[k] for k in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "TMPDIR")])
    assert "resumefuzz-crewai-" in root and not os.path.expanduser("~").startswith(root)
