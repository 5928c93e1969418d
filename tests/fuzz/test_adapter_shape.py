"""Every built-in adapter has one shape: the same file name for the same role (issue 43).

As pluggy checks a hook implementation against its spec when it registers (an argument the spec
lacks is an error there, not a silent no-op), this checks each framework adapter's folder: the
required files are there, and none of the old names of those roles has come back.  A reader who
knows one adapter finds the workflow, the case or the store of another under the same name.  The
roles are tabulated in docs/adapters.md ("The files of an adapter").  It only lists files:
nothing of a framework is imported, so it runs in the core environment.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuzz.targets import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = ("adapter.py", "variants.py", "workflow.py", "case.py", "repro.py", "promises.py")
# ``store.py`` is the store role where an adapter has such code: not required, but named so.
OPTIONAL = ("store.py",)
# Names these roles had before issue 43: one coming back is a role under a second name.
RETIRED = ("stores.py", "flowsource.py", "workflow_graph.py", "teams.py", "declarations.py",
           "build.py")


def _folder(target: str) -> Path:
    """``adapters.pydantic_graph:PydanticGraphAdapter`` -> ``<root>/adapters/pydantic_graph``."""
    return ROOT.joinpath(*FRAMEWORKS[target].partition(":")[0].split("."))


def _modules(folder: Path) -> set[str]:
    """File names of every module under ``folder``, at any depth, a package counting as
    ``<name>.py``."""
    files = {p.name for p in folder.rglob("*.py")}
    packages = {f"{p.parent.name}.py" for p in folder.rglob("__init__.py") if p.parent != folder}
    return files | packages


@pytest.mark.parametrize("target", sorted(FRAMEWORKS))
def test_a_builtin_adapter_has_the_shape(target):
    folder = _folder(target)
    assert folder.is_dir(), f"{target}: no folder {folder.relative_to(ROOT)}"
    missing = [name for name in REQUIRED if not (folder / name).is_file()]  # at the top
    retired = sorted(_modules(folder) & set(RETIRED))
    where = folder.relative_to(ROOT)
    assert not missing, f"{where} lacks {missing} (docs/adapters.md, 'The files of an adapter')"
    assert not retired, (f"{where} has {retired}: old names of roles that have one name now "
                         "(docs/adapters.md, 'The files of an adapter')")


def test_the_docs_tabulate_the_shape_the_check_enforces():
    text = (ROOT / "docs" / "adapters.md").read_text()
    section = text.split("## The files of an adapter", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+\.py)` \|", section, flags=re.M)
    assert rows == [*REQUIRED[:4], *OPTIONAL, *REQUIRED[4:]]


def test_an_old_name_is_caught_as_a_subpackage_too(tmp_path):
    (tmp_path / "case.py").write_text("")
    (tmp_path / "stores").mkdir()
    (tmp_path / "stores" / "__init__.py").write_text("")
    assert _modules(tmp_path) == {"case.py", "__init__.py", "stores.py"}
