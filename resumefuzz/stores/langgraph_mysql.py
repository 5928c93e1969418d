"""``langgraph-checkpoint-mysql`` (``PyMySQLSaver``) on a MySQL/MariaDB server: one database
per case, named by ``StoreContext.store_id``.

Server: ``RESUMEFUZZ_MYSQL_DSN`` (default ``mysql://root@127.0.0.1:3306/test``; the factory
creates and drops its own databases there).  Clone: ``CREATE TABLE ... LIKE`` and
``INSERT ... SELECT`` into the clone's database.  Tamper(corrupt): the checkpoint's channel
blobs and its pending writes become bytes msgpack never decodes.  Blobs are keyed by thread and
channel version, so every fork sharing the LangGraph thread sees the damage
(``tamper_scope="lineage"``).
"""

from __future__ import annotations

import json
import os

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import GARBAGE

DSN_ENV = "RESUMEFUZZ_MYSQL_DSN"
DEFAULT_DSN = "mysql://root@127.0.0.1:3306/test"
TABLES = ("checkpoint_migrations", "checkpoints", "checkpoint_blobs", "checkpoint_writes")


def _params(database: str | None = None) -> dict:
    from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

    params = PyMySQLSaver.parse_conn_string(os.environ.get(DSN_ENV) or DEFAULT_DSN)
    if database is not None:
        params["database"] = database
    return params


def _admin(*statements) -> None:
    import pymysql

    conn = pymysql.connect(**_params(), autocommit=True)
    try:
        with conn.cursor() as cur:
            for sql, args in statements:
                cur.execute(sql, args)
    finally:
        conn.close()


def _clone(src: str, dest: StoreContext) -> None:
    db = dest.store_id
    _admin((f"CREATE DATABASE IF NOT EXISTS `{db}`", None),
           *[(f"CREATE TABLE `{db}`.`{t}` LIKE `{src}`.`{t}`", None) for t in TABLES],
           *[(f"INSERT INTO `{db}`.`{t}` SELECT * FROM `{src}`.`{t}`", None) for t in TABLES])


def _corrupt(db: str, target: TamperTarget) -> str:
    import pymysql

    conn = pymysql.connect(**_params(db), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT checkpoint FROM checkpoints WHERE thread_id=%s AND "
                        "checkpoint_ns='' AND checkpoint_id=%s",
                        (target.thread_id, target.checkpoint_id))
            row = cur.fetchone()
            stored = json.loads(row[0]) if row else {}
            blobs = 0
            for channel, version in (stored.get("channel_versions") or {}).items():
                blobs += cur.execute(
                    "UPDATE checkpoint_blobs SET `blob`=%s WHERE thread_id=%s AND "
                    "checkpoint_ns='' AND channel=%s AND version=%s AND type<>'empty'",
                    (GARBAGE, target.thread_id, channel, str(version)))
            writes = cur.execute(
                "UPDATE checkpoint_writes SET `blob`=%s WHERE thread_id=%s AND checkpoint_ns='' "
                "AND checkpoint_id=%s AND type='msgpack'",
                (GARBAGE, target.thread_id, target.checkpoint_id))
    finally:
        conn.close()
    return (f"checkpoint {target.checkpoint_id}: {blobs} channel blob(s) and {writes} pending "
            "write(s) overwritten with 0xc1 bytes")


def mysql_saver(ctx: StoreContext) -> StoreHandle:
    import pymysql
    from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

    db = ctx.store_id
    _admin((f"CREATE DATABASE IF NOT EXISTS `{db}`", None))
    # As PyMySQLSaver.from_conn_string opens it (autocommit), without the context manager.
    conn = pymysql.connect(**_params(db), autocommit=True)
    saver = PyMySQLSaver(conn)
    saver.setup()
    return StoreHandle(
        store=saver,
        clone=lambda dest: _clone(db, dest),
        tamper=lambda target: _corrupt(db, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="lineage",
        close=conn.close,
        # A worker killed during a statement (its CREATE DATABASE, the saver's migrations)
        # leaves it running on the server, holding the schema's metadata lock, and this DROP
        # waits for it: nothing is created after the drop, unlike PostgreSQL's CREATE DATABASE
        # (adapters/langgraph/store.py, drop_database).  Probed: a killed client's 3-second
        # CREATE TABLE ... AS SELECT SLEEP(3); the DROP waited 2.5 s and left nothing.
        cleanup=lambda: _admin((f"DROP DATABASE IF EXISTS `{db}`", None)),
    )


mysql_saver.store_name = "mysql"
mysql_saver.store_distribution = "langgraph-checkpoint-mysql"
mysql_saver.store_script = "resumefuzz.stores.scripts.langgraph_mysql:SCRIPT"  # its scripts' store
