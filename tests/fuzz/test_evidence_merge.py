"""``resumefuzz merge-evidence``: a scratch campaign's evidence added to ``results/`` once."""

from __future__ import annotations

import json
import shutil

import pytest

from fuzz import evidence
from fuzz.campaign import VariantResult
from fuzz.cli import main
from fuzz.targets import prepare, resolve
from refmodel import Start

REFERENCE = prepare(resolve("reference"))
(VARIANT,) = REFERENCE.variants()


def campaign(root, starts):
    """One campaign of ``starts`` examples recorded into the evidence directory ``root``."""
    result = VariantResult(VARIANT.name, examples=starts, operations=starts)
    for _ in range(starts):
        result.exercised.op(op=Start("t0"))
    return evidence.record(REFERENCE, VARIANT, result, root)


def doc(root):
    return evidence.load(evidence.path_for("reference", VARIANT.name, root))


def test_a_scratch_campaign_is_added_once(tmp_path, capsys):
    results, scratch = tmp_path / "results", tmp_path / "scratch"
    campaign(results, 3)
    campaign(scratch, 4)
    campaign(scratch, 5)
    assert main(["merge-evidence", str(scratch), "--into", str(results)]) == 0
    merged = doc(results)
    assert merged["campaigns"] == 3 and merged["total_examples"] == 12
    assert merged["exercised"]["PC"] == {"start": 12}
    assert merged["latest"]["examples"] == 5  # the newer file's last campaign
    assert len(set(merged["campaign_ids"])) == 3
    assert "added, 2 campaign(s)" in capsys.readouterr().out
    # Again: the campaigns are there already, nothing is counted twice.
    assert main(["merge-evidence", str(scratch), "--into", str(results)]) == 0
    assert doc(results) == merged
    assert "already there" in capsys.readouterr().out


def test_a_copy_that_campaigns_added_to_replaces_its_original(tmp_path):
    """A worktree of the repository carries results/ as committed; its campaigns write on top.
    Summing would count the committed campaigns twice: the copy holds them all, and replaces."""
    results, worktree = tmp_path / "results", tmp_path / "worktree"
    campaign(results, 3)
    shutil.copytree(results, worktree)
    campaign(worktree, 4)
    assert main(["merge-evidence", str(worktree), "--into", str(results)]) == 0
    assert doc(results) == doc(worktree)
    assert doc(results)["total_examples"] == 7 and doc(results)["campaigns"] == 2


def test_a_file_from_before_campaign_ids_is_recognized_in_its_copies(tmp_path):
    results, worktree = tmp_path / "results", tmp_path / "worktree"
    path = campaign(results, 3)
    old = json.loads(path.read_text())
    del old["campaign_ids"]  # as every file written before ids were recorded
    path.write_text(json.dumps(old))
    shutil.copytree(results, worktree)
    campaign(worktree, 4)  # the copy's first id stands for the campaigns it had before
    assert main(["merge-evidence", str(worktree), "--into", str(results)]) == 0
    assert doc(results)["total_examples"] == 7


def test_files_sharing_some_campaigns_are_refused_and_nothing_is_written(tmp_path, capsys):
    results, a, b = tmp_path / "results", tmp_path / "a", tmp_path / "b"
    campaign(a, 3)
    shutil.copytree(a, b)
    campaign(a, 4)
    campaign(b, 5)  # a and b share the first campaign and each has one of its own
    shutil.copytree(a, results)
    before = evidence.path_for("reference", VARIANT.name, results).read_bytes()
    assert main(["merge-evidence", str(b), "--into", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot be separated" in err and len(err.splitlines()) == 1
    assert evidence.path_for("reference", VARIANT.name, results).read_bytes() == before


@pytest.mark.parametrize("bad", ["missing", "not-evidence", "empty-dir", "into-a-file"])
def test_bad_input_is_one_line_and_exit_2_before_any_write(tmp_path, capsys, bad):
    results, scratch = tmp_path / "results", tmp_path / "scratch"
    campaign(scratch, 3)
    other = tmp_path / bad
    if bad == "not-evidence":
        other.write_text('{"format": "resumefuzz-trace", "version": 1}')
    elif bad == "empty-dir":
        other.mkdir()
    elif bad == "into-a-file":
        results.write_text("not a directory")
        other = scratch
    assert main(["merge-evidence", str(scratch), str(other), "--into", str(results)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    # The good source was not merged either.
    assert not results.exists() or results.read_text() == "not a directory"


def test_dry_run_writes_nothing(tmp_path, capsys):
    results, scratch = tmp_path / "results", tmp_path / "scratch"
    campaign(scratch, 3)
    assert main(["merge-evidence", str(scratch), "--into", str(results), "--dry-run"]) == 0
    assert "new file" in capsys.readouterr().out and not results.exists()
