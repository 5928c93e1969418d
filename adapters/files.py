"""File helpers for adapter authors: atomic writes, copies a restore would make, a side table,
and the installed versions of the distributions an adapter reports.

A worker may be killed between any two operations, and the next worker re-opens the case on the
same ``workdir``: what an adapter keeps there must be written so that a reader (or a crash) sees
the old file or the new one (``atomic_write_text``, ``SideTable``), and a store is copied as a
user's backup would copy it, in a child process (``copy_files``, ``copy_apart``).  The engine
writes its own corpus, reports and evidence with ``atomic_write_text`` too.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

class SideTable:
    """A small JSON mapping in ``workdir`` (thread name -> framework ids), written atomically,
    so that it survives a worker killed between two operations."""

    def __init__(self, workdir: Path, name: str = "sidetable.json"):
        self.path = Path(workdir) / name

    def load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def get(self, key: str, default=None):
        return self.load().get(key, default)

    def set(self, key: str, value) -> None:
        data = self.load()
        data[key] = value
        atomic_write_text(self.path, json.dumps(data, sort_keys=True))


def installed_versions(distributions) -> dict:
    """Distribution name -> installed version (``"not installed"`` when absent): what
    ``Adapter.versions`` usually returns."""
    from importlib import metadata

    out = {}
    for dist in distributions:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once, at import (in the parent, before any worker or thread exists): reading the umask
# means setting it, which must not race another thread creating a file.
_UMASK = _read_umask()


def copy_apart(files, dest: Path) -> None:
    """Copy ``files`` byte for byte, in that order, into directory ``dest`` by one ``cp`` in a
    child process, never in this one.

    Closing any descriptor of a file drops every POSIX advisory lock the closing process holds
    on it.  A store's SQLite connection open in this process holds its locks on the database
    and its ``-shm``: a copy made here (``shutil.copyfile`` opens and closes both) would drop
    them unseen, and the next connection of another process to close takes itself for the
    last one, checkpoints and deletes the WAL under this one, whose later commits no other
    process ever sees (a twin recovery's copy, then racers, then a SIGKILL: a checkpoint
    lost).  A child's closes drop only its own locks."""
    if files:  # cp copies its arguments in order: the copies' times keep that order
        subprocess.run(["cp", "--", *map(str, files), str(dest)], check=True)


def atomic_write_text(path: Path, text: str, *, sync: bool = True) -> None:
    """Write ``text`` to ``path`` so that a reader (or a crash) sees the old or the new file.

    The file gets the mode a plain ``open(path, "w")`` would give it (0644 under the usual
    umask), not mkstemp's private 0600: corpus entries, reports and evidence are shared.
    ``sync=False`` leaves out the ``fsync``: the rename alone is atomic against a process that
    dies (the page cache outlives it), which is all a crash point does; the ``fsync`` is what
    makes the new file survive the machine's crash, and costs a journal commit per write."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def copy_files(src: Path, dest: Path) -> None:
    """Copy the directory tree ``src`` into ``dest`` as a user's backup or restore would
    (``cp -r`` without ``-p``): the bytes only, in directory order, each file with fresh
    metadata (mtimes of the copy, not of the original).  For ``Case.clone_store``: a store
    that orders checkpoints by file time must be judged on what a restored copy has, so two
    copies may disagree as two restores would."""
    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    files: list = []  # copied together, in the order read
    for entry in os.scandir(src):  # directory order, as cp -r reads it
        if entry.is_dir(follow_symlinks=False):
            copy_apart(files, dest)
            files = []
            copy_files(Path(entry.path), dest / entry.name)
        elif entry.is_file(follow_symlinks=False):
            files.append(entry.path)
    copy_apart(files, dest)


__all__ = [
    "SideTable",
    "atomic_write_text",
    "copy_apart",
    "copy_files",
    "installed_versions",
]
