"""``crewai-persistence-sql`` (``SQLFlowPersistence``, SQLAlchemy) on PostgreSQL and on MariaDB:
one table per case, named by ``StoreContext.store_id``, in the server's test database.

Servers (SQLAlchemy URLs): ``RESUMEFUZZ_CREWAI_PG_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``) and ``RESUMEFUZZ_CREWAI_MYSQL_URL``
(default ``mysql+pymysql://root@127.0.0.1:3306/test``).  ``SQLFlowPersistence(url,
table_name=...)`` creates its table (``flow_uuid`` primary key, ``data`` text: the latest state
as JSON; each save upserts).

Clone: a table of the same shape, filled with ``INSERT ... SELECT``.  Tamper(corrupt): the flow's
``data`` cut in half (no JSON decoder accepts it).  One row per flow id
(``tamper_scope="thread"``).  Cleanup: ``DROP TABLE``.
"""

from __future__ import annotations

import os

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

PG_ENV, PG_DEFAULT = "RESUMEFUZZ_CREWAI_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MYSQL_ENV, MYSQL_DEFAULT = "RESUMEFUZZ_CREWAI_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"


def _quote(engine, name: str) -> str:
    return engine.dialect.identifier_preparer.quote(name)


def _clone(engine, src: str, dest: StoreContext) -> None:
    from crewai_persistence_sql import SQLFlowPersistence
    from sqlalchemy import text

    SQLFlowPersistence(engine=engine, table_name=dest.store_id)  # creates the table
    with engine.begin() as conn:
        conn.execute(text(f"DELETE FROM {_quote(engine, dest.store_id)}"))
        conn.execute(text(f"INSERT INTO {_quote(engine, dest.store_id)} (flow_uuid, data) "
                          f"SELECT flow_uuid, data FROM {_quote(engine, src)}"))


def _corrupt(engine, table: str, target: TamperTarget) -> str:
    from sqlalchemy import text

    with engine.begin() as conn:
        row = conn.execute(text(f"SELECT data FROM {_quote(engine, table)} WHERE flow_uuid = :f"),
                           {"f": target.thread_id}).first()
        if row is None:
            return f"flow {target.thread_id}: no row to damage"
        cut = row[0][: max(1, len(row[0]) // 2)]
        conn.execute(text(f"UPDATE {_quote(engine, table)} SET data = :d WHERE flow_uuid = :f"),
                     {"d": cut, "f": target.thread_id})
    return f"flow {target.thread_id}: data cut to {len(cut)} of {len(row[0])} characters"


def _drop(engine, table: str) -> None:
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {_quote(engine, table)}"))


def _handle(ctx: StoreContext, url: str) -> StoreHandle:
    from crewai_persistence_sql import SQLFlowPersistence
    from sqlalchemy import create_engine

    engine = create_engine(url)
    table = ctx.store_id
    return StoreHandle(
        store=SQLFlowPersistence(engine=engine, table_name=table),
        clone=lambda dest: _clone(engine, table, dest),
        tamper=lambda target: _corrupt(engine, table, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="thread",
        close=engine.dispose,
        cleanup=lambda: _drop(engine, table),
    )


def postgres_persistence(ctx: StoreContext) -> StoreHandle:
    return _handle(ctx, os.environ.get(PG_ENV) or PG_DEFAULT)


def mariadb_persistence(ctx: StoreContext) -> StoreHandle:
    return _handle(ctx, os.environ.get(MYSQL_ENV) or MYSQL_DEFAULT)


postgres_persistence.store_name = "sqlpostgres"
mariadb_persistence.store_name = "sqlmariadb"
postgres_persistence.store_distribution = "crewai-persistence-sql"
mariadb_persistence.store_distribution = "crewai-persistence-sql"
postgres_persistence.store_script = "resumefuzz.stores.scripts.crewai_sql:SCRIPT_POSTGRES"  # its scripts' store
mariadb_persistence.store_script = "resumefuzz.stores.scripts.crewai_sql:SCRIPT_MARIADB"  # its scripts' store
