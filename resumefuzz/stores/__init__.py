"""Store factories for third-party stores (``--store resumefuzz.stores.<module>:<factory>``).

Each module imports its store's package only; each factory sets ``store_name`` (the variant
names' ``store-<name>-...``) and ``store_distribution`` (the PyPI package whose version reports
show).  They are also complete examples of the factory protocol (docs/stores.md).
"""
