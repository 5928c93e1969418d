"""Small helpers the bundled factories share (garbage bytes, file copies)."""

from __future__ import annotations

import shutil
from pathlib import Path

#: msgpack's reserved code 0xc1 "never used": no msgpack decoder accepts it.
GARBAGE = b"\xc1" * 16


def copy_tree(src: Path, dest: Path, names) -> None:
    """Byte-for-byte copy of the files ``names`` of ``src`` that exist, into ``dest``."""
    for name in names:
        path = Path(src) / name
        if path.exists():
            shutil.copyfile(path, Path(dest) / name)
