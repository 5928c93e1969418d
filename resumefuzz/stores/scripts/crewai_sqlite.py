"""``sqlite_persistence``'s store in a reproduction script: CrewAI's own ``SQLiteFlowPersistence``
on ``flows.db`` in the script's directory, as the factory opens it."""

import os

from crewai.flow.persistence import SQLiteFlowPersistence

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def sqlite_persistence(cls=SQLiteFlowPersistence):
    return cls(os.path.join(WORKDIR, "flows.db"))


SCRIPT = ScriptStore(functions=(sqlite_persistence,), build="sqlite_persistence")
