"""The smaller runtime of a script that needs less: same names, fewer lines.

- The effect log of a script that never kills a process: a list in memory, ``EFFECTS``, read
  directly (the glue reads ``EFFECTS`` where a script with the SQLite log calls ``effects()``;
  ``effects`` is pasted only for the ``runtime`` functions that call it).
  ``effect`` has the same name as in ``runtime``, so a workflow definition works with
  either; a script with a SIGKILL takes the SQLite log of ``runtime`` instead, which
  survives the process.
- ``observe`` for a script with no crash point, and ``crash_point`` for one whose crash points
  all raise at a task's own moment (no SIGKILL, no "after it completed", which ``runtime``'s
  handles by dying when the next task starts): a step sets ``CRASH = (task, moment)`` itself.
"""

from .runtime import CRASH, Crash  # noqa: F401  (what crash_point reads, for linters)

EFFECTS = []


def effect(task, value):
    """The task's one external effect (an email sent, say): a row in a list."""
    EFFECTS.append((task, value))


# For the functions of ``runtime`` a script without a SIGKILL may still take (the
# ``observe`` that tells a crash point from a refusal, ``observe_crashing``): they call it.
effects = EFFECTS.copy


def observe(call):
    """Run ``call()``, which returns the run's outcome; return it and the effects fired."""
    before = len(EFFECTS)
    try:
        status = call()
    except (NameError, ImportError):  # a mistake in this script, not the framework's answer
        raise
    except Exception as exc:  # the framework refused
        status = "rejected"
        print(f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return status, EFFECTS[before:]


def crash_point(task, moment):
    """Raise ``Crash`` if the current call fails at ``(task, moment)`` (``CRASH``)."""
    if CRASH == (task, moment):
        raise Crash(f"task {task} fails {moment}")
