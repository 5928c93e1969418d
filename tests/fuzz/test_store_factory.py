"""Bring your own store, framework-free: loading a factory by path, validating what it returns,
probing it in a forked child, and the one-line refusals (exit 2) of the command line."""

from __future__ import annotations

import json
import sys
import types

import pytest

from adapters import storefactory
from adapters.protocol import Adapter, Capabilities, Variant
from adapters.storeprotocol import StoreContext, StoreHandle
from fuzz.cli import main


class Box:
    """A stand-in store object: the probe needs no framework when no check is given."""


def good(ctx: StoreContext):
    (ctx.workdir / "data").write_text("x")
    return StoreHandle(store=Box(), clone=lambda dest: None, tamper=lambda t: "done",
                       tamper_hows=frozenset({"corrupt"}), tamper_scope="lineage")


def bare(ctx: StoreContext):
    return Box()


def memory_only(ctx: StoreContext):
    return StoreHandle(store=Box(), shared=False)


def broken(ctx: StoreContext):
    raise ConnectionError("no server at 127.0.0.1:1\nsecond line")


def bad_scope(ctx: StoreContext):
    return StoreHandle(store=Box(), tamper_scope="galaxy")


async def asynchronous(ctx: StoreContext):
    return StoreHandle(store=Box(), clone=lambda dest: None)


class StoreAdapter(Adapter):
    """A target with a store extension point whose declarations probe the factory lazily."""

    name = "storeful"

    def use_store(self, path):
        self.factory = storefactory.load(path)

    def variants(self):
        return [Variant("v")]

    def capabilities(self, variant):
        storefactory.probe(self.factory, self.name)
        return Capabilities()


@pytest.fixture(autouse=True)
def factories(monkeypatch):
    module = types.ModuleType("rf_test_factories")
    for f in (good, bare, memory_only, broken, bad_scope, asynchronous, StoreAdapter):
        setattr(module, f.__name__, f)
    monkeypatch.setitem(sys.modules, "rf_test_factories", module)


@pytest.mark.parametrize("path, message", [
    ("no-colon", "expected a dotted path"),
    ("rf_no_such_module_xyz:f", "cannot import 'rf_no_such_module_xyz'"),
    ("rf_test_factories:missing", "has no callable 'missing'"),
])
def test_a_bad_path_is_one_line(path, message):
    with pytest.raises(storefactory.StoreFactoryError, match=message) as info:
        storefactory.load(path)
    assert "\n" not in str(info.value)


def test_load_names_the_store_and_its_distribution():
    f = storefactory.load("rf_test_factories:good")
    assert (f.name, f.asynchronous, f.version) == ("rftestfactories", False, "not installed")
    assert storefactory.load("rf_test_factories:asynchronous").asynchronous


def test_a_registered_callable_loads_without_an_importable_name():
    def local(ctx):
        return Box()
    path = storefactory.register(local)
    assert storefactory.load(path).func is local


def test_the_probe_reports_what_the_handle_offers():
    p = storefactory.probe(storefactory.load("rf_test_factories:good"), "test")
    assert (p.clone, p.tamper_hows, p.tamper_scope, p.shared) == (
        True, frozenset({"corrupt"}), "lineage", True)
    p = storefactory.probe(storefactory.load("rf_test_factories:asynchronous"), "test")
    assert p.clone and not p.tamper_hows


def test_what_a_bare_store_cannot_do_is_na_with_the_reason():
    f = storefactory.load("rf_test_factories:bare")
    na = storefactory.not_expressible(f, storefactory.probe(f, "test"))
    assert set(na) == {"twin_recover", "tamper"}
    assert "no StoreHandle.clone" in na["twin_recover"] and "rf_test_factories:bare" in na["tamper"]
    f = storefactory.load("rf_test_factories:memory_only")
    na = storefactory.not_expressible(f, storefactory.probe(f, "test"))
    assert {"race", "twin_recover", "sigkill", "tamper"} <= set(na)


@pytest.mark.parametrize("name, message", [
    ("broken", "calling the factory failed: ConnectionError: no server at 127.0.0.1:1"),
    ("bad_scope", "tamper_scope 'galaxy' is not one of"),
])
def test_a_broken_factory_fails_the_probe_in_one_line(name, message):
    with pytest.raises(storefactory.StoreFactoryError, match=message) as info:
        storefactory.probe(storefactory.load(f"rf_test_factories:{name}"), "test")
    assert "\n" not in str(info.value) and "second line" not in str(info.value)


def test_the_check_rejects_a_store_of_the_wrong_type():
    def check(store):
        raise TypeError("not a saver")
    with pytest.raises(storefactory.StoreFactoryError, match="TypeError: not a saver"):
        storefactory.probe(storefactory.load("rf_test_factories:good"), "test", check)


def test_context_ids_are_stable_and_safe(tmp_path):
    a, b = storefactory.context(tmp_path / "x", "t"), storefactory.context(tmp_path / "x", "t")
    assert a.store_id == b.store_id and a.store_id.startswith("rf_")
    assert storefactory.context(tmp_path / "y", "t").store_id != a.store_id
    assert all(c.isalnum() or c == "_" for c in a.store_id)


def test_cli_refuses_store_on_a_target_without_extension_point(in_tmp, capsys):
    assert main(["fuzz", "reference", "--store", "rf_test_factories:good",
                 "--max-examples", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "resumefuzz: error: target 'reference' has no store extension point"
    assert not (in_tmp / "corpus").exists()


def test_an_unimportable_store_is_a_usage_error():
    from fuzz.errors import UsageError
    from fuzz.targets import use_store

    class WithStore:
        name = "x"

        def use_store(self, path):
            storefactory.load(path)

    with pytest.raises(UsageError, match="cannot import 'nope_nope_module'"):
        use_store(WithStore(), "nope_nope_module:f")


def test_replay_never_imports_the_factory_an_entry_names(in_tmp, capsys):
    """A corpus entry is inert: the factory it recorded is named, not imported."""
    entry = {"format": "resumefuzz-trace", "version": 1,
             "workflow": {"n": 1, "gates": [], "values": ["a", "b"]},
             "target": "reference", "variant": "default",
             "operations": [{"op": "start", "thread": "t0", "crash": None, "bad_output": None}],
             "versions": {"store-factory": "evil_module:boom"}}
    path = in_tmp / "entry.json"
    path.write_text(json.dumps(entry))
    assert main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert "replay it with --store evil_module:boom" in out and "evil_module" not in sys.modules


def test_a_factory_that_breaks_when_probed_is_one_line_exit_2(in_tmp, capsys):
    assert main(["targets", "rf_test_factories:StoreAdapter",
                 "--store", "rf_test_factories:broken"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ConnectionError: no server at 127.0.0.1:1" in err


# -- ScriptStore: how a reproduction script builds the factory's store ---------------------------

RECIPE = '''"""A store's recipe for scripts."""
import json
import os
import sqlite3

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def box_store(cls=dict):
    return cls(path=os.path.join(WORKDIR, "box.json"))


def fresh():
    return "box"


SCRIPT = ScriptStore(functions=(box_store, fresh), build="box_store", setup=("NAME = fresh()",),
                     distributions=("boxpkg",))
NOT_ONE = "a string"
BAD_BUILD = ScriptStore(functions=(fresh,), build="box_store")
'''


@pytest.fixture
def recipe_module(tmp_path, monkeypatch):
    (tmp_path / "rf_test_recipe.py").write_text(RECIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "rf_test_recipe"
    sys.modules.pop("rf_test_recipe", None)


def _with_script(monkeypatch, path):
    monkeypatch.setattr(good, "store_script", path, raising=False)
    return storefactory.load("rf_test_factories:good")


def test_a_factory_without_store_script_has_no_script_store():
    assert storefactory.script_of(storefactory.load("rf_test_factories:good")) is None


def test_store_script_loads_and_pastes_what_its_functions_use(recipe_module, monkeypatch):
    from adapters.reproduction.script import store_class, store_parts

    recipe = storefactory.script_of(_with_script(monkeypatch, f"{recipe_module}:SCRIPT"))
    stdlib, imports, source = store_parts(recipe)
    # os is used, json and sqlite3 are not; resumefuzz's own imports never reach a script
    assert stdlib == ("os",) and imports == ()
    assert source.startswith("def box_store(cls=dict):") and source.endswith("NAME = fresh()")
    assert '"""' not in source
    assert store_class(recipe) == "dict"


@pytest.mark.parametrize("attr, message", [
    ("rf_no_such_recipe_xyz:SCRIPT", "does not load: ModuleNotFoundError"),
    ("{m}:NOT_ONE", "is a str, not a ScriptStore"),
    ("{m}:BAD_BUILD", "builds with 'box_store', which is not one of its functions"),
    ("{m}.SCRIPT", "is not a dotted path"),
])
def test_a_broken_store_script_is_one_line(recipe_module, monkeypatch, attr, message):
    with pytest.raises(storefactory.StoreFactoryError, match=message) as info:
        storefactory.script_of(_with_script(monkeypatch, attr.format(m=recipe_module)))
    assert "\n" not in str(info.value)
