"""``lmdb_saver``'s store in a reproduction script: an ``LMDBSaver`` on an LMDB environment in
the script's directory, opened as the factory opens it."""

import os

import lmdb
from langgraph_checkpoint_lmdb import LMDBSaver

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def lmdb_saver(cls=LMDBSaver):
    path = os.path.join(WORKDIR, "lmdb")
    os.makedirs(path, exist_ok=True)
    return cls(lmdb.open(path, max_dbs=4, map_size=1 << 28))


SCRIPT = ScriptStore(functions=(lmdb_saver,), build="lmdb_saver",
                     distributions=("langgraph-checkpoint-lmdb", "lmdb"))
