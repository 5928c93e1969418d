"""Side by side with LangGraph's own tool: run ``langgraph-checkpoint-conformance``'s
``validate()`` on every LangGraph saver resumefuzz fuzzes, and record what it reports.

    python -m resumefuzz.stores.conformance [NAME ...] [--out DIR]  # DIR/<NAME>.json

The suite drives the savers' *async* methods (``aput``, ``aget_tuple``... its
``capabilities.py`` maps every capability to one), so each saver is given in its async form
where its package has one; a sync-only saver is validated as it is, and the suite then reports
what it detects on it.  Servers: as the factories (``RESUMEFUZZ_PG_DSN``, MariaDB on 3306,
Redis on 6379).  docs/stores.md puts the results next to resumefuzz's findings.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from importlib import metadata
from pathlib import Path

OUT = Path("conformance")


async def _memory():
    from langgraph.checkpoint.memory import InMemorySaver

    yield InMemorySaver()


async def _sqlite_sync():
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory() as d, SqliteSaver.from_conn_string(f"{d}/c.sqlite") as s:
        yield s


async def _sqlite_async():
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    with tempfile.TemporaryDirectory() as d:
        async with AsyncSqliteSaver.from_conn_string(f"{d}/c.sqlite") as s:
            yield s


async def _postgres_async():
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from adapters.langgraph.store import admin_execute, drop_database, dsn_for

    db = f"rf_conf_{uuid.uuid4().hex[:12]}"
    admin_execute(f'CREATE DATABASE "{db}"')
    try:
        async with AsyncPostgresSaver.from_conn_string(dsn_for(db)) as s:
            await s.setup()
            yield s
    finally:
        drop_database(db)


async def _mysql_sync():
    import pymysql
    from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

    from .langgraph_mysql import _admin, _params

    db = f"rf_conf_{uuid.uuid4().hex[:12]}"
    _admin((f"CREATE DATABASE `{db}`", None))
    conn = pymysql.connect(**_params(db), autocommit=True)
    try:
        s = PyMySQLSaver(conn)
        s.setup()
        yield s
    finally:
        conn.close()
        _admin((f"DROP DATABASE IF EXISTS `{db}`", None))


async def _redis_async():
    import redis.asyncio as aredis
    from langgraph_checkpoint_plainredis import AsyncRedisSaver

    from .langgraph_plainredis import DEFAULT_URL, _cleanup

    prefix = f"rf:conf{uuid.uuid4().hex[:12]}"
    client = aredis.Redis.from_url(DEFAULT_URL)
    try:
        yield AsyncRedisSaver(client, prefix=prefix)
    finally:
        await client.aclose()
        _cleanup(prefix)


async def _lmdb_async():
    from langgraph_checkpoint_lmdb import AsyncLMDBSaver

    from .langgraph_lmdb import _open

    with tempfile.TemporaryDirectory() as d:
        env = _open(Path(d) / "lmdb")
        try:
            yield AsyncLMDBSaver(env)
        finally:
            env.close()


#: name -> (factory, distribution, what is validated)
SAVERS = {
    "memory": (_memory, "langgraph-checkpoint", "InMemorySaver"),
    "sqlite": (_sqlite_sync, "langgraph-checkpoint-sqlite", "SqliteSaver (sync only)"),
    "asyncsqlite": (_sqlite_async, "langgraph-checkpoint-sqlite", "AsyncSqliteSaver"),
    "postgres": (_postgres_async, "langgraph-checkpoint-postgres", "AsyncPostgresSaver"),
    "mysql": (_mysql_sync, "langgraph-checkpoint-mysql", "PyMySQLSaver (sync only)"),
    "plainredis": (_redis_async, "langgraph-checkpoint-plainredis", "AsyncRedisSaver"),
    "lmdb": (_lmdb_async, "langgraph-checkpoint-lmdb", "AsyncLMDBSaver"),
}


async def run(name: str) -> dict:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    factory, dist, what = SAVERS[name]
    registered = checkpointer_test(name=what)(factory)
    try:
        report = (await validate(registered)).to_dict()
    except Exception as exc:  # noqa: BLE001 - the suite itself could not run: say so
        report = {"checkpointer_name": what, "conformance_level": "ERROR",
                  "error": f"{type(exc).__name__}: {exc}", "results": {}}
    report["saver"] = name
    report["versions"] = {d: _version(d) for d in (dist, "langgraph-checkpoint-conformance",
                                                   "langgraph", "langgraph-checkpoint")}
    return report


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def summary(report: dict) -> str:
    res = report.get("results", {})
    detected = [c for c, r in res.items() if r["detected"]]
    failed = [f"{c} ({r['tests_failed']} failed)" for c, r in res.items()
              if r["detected"] and r["passed"] is False]
    line = (f"{report['conformance_level']}: {len(detected)} capabilities detected"
            f"{', failed: ' + '; '.join(failed) if failed else ', all passed'}")
    return report.get("error", line)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m resumefuzz.stores.conformance",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(SAVERS))
    parser.add_argument("--out", default=str(OUT), metavar="DIR",
                        help="where the reports go (default conformance/)")
    args = parser.parse_args(argv)
    names = args.names or list(SAVERS)
    unknown = [n for n in names if n not in SAVERS]
    if unknown:
        print(f"conformance: unknown saver {unknown[0]!r}; expected: {', '.join(SAVERS)}",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        report = asyncio.run(run(name))
        (out / f"{name}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        print(f"{name}: {summary(report)}")
    return 0 if all(n in SAVERS for n in names) else 1


if __name__ == "__main__":
    sys.exit(main())
