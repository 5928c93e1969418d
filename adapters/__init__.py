"""Framework adapters.  ``protocol.py`` is the contract every adapter implements; each framework
has a package of its own here (``reference`` is the built-in self-test target)."""
