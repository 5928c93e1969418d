"""Every built-in adapter has one shape: the same file name for the same role (issue 43).

As pluggy checks a hook implementation against its spec when it registers (an argument the spec
lacks is an error there, not a silent no-op), ``fuzz.targets.resolve`` checks each framework
adapter's folder when it loads the adapter (``fuzz.adaptercheck``): the required files are there,
and none of the old names of those roles has come back.  A reader who knows one adapter finds the
workflow, the case or the store of another under the same name.  The roles are tabulated in
docs/adapters.md ("The files of an adapter").  This only lists files: nothing of a framework is
imported, so it runs in the core environment.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuzz.adaptercheck import OPTIONAL, REQUIRED, RETIRED, module_names, shape_problems
from fuzz.targets import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]


def _folder(target: str) -> Path:
    """``adapters.pydantic_graph:PydanticGraphAdapter`` -> ``<root>/adapters/pydantic_graph``."""
    return ROOT.joinpath(*FRAMEWORKS[target].partition(":")[0].split("."))


@pytest.mark.parametrize("target", sorted(FRAMEWORKS))
def test_a_builtin_adapter_has_the_shape(target):
    folder = _folder(target)
    assert folder.is_dir(), f"{target}: no folder {folder.relative_to(ROOT)}"
    assert shape_problems(folder) == []


def test_a_missing_role_or_an_old_name_is_named(tmp_path):
    for name in REQUIRED[1:]:
        (tmp_path / name).write_text("")
    (tmp_path / "teams.py").write_text("")
    problems = " ".join(shape_problems(tmp_path))
    assert "lacks adapter.py" in problems and "has teams.py" in problems, problems


def test_the_docs_tabulate_the_shape_the_check_enforces():
    text = (ROOT / "docs" / "adapters.md").read_text()
    section = text.split("## The files of an adapter", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+\.py)` \|", section, flags=re.M)
    assert rows == [*REQUIRED[:4], *OPTIONAL, *REQUIRED[4:]]


def test_an_old_name_is_caught_as_a_subpackage_too(tmp_path):
    (tmp_path / "case.py").write_text("")
    (tmp_path / "stores").mkdir()
    (tmp_path / "stores" / "__init__.py").write_text("")
    assert module_names(tmp_path) == {"case.py", "__init__.py", "stores.py"}
