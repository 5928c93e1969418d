"""resumefuzz's engine: the differential state machine, targets, corpus, reports and the CLI.

Public modules: ``machine`` (the Hypothesis state machine), ``runner`` (``Session`` and
``Settings``: workers, barriers, ledger; its parts in ``policy``, ``transport``, ``pools`` and
``cases``), ``rate`` (how often a timing-dependent finding comes back), ``targets``
(resolving ``reference``, ``mutant:<C>``, built-in and dotted-path adapters), ``trace`` (the
versioned JSON format), ``corpus`` and ``report`` (what a failure leaves behind), ``campaign``
(time-boxed runs over variants), ``replay``, ``profiles``, ``cli``, ``errors`` and
``failures``.  The engine drives adapters only through ``adapters/protocol.py``.
"""
