"""Small helpers the bundled factories share (garbage bytes, file copies)."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: msgpack's reserved code 0xc1 "never used": no msgpack decoder accepts it.
GARBAGE = b"\xc1" * 16


def copy_tree(src: Path, dest: Path, names) -> None:
    """Byte-for-byte copy of the files ``names`` of ``src`` that exist, into ``dest``, by ``cp``
    in a child process: closing a descriptor of a file here would drop every POSIX lock this
    process holds on it, an open SQLite connection's among them (``adapters.files.copy_apart``
    says what follows; this standalone module may not import it)."""
    paths = [str(Path(src) / name) for name in names if (Path(src) / name).exists()]
    if paths:
        subprocess.run(["cp", "--", *paths, str(dest)], check=True)
