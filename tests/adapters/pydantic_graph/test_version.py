"""The 2.x refusal, decided from the version string: no 2.x install needed.

pydantic-graph 2.0 removed state persistence; against it ``prepare()`` must fail loudly with one
line (an ``ImportError``, which the engine turns into exit 2 and the matrix into ``n/a``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.pydantic_graph import PersistenceRemoved, PydanticGraphAdapter, check_version
from adapters.pydantic_graph import version as version_module


@pytest.mark.parametrize("version", ["1.107.1", "1.107.10", "1.0.0", "1.97.0b1"])
def test_1x_is_accepted(version):
    check_version(version)


@pytest.mark.parametrize("version", ["2.0.0", "2.0.0b7", "2.68.0", "3.1"])
def test_2x_and_later_are_refused_in_one_line(version):
    with pytest.raises(PersistenceRemoved) as info:
        check_version(version)
    message = str(info.value)
    assert isinstance(info.value, ImportError)
    assert "\n" not in message
    assert version in message and "no state persistence" in message
    assert "1.107.10" in message  # says what to install instead


@pytest.mark.parametrize("version", ["0.9.0", "", "dev", "x.1"])
def test_unknown_or_older_versions_are_refused(version):
    with pytest.raises(PersistenceRemoved):
        check_version(version)


def test_prepare_refuses_2x_before_importing_the_framework(monkeypatch):
    """``prepare`` checks the installed version first: a 2.x install never gets imported."""
    from adapters.pydantic_graph import adapter as adapter_module

    monkeypatch.setattr(adapter_module, "installed_version", lambda: "2.68.0")
    checked = []
    monkeypatch.setattr(adapter_module, "check_version",
                        lambda v: (checked.append(v), check_version(v)))
    with pytest.raises(PersistenceRemoved, match="no state persistence"):
        PydanticGraphAdapter().prepare()
    assert checked == ["2.68.0"]


def test_missing_framework_gives_an_install_hint(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(ImportError, match="pip install"):
        version_module.installed_version()


def test_importing_the_adapter_does_not_import_the_framework():
    code = (
        "import sys; import adapters.pydantic_graph as m; m.PydanticGraphAdapter().variants(); "
        "print(any(k == 'pydantic_graph' or k.startswith('pydantic_graph.') for k in sys.modules))"
    )
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env, cwd=root)
    assert out.stdout.strip() == "False"
