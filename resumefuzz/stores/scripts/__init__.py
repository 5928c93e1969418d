"""How a reproduction script builds each store of ``resumefuzz.stores`` (``ScriptStore``s, one
module per factory module; the factory names its recipe with ``store_script``).  Every function
here is pasted into scripts by its source, with its module's top-level imports: real code, kept
importable and tested in the store's own tox environment (docs/stores.md)."""
