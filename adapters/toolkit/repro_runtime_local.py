"""The effect log of a reproduction script that never kills a process: a list in memory.

Same names as in ``repro_runtime`` (``effect``, ``effects``), so a workflow definition works
with either; a script with a SIGKILL takes the SQLite log of ``repro_runtime`` instead, which
survives the process.
"""

EFFECTS = []


def effect(task, value):
    """The task's one external effect (an email sent, say): a row in a list."""
    EFFECTS.append((task, value))


effects = EFFECTS.copy  # every effect fired so far, in order, as ``(task, value)``
