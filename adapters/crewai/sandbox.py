"""Where CrewAI may write, and what it may not do: the environment of the parent and of each case.

CrewAI phones home unless told not to (OpenTelemetry spans, trace batches, a PyPI version check,
a first-run trace prompt) and writes into the user's home on import (``~/.local/share/crewai/
credentials/secret.key``, ``~/.config/crewai``) and on use (``$XDG_DATA_HOME/<storage dir>``,
``./<storage dir>/memory``, lock files in the temp dir).  ``SWITCHES`` turns off every switch the
installed version reads (found by grepping crewai, crewai_core and crewai_cli for environment
reads; see docs/frameworks/crewai.md); ``data_dirs`` points every home-derived path at one
directory.

The parent imports CrewAI before any case exists, so its directories are a session sandbox made by
``CrewAIAdapter.environment``; ``enter_case`` then re-points them, in the worker, at the case's own
``workdir/sandbox`` and makes ``workdir`` the current directory, so that every relative path the
flow uses (``store/...``) resolves inside the case, and so does a byte-for-byte clone of it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

#: Telemetry, tracing, version-check and prompt switches read by crewai 1.15.x (file: reader).
SWITCHES = {
    "CREWAI_DISABLE_TELEMETRY": "true",  # crewai_core/telemetry.py:_is_telemetry_disabled
    "CREWAI_DISABLE_TRACKING": "true",  # same reader
    "OTEL_SDK_DISABLED": "true",  # same reader, and the OpenTelemetry SDK itself
    "CREWAI_TRACING_ENABLED": "false",  # events/listeners/tracing/utils.py:should_enable_tracing
    "CREWAI_DISABLE_VERSION_CHECK": "true",  # events/utils/console_formatter.py (PyPI check)
    "CI": "true",  # same reader: a second, independent off switch for the version check
    "CREWAI_TESTING": "true",  # tracing/utils.py: no first-run trace prompt or auto-collection;
    # telemetry/tracing/last_run.py: no ./.crewai last-run file
    "ANONYMIZED_TELEMETRY": "False",  # chromadb (imported by crewai), should a client be made
    "REDIS_URL": "",  # crewai_core/lock_store.py: file locks, never a Redis lock (explicit choice)
}


def data_dirs(root: Path) -> dict[str, str]:
    """Every home-derived directory CrewAI (or appdirs, platformdirs) writes to, under ``root``."""
    root = Path(root)
    return {
        "HOME": str(root / "home"),  # token_manager (~/.local/share), settings (~/.config)
        "XDG_DATA_HOME": str(root / "xdg" / "data"),  # appdirs.user_data_dir: db_storage_path
        "XDG_CONFIG_HOME": str(root / "xdg" / "config"),
        "XDG_CACHE_HOME": str(root / "xdg" / "cache"),
        "XDG_STATE_HOME": str(root / "xdg" / "state"),
        "CREWAI_STORAGE_DIR": "crewai-storage",  # a name under XDG_DATA_HOME and the cwd
        "TMPDIR": str(root / "tmp"),  # portalocker lock files (crewai_core/lock_store.py)
    }


def environment(root: Path) -> dict[str, str]:
    env = dict(SWITCHES)
    env.update(data_dirs(root))
    return env


def enter_case(workdir: Path) -> Path:
    """In a worker: point CrewAI's data, home, temp and cwd at ``workdir``; returns the sandbox.

    Rich panels are dropped and (``capture_output``) the rest of the output goes to
    ``sandbox/output.log``, so a campaign's terminal stays readable; nothing about the flow's
    behaviour changes.
    """
    workdir = Path(workdir).resolve()
    sandbox = workdir / "sandbox"
    env = data_dirs(sandbox)
    for key in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    os.environ.update(SWITCHES)
    os.environ.update(env)
    tempfile.tempdir = env["TMPDIR"]  # gettempdir() caches: the lock store reads it per lock
    os.chdir(workdir)
    _silence_panels()
    return sandbox


def capture_output(sandbox: Path) -> None:
    """Send the worker's Python-level stdout/stderr (listener tracebacks CrewAI logs) to
    ``sandbox/output.log``."""
    log = open(Path(sandbox) / "output.log", "a", buffering=1)  # noqa: SIM115 - worker-long
    sys.stdout = sys.stderr = log


def _silence_panels() -> None:
    """Flow panels ignore ``verbose``; route the formatter's console to the log instead."""
    try:
        from crewai.events.utils.console_formatter import ConsoleFormatter
    except ImportError:  # pragma: no cover - prepare() imported it already
        return
    ConsoleFormatter.print_panel = lambda self, *args, **kwargs: None
