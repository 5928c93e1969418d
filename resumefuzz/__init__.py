"""resumefuzz's public entry points for store authors.

- ``resumefuzz.pytest``: ``store_test(framework, factory)``, a test class (and fixture) that
  fuzzes your store from your own test suite;
- ``resumefuzz.stores``: ready-made factories for known third-party stores, to pass to
  ``resumefuzz fuzz <framework> --store resumefuzz.stores.<module>:<factory>``.

The store-factory protocol (``StoreContext`` in, the store or a ``StoreHandle`` out; an optional
``ScriptStore`` for reproduction scripts) is re-exported here from ``adapters.storeprotocol``,
and ``WORKDIR`` (the temporary folder a reproduction script runs in, which a ``ScriptStore``'s
code names) from ``adapters.reproduction.runtime``: a store author imports from here, so the
engine's module layout can change under them; see docs/stores.md.
"""

from adapters.reproduction.runtime import WORKDIR
from adapters.storeprotocol import ScriptStore, StoreContext, StoreHandle, TamperTarget

__all__ = ["ScriptStore", "StoreContext", "StoreHandle", "TamperTarget", "WORKDIR"]
