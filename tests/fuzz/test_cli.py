"""The command line: exit codes, one-line errors, nothing written on bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fuzz.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, message", [
    (["fuzz", "nosuchthing"], "unknown target 'nosuchthing'"),
    (["fuzz", "mutant:Nope"], "unknown mutant 'Nope'"),
    (["fuzz", "reference", "--variant", "nope"], "has no variant 'nope'"),
    (["fuzz", "reference", "--max-examples", "0"], "--max-examples"),
    (["fuzz", "nosuch.module:Adapter"], "cannot import 'nosuch.module'"),
    (["explore", "--gates", "9"], "gates"),
])
def test_usage_errors_are_one_line_exit_2_and_write_nothing(in_tmp, capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert list(in_tmp.iterdir()) == []


def test_malformed_corpus_file_is_refused_up_front_and_kept(in_tmp, capsys):
    bad = in_tmp / "corpus" / "x" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{ not json")
    assert main(["replay", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "not JSON" in captured.err
    assert bad.read_text() == "{ not json"


# What a new user gives a command by mistake: a binary file, a JSON file of something else.
BAD_FILES = {"binary": bytes(range(256)) * 4, "invalid JSON": b"{ not json",
             "not a trace": b'{"format": "something-else"}', "a JSON list": b"[1, 2]"}
# Every command that reads corpus entries (or evidence files), given the bad file as {bad} or a
# directory holding it as {dir}.
READERS = [
    ["replay", "{bad}"], ["replay", "{dir}"], ["replay", "--update", "{dir}"],
    ["report", "{bad}"], ["report", "{dir}", "--verify", "1"],
    ["minimize", "{bad}"], ["minimize", "{dir}", "--replace"],
    ["dedupe", "{bad}"], ["dedupe", "--apply", "{dir}"],
    ["defects", "--corpus", "{dir}", "--output", "out/defects.md"],
    ["matrix", "--corpus", "{dir}", "--output", "out/matrix.md"],
    ["nightly", "--corpus", "{dir}", "--targets", "reference", "--max-examples", "1"],
    ["merge-evidence", "{bad}", "--into", "out"], ["merge-evidence", "{dir}", "--into", "out"],
]


@pytest.mark.parametrize("kind", BAD_FILES)
@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_file_that_is_no_trace_is_one_line_exit_2_and_nothing_written(in_tmp, capsys, args,
                                                                         kind):
    """Before 2026-12-07 a binary file ended in a ``UnicodeDecodeError`` traceback (exit 1) in
    ``replay``, ``report``, ``minimize``, ``dedupe``, ``defects`` and ``matrix``, and a file that
    was no trace became an ERROR row of ``replay`` (exit 1) after the replays of the others."""
    folder = in_tmp / "given" / "x" / "y"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_bytes(BAD_FILES[kind])
    before = {p: p.read_bytes() if p.is_file() else None for p in in_tmp.rglob("*")}
    given = [a.format(bad=folder / "bad.json", dir=in_tmp / "given") for a in args]
    assert main(given) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err, err
    assert err.startswith("resumefuzz: error: ") and "Traceback" not in captured.out + err
    after = {p: p.read_bytes() if p.is_file() else None for p in in_tmp.rglob("*")}
    assert after == before  # nothing written, nothing removed


def test_replay_with_no_corpus_is_a_usage_error(in_tmp, capsys):
    assert main(["replay"]) == 2
    assert "no corpus entries" in capsys.readouterr().err


def test_fuzz_json_summary_and_exit_1_on_a_finding(tmp_path):
    proc = run_cli("fuzz", "mutant:LostUpdate", "--max-examples", "200", "--seed", "3",
                   "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert set(summary) >= {"target", "variants", "examples", "seconds", "findings"}
    (finding,) = [f for f in summary["findings"] if f["category"] == "LostUpdate"]
    assert set(finding) >= {"variant", "category", "property", "length", "corpus", "report"}
    assert (tmp_path / finding["corpus"]).exists() and (tmp_path / finding["report"]).exists()
    replay = run_cli("replay", finding["corpus"], cwd=tmp_path)
    assert replay.returncode == 1 and "FAILED" in replay.stdout


def test_fuzz_exit_0_when_nothing_found(tmp_path):
    proc = run_cli("fuzz", "reference", "--max-examples", "20", "--seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing found" in proc.stdout


def test_explore_json(tmp_path):
    proc = run_cli("explore", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["config"] == {"n": 3, "gates": [2], "values": ["a", "b"], "depth": 3}
    assert doc["reference_divergence"] is None
    for name, m in doc["mutants"].items():
        assert m["category"] == name and m["length"] == len(m["trace"]) >= 1


# Signals, orphans and temp folders: tests/fuzz/test_lifetime.py.


def test_version_names_the_installed_resumefuzz_and_hypothesis(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"resumefuzz {metadata.version('resumefuzz')} ")
    assert f"hypothesis {metadata.version('hypothesis')}" in out and len(out.splitlines()) == 1


def _commands():
    import argparse

    from fuzz.cli import _parser

    parser = _parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_argument_has_help_and_every_default_is_shown(command):
    """``resumefuzz <command> --help`` says what each argument is and, for an option with a
    default, what the default is (where a command writes, how long it waits): before 2026-12-07
    fifteen options said nothing and eleven did not name their default."""
    import argparse

    parser = _commands()[command]
    formatter = parser._get_formatter()
    wrong = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        if not action.help:
            wrong.append(f"{name}: no help")
            continue
        if action.option_strings and action.default not in (None, False):
            shown = "none" if action.default == [] else str(action.default)
            text = formatter._expand_help(action)
            if f"default: {shown}" not in text and f"default {shown}" not in text:
                wrong.append(f"{name}: default {action.default!r} not shown in {text!r}")
    assert not wrong, wrong
    parser.format_help()  # every help string formats (a stray % would raise here)
