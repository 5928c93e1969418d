"""The engine's internals: hooks, ledger, workers.  Not a public API; adapters never import it."""
