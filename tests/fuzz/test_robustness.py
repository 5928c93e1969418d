"""Bad input, hostile corpus files and unwritable outputs: a one-line error, exit 2, nothing lost.

(Signals, orphans and temp folders: test_lifetime.py.)
"""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.files import atomic_write_text
from adapters.reference import ReferenceAdapter
from fuzz import campaign, corpus
from fuzz.campaign import CampaignOptions, example_shares, run_campaign
from fuzz.cli import main
from fuzz.runner import Session, Settings
from fuzz.targets import prepare, resolve
from fuzz.trace import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
READ_ONLY = "/sys/resumefuzz-out"  # read-only even for root (tests may run as root)


@pytest.mark.parametrize("args, message", [
    (["fuzz", "reference", "--op-timeout", "0"], "--op-timeout must be a positive"),
    (["fuzz", "reference", "--op-timeout", "-1"], "--op-timeout must be a positive"),
    (["fuzz", "reference", "--op-timeout", "nan"], "--op-timeout must be a positive"),
    (["fuzz", "reference", "--max-time", "nan"], "--max-time must be a positive"),
    (["fuzz", "reference", "--max-time", "inf"], "--max-time must be a positive"),
    (["fuzz", "reference", "--max-time", "-5"], "--max-time must be a positive"),
    (["fuzz", "reference", "--max-examples", "-3"], "--max-examples must be a positive"),
    (["fuzz", "reference", "--seed", "-1"], "--seed must lie in"),
    (["fuzz", "reference", "--corpus", READ_ONLY], "--corpus /sys/resumefuzz-out: /sys is not"),
    (["fuzz", "reference", "--reports", "afile/reports"], "afile is not a folder"),
    (["fuzz", "reference", "--results", "afile"], "afile is not a folder"),
    (["replay", "--op-timeout", "-1", "corpus"], "--op-timeout must be a positive"),
    (["replay", "--trials", "0", "corpus"], "--trials must be a positive"),
    (["replay", "--trials", "3", "--mark-timing", "--collect-garbage", "corpus"],
     "--collect-garbage with --mark-timing"),
    (["replay", "--update", "--collect-garbage", "corpus"], "--collect-garbage with --update"),
    (["replay", "--relabel", "--collect-garbage", "corpus"], "--collect-garbage with --relabel"),
    (["replay", "no/such/entry.json"], "no such file or folder: no/such/entry.json"),
    (["nightly", "--jobs", "0"], "--jobs must be a positive"),
    (["nightly", "--total", "nan"], "--total must be a positive"),
    (["nightly", "--per-campaign", "-1"], "--per-campaign must be a positive"),
    (["nightly", "--max-examples", "0"], "--max-examples must be a positive"),
    (["nightly", "--op-timeout", "0"], "--op-timeout must be a positive"),
    (["nightly", "--corpus", "afile"], "afile is not a folder"),
])
def test_bad_options_and_outputs_are_one_line_exit_2_before_any_work(in_tmp, capsys, args,
                                                                     message):
    (in_tmp / "afile").write_text("x")
    (in_tmp / "corpus").mkdir()
    before = sorted(p.name for p in in_tmp.rglob("*"))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in in_tmp.rglob("*")) == before  # nothing written


def test_max_examples_is_split_exactly_and_the_examples_run_are_capped(tmp_path, monkeypatch):
    assert example_shares(7, 3) == [3, 2, 2] and sum(example_shares(100, 7)) == 100
    # A cap of 12 examples run, so that shrinking the Replay it finds is cut short by it.
    monkeypatch.setattr(campaign, "example_cap", lambda generated: 12)
    adapter = prepare(resolve("mutant:Replay"))
    options = CampaignOptions(max_examples=40, seed=3, profile="ci", corpus_dir=tmp_path / "c",
                              reports_dir=tmp_path / "r", workdir=tmp_path / "w")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    assert result.examples == 12 and result.stopped == "example budget"
    (found,) = result.findings
    assert found.category == "Replay" and "shrink cut short (example budget)" in found.note
    entry = json.loads(Path(found.corpus).read_text())
    assert entry["finding"]["detail"].startswith("shrink cut short (example budget)")


# -- corpus files are inert ---------------------------------------------------------------------


def _entry(target: str, **extra) -> dict:
    return {"format": "resumefuzz-trace", "version": 1,
            "workflow": {"n": 1, "gates": [1], "values": ["a", "b"]},
            "target": target, "variant": "default",
            "operations": [{"op": "start", "thread": "t0"}], **extra}


def _replay(tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'docs' / 'examples'}"}
    return subprocess.run([sys.executable, "-m", "fuzz", "replay", "--json", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("target", ["os:getpid", "this:x", "toy_adapter:ToyAdapter"])
def test_a_corpus_file_never_names_code_to_import(tmp_path, target):
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(_entry(target)))
    proc = _replay(tmp_path, str(path))
    assert proc.returncode == 1, proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "ERROR" and "not a registered target" in result["detail"]
    assert "Beautiful is better" not in proc.stdout + proc.stderr  # `import this` never ran


def test_a_dotted_target_runs_when_the_user_names_it(tmp_path):
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(_entry("toy_adapter:ToyAdapter")))
    proc = _replay(tmp_path, "--target", "toy_adapter:ToyAdapter", str(path))
    (result,) = json.loads(proc.stdout)
    assert result["status"] != "ERROR", result


@pytest.mark.parametrize("build, message", [
    (lambda p: os.truncate(p, 50 * 2**20), f"more than a trace file may hold ({MAX_FILE_BYTES})"),
    (lambda p: p.write_text(json.dumps(_entry("reference", operations=[
        {"op": "query", "thread": "t0"}] * 50_000))), "field operations: 50000 items, at most 64"),
])
def test_oversized_corpus_files_are_refused_before_any_per_item_work(in_tmp, capsys, build,
                                                                    message):
    path = in_tmp / "corpus" / "big.json"
    path.parent.mkdir()
    path.touch()
    build(path)
    started = time.monotonic()
    assert main(["replay", "--json", str(path)]) == 2  # refused up front, as any bad entry
    elapsed = time.monotonic() - started
    assert message in capsys.readouterr().err
    assert elapsed < 10, elapsed  # validating 50 000 items took minutes


# -- outputs --------------------------------------------------------------------------------------


def test_a_finding_that_cannot_be_written_is_printed_and_exits_2(in_tmp, capsys, monkeypatch):
    def refuse(trace, root):
        raise PermissionError(13, "Permission denied", str(root))

    monkeypatch.setattr(corpus, "save", refuse)
    code = main(["fuzz", "mutant:Replay", "--max-examples", "60", "--seed", "3", "--no-shrink"])
    err = capsys.readouterr().err
    assert code == 2
    assert '"format": "resumefuzz-trace"' in err and '"category": "Replay"' in err
    assert "could not write the Replay finding" in err


def test_outputs_are_written_with_the_usual_file_mode(tmp_path):
    path = tmp_path / "x.json"
    atomic_write_text(path, "{}")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_session_removes_its_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    adapter = ReferenceAdapter()
    with Session(adapter, adapter.variants()[0], settings=Settings()) as session:
        assert session.root.parent == tmp_path and session.root.exists()
    assert list(tmp_path.iterdir()) == []


def _wal_after_a_copy(tmp_path, copy) -> tuple:
    """An open WAL connection here; ``copy`` copies the database, its -wal and -shm; another
    process then opens and closes the database; this connection commits one row more.  Returns
    whether the -wal survived the other process's close, and the rows a new process sees."""
    import sqlite3

    db = tmp_path / "s.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    dest = tmp_path / "copy"
    dest.mkdir()
    copy([db, Path(f"{db}-wal"), Path(f"{db}-shm")], dest)
    read = (f"import sqlite3; print(sqlite3.connect({str(db)!r})"
            ".execute('SELECT count(*) FROM t').fetchone()[0])")
    subprocess.run([sys.executable, "-c", read], check=True, capture_output=True)
    survived = Path(f"{db}-wal").exists()
    conn.execute("INSERT INTO t VALUES (2)")
    conn.commit()
    seen = subprocess.run([sys.executable, "-c", read], check=True, capture_output=True,
                          text=True).stdout.strip()
    conn.close()
    return survived, seen


def test_a_store_copy_keeps_this_processs_sqlite_locks(tmp_path):
    """A twin recovery copies the store while the case's connection is open.  Copied here, the
    closes drop that connection's POSIX locks: another process's connection then takes itself
    for the last, checkpoints and deletes the WAL, and the row committed after it is seen by no
    other process (a checkpoint lost in a campaign: a race and a SIGKILL after a twin recovery,
    2026-12-05).  ``copy_apart`` copies in a child, whose closes drop only its own locks."""
    import shutil

    from adapters.files import copy_apart

    def in_process(files, dest):
        for src in files:
            shutil.copyfile(src, dest / src.name)

    (tmp_path / "here").mkdir()
    (tmp_path / "apart").mkdir()
    assert _wal_after_a_copy(tmp_path / "here", in_process) == (False, "1")  # the hazard
    assert _wal_after_a_copy(tmp_path / "apart", copy_apart) == (True, "2")
