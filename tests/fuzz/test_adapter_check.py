"""An adapter is checked against the protocol when it is loaded (``fuzz.adaptercheck``), as
pluggy checks a hook implementation when it registers: a method that cannot take the engine's
calls, a misspelt method or a missing one is one line naming the adapter and the method, before
any case runs, never a ``TypeError`` in a worker or the protocol's default answering silently."""

from __future__ import annotations

import sys
import textwrap

import pytest

from adapters.protocol import Adapter, Capabilities, Tuning
from fuzz.adaptercheck import AdapterMismatch, check, signature_problems
from fuzz.errors import UsageError
from fuzz.targets import FRAMEWORKS, known_targets, resolve


class _Fits(Adapter):
    name = "fits"

    def capabilities(self, variant):
        return Capabilities()

    def tuning(self, variant, *, extra=None):  # a keyword-only extra with a default is fine
        return Tuning()

    def promises(self, variant=None, more=()):
        return ()

    def cleanup(self, *args):
        pass

    def store_probe(self):  # a method of the adapter's own
        return None


def test_an_adapter_whose_methods_take_the_protocol_calls_fits():
    assert signature_problems(_Fits()) == []


def test_every_builtin_target_fits():
    for target in known_targets():
        if target not in FRAMEWORKS:  # the frameworks' need their environments (test_adapter_shape)
            resolve(target)


@pytest.mark.parametrize("body, words", [
    ("def tuning(self):\n    return Tuning()", "tuning() does not take the protocol's "
     "Adapter.tuning(variant) with 1 argument(s)"),
    ("def capabilities(self, variant, kind):\n    return Capabilities()", "capabilities"),
    ("def promises(self, variant):\n    return ()", "Adapter.promises(variant=None) with 0"),
    ("async def tuning(self, variant):\n    return Tuning()", "tuning(variant) is async"),
    ("tuning = Tuning()", "tuning is a Tuning, not a method"),
    ("def tunning(self, variant):\n    return Tuning()", "tunning is not a method of the "
     "protocol; tuning (Adapter.tuning, left at its default) misspelt?"),
])
def test_a_mismatch_names_the_adapter_and_the_method(body, words):
    namespace = {"Adapter": Adapter, "Capabilities": Capabilities, "Tuning": Tuning}
    exec("class Broken(Adapter):\n" + textwrap.indent(body, "    "), namespace)
    with pytest.raises(AdapterMismatch) as info:
        check(namespace["Broken"](), "mypkg.mod:Broken")
    message = str(info.value)
    assert isinstance(info.value, UsageError) and "\n" not in message
    assert message.startswith("target 'mypkg.mod:Broken': Broken.") and words in message, message


def test_an_adapter_that_does_not_subclass_the_protocol_names_what_it_lacks():
    class Duck:
        name = "duck"

        def variants(self):
            return []

    message = "; ".join(signature_problems(Duck()))
    assert "has no method tuning (Adapter.tuning)" in message, message


def test_resolve_checks_a_third_party_adapter(tmp_path, monkeypatch):
    (tmp_path / "rf_broken_adapter.py").write_text(textwrap.dedent("""
        from adapters.protocol import Adapter

        class Broken(Adapter):
            def tuning(self):
                return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(UsageError, match=r"Broken\.tuning\(\) does not take"):
            resolve("rf_broken_adapter:Broken")
    finally:
        sys.modules.pop("rf_broken_adapter", None)


def test_a_release_range_that_is_not_pep_440_is_named_when_the_adapter_loads():
    class Ranged(_Fits):
        RELEASES = {"hypothesis": ">=6,<7", "pytest": "8 or later"}

    with pytest.raises(AdapterMismatch, match=r"Ranged.RELEASES\['pytest'\] = '8 or later' is "
                                              r"not a PEP 440 range"):
        check(Ranged(), "ranged")


def test_an_installed_release_outside_the_range_is_refused_in_one_line_before_import():
    """``Adapter.RELEASES``: the engine reads the installed version, not the framework, so a
    release the adapter does not drive is never imported."""
    from importlib import metadata

    from fuzz.errors import TargetUnavailable
    from fuzz.targets import prepare, unsupported_release

    installed = metadata.version("hypothesis")
    imported = []

    class Old(_Fits):
        RELEASES = {"hypothesis": "<6", "not-a-distribution-here": ">=1"}

        def prepare(self):
            imported.append(True)

    assert unsupported_release(Old()) == (
        f"hypothesis {installed} is outside the releases this adapter drives (<6): "
        "pip install 'hypothesis<6'")
    with pytest.raises(TargetUnavailable, match=r"^target 'fits': hypothesis .* \(<6\)"):
        prepare(Old())
    assert imported == []

    class Current(_Fits):
        RELEASES = {"hypothesis": f"=={installed}"}

    assert unsupported_release(Current()) == ""


def test_every_built_in_framework_adapter_declares_the_releases_it_drives():
    from packaging.specifiers import SpecifierSet

    for name in FRAMEWORKS:
        adapter = resolve(name)
        assert adapter.RELEASES, name
        for spec in adapter.RELEASES.values():
            SpecifierSet(spec)
