"""The reproduction layer: what turns a finding into a short script in the framework's own API.

- ``script.py``: the representation of a reproduction (``Step``: one operation's calls;
  ``Check``: what the diverging step must show) and the one emitter, ``Script(...).source()``.
- ``runtime.py`` and ``runtime_local.py``: the standard-library functions a script needs (the
  effect log, crash points, a child process that kills itself, ``verdict``), copied into the
  script by name.
- Each framework's backend is its adapter's ``repro.py``: ``reproduction(variant, workflow,
  evidence)`` gives the workflow definition and the steps in that framework's terms.
- ``fuzz/reprocheck.py`` records the calls, asks the backend, and runs the script in fresh
  interpreters before a report quotes it (docs/decisions/0002-checked-scripts-only.md).
"""
