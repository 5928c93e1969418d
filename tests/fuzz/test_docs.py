"""The reference documentation matches the code, and nothing a reader opens points outside the
repository.  ``docs/cli.md`` is written by hand, so without this a flag added to (or removed from)
the parser drifts away from its documentation unnoticed, and a link to a file a clone does not
have leaves a newcomer with nothing to read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuzz.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = ROOT / "docs" / "cli.md"

FLAG = re.compile(r"--(?!help\b)[a-z][a-z-]*")  # --help: every command has it


def _long_flags(parser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings
            if s.startswith("--") and s != "--help"}


def _commands() -> dict[str, set[str]]:
    """Every command's long flags; ``""`` is ``resumefuzz`` itself."""
    parser = _parser()
    out = {"": _long_flags(parser)}
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            out.update({name: _long_flags(sub) for name, sub in action.choices.items()})
    return out


def _sections(text: str) -> dict[str, str]:
    """docs/cli.md's ``## `resumefuzz X` `` sections by command (``""`` for the bare one)."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    out = {}
    for heading, body in zip(parts[1::2], parts[2::2]):
        m = re.fullmatch(r"`resumefuzz(?: ([a-z-]+))?`", heading.strip())
        if m:
            out[m.group(1) or ""] = body
    return out


def _synopsis_flags(command: str, body: str) -> set[str]:
    """Flags of the synopsis lines in the section's code blocks: a line starting with
    ``resumefuzz <command>`` and the indented lines that continue it."""
    flags, inside = set(), False
    start = f"resumefuzz {command}".rstrip() + " "
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", body, flags=re.M | re.S):
        for line in block.splitlines():
            if line.startswith(start):
                inside = True
            elif not line.startswith(" "):
                inside = False
            if inside:
                flags |= set(FLAG.findall(line))
    return flags


def _prose_flags(command: str, body: str, commands) -> list[tuple[str, str]]:
    """``(command, flag)`` for every flag a code span of the prose names: `` `--flag ...` `` is
    the section's own command's; `` `resumefuzz X --flag` `` or `` `X --flag` `` is X's."""
    prose = re.sub(r"^```.*?^```", "", body, flags=re.M | re.S)
    out = []
    for span in re.findall(r"`([^`\n]+)`", prose):
        words = span.split()
        if words and words[0] == "resumefuzz":
            words = words[1:]
        if words and words[0] in commands and words[0] != command and len(words) > 1:
            owner, words = words[0], words[1:]
        elif words and words[0].startswith("--"):
            owner = command
        else:
            continue
        out += [(owner, flag) for flag in FLAG.findall(" ".join(words))]
    return out


def test_every_command_has_a_section_in_the_cli_reference():
    sections = _sections(CLI_DOC.read_text())
    assert sorted(set(_commands()) - set(sections)) == []


@pytest.mark.parametrize("command", sorted(_commands()))
def test_the_synopsis_lists_exactly_the_parsers_flags(command):
    commands = _commands()
    documented = _synopsis_flags(command, _sections(CLI_DOC.read_text())[command])
    real = commands[command]
    assert sorted(real - documented) == [], f"docs/cli.md misses flags of `{command}`"
    assert sorted(documented - real) == [], f"`{command}` has no such flags"


def test_the_prose_names_only_flags_its_command_has():
    commands = _commands()
    wrong = [(command, owner, flag)
             for command, body in _sections(CLI_DOC.read_text()).items()
             for owner, flag in _prose_flags(command, body, commands)
             if flag not in commands[owner]]
    assert wrong == []


# -- links ----------------------------------------------------------------------------------------

READER_FILES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "benchmarks" / "README.md",
                *sorted((ROOT / "benchmarks" / "history").glob("*.md")),
                *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    for heading in re.findall(r"^#+ (.*)$", text, flags=re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _links(path: Path):
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # `Model[T](...)` in code is no link
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z]+:", target)]  # http(s):, mailto:: not ours to check


@pytest.mark.parametrize("path", READER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_link_only_inside_the_repository(path):
    assert "../shared" not in path.read_text()
    broken = []
    for target in _links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    assert broken == []
