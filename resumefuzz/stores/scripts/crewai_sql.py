"""``postgres_persistence``'s and ``mariadb_persistence``'s stores in a reproduction script: a
``SQLFlowPersistence`` on a SQLAlchemy engine of the server's test database (the factory's
default URLs, ``resumefuzz.stores.crewai_sql``), built as the factory builds it, on a table of
the script's own (named after its ``WORKDIR``; ``SQLFlowPersistence`` creates it), dropped when
the script exits."""

import atexit
import os

from crewai_persistence_sql import SQLFlowPersistence
from sqlalchemy import MetaData, Table, create_engine  # MetaData, Table: for SETUP

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR
from resumefuzz.stores.crewai_sql import MYSQL_DEFAULT, PG_DEFAULT


def sql_persistence(cls=SQLFlowPersistence):
    return cls(engine=create_engine(URL), table_name=TABLE)


# The script's setup, after ``sql_persistence``: the server, the table (named as mkdtemp named
# WORKDIR: SQLAlchemy quotes it) and its DROP when the script exits.
SETUP = ("TABLE = os.path.basename(WORKDIR)  # a table of the script's own",
         "atexit.register(Table(TABLE, MetaData()).drop, create_engine(URL), checkfirst=True)")


def _recipe(url: str, drivers: tuple) -> ScriptStore:
    return ScriptStore(functions=(sql_persistence,), build="sql_persistence",
                       setup=(f"URL = {url!r}", *SETUP),
                       distributions=("crewai-persistence-sql", "sqlalchemy", *drivers))


SCRIPT_POSTGRES = _recipe(PG_DEFAULT, ("psycopg", "psycopg-binary"))
SCRIPT_MARIADB = _recipe(MYSQL_DEFAULT, ("pymysql",))
