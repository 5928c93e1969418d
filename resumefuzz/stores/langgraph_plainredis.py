"""``langgraph-checkpoint-plainredis`` (``RedisSaver`` / ``AsyncRedisSaver``) on a Redis server:
one key prefix per case, ``rf:<store_id>``.

Server: ``RESUMEFUZZ_STORE_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).  Clone: every key of
the prefix copied with DUMP/RESTORE under the clone's prefix (the thread registry's field names
embed the prefix and are renamed too).  Tamper(corrupt): the checkpoint payload and its pending
writes become 0xc1 bytes; the saver lists a thread by decoding every payload of it, so every
fork sharing the LangGraph thread sees the damage (``tamper_scope="lineage"``).
"""

from __future__ import annotations

import os

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import GARBAGE

URL_ENV = "RESUMEFUZZ_STORE_REDIS_URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def _client():
    import redis

    return redis.Redis.from_url(os.environ.get(URL_ENV) or DEFAULT_URL)


def _prefix(ctx: StoreContext) -> str:
    return f"rf:{ctx.store_id}"


def _keys(client, prefix: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{prefix}:*", count=500))


def _clone(src: str, dest: StoreContext) -> None:
    client, new = _client(), _prefix(dest)
    try:
        for key in _keys(client, src):
            renamed = new + key.decode()[len(src):]
            if key.decode() == f"{src}:threads":
                fields = client.hgetall(key)
                if fields:
                    client.hset(renamed, mapping={new + f.decode()[len(src):]: v
                                                  for f, v in fields.items()})
                continue
            client.restore(renamed, 0, client.dump(key), replace=True)
    finally:
        client.close()


def _corrupt(prefix: str, target: TamperTarget) -> str:
    client = _client()
    try:
        key = f"{prefix}:cp:{target.thread_id}::{target.checkpoint_id}"
        found = client.exists(key)
        if found:
            client.set(key, GARBAGE)
        wr = f"{prefix}:wr:{target.thread_id}::{target.checkpoint_id}"
        fields = list(client.hkeys(wr))
        if fields:
            client.hset(wr, mapping={f: GARBAGE for f in fields})
    finally:
        client.close()
    return (f"checkpoint {target.checkpoint_id}: payload {'overwritten' if found else 'absent'}, "
            f"{len(fields)} pending write(s) overwritten with 0xc1 bytes")


def _cleanup(prefix: str) -> None:
    client = _client()
    try:
        keys = _keys(client, prefix)
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _handle(ctx: StoreContext, saver, close) -> StoreHandle:
    prefix = _prefix(ctx)
    return StoreHandle(
        store=saver,
        clone=lambda dest: _clone(prefix, dest),
        tamper=lambda target: _corrupt(prefix, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="lineage",
        close=close,
        cleanup=lambda: _cleanup(prefix),
    )


def redis_saver(ctx: StoreContext) -> StoreHandle:
    from langgraph_checkpoint_plainredis import RedisSaver

    client = _client()
    return _handle(ctx, RedisSaver(client, prefix=_prefix(ctx)), client.close)


redis_saver.store_name = "plainredis"
redis_saver.store_distribution = "langgraph-checkpoint-plainredis"
redis_saver.store_script = "resumefuzz.stores.scripts.langgraph_plainredis:SCRIPT"  # its scripts' store


async def async_redis_saver(ctx: StoreContext) -> StoreHandle:
    import redis.asyncio as aredis
    from langgraph_checkpoint_plainredis import AsyncRedisSaver

    client = aredis.Redis.from_url(os.environ.get(URL_ENV) or DEFAULT_URL)
    return _handle(ctx, AsyncRedisSaver(client, prefix=_prefix(ctx)), client.aclose)


async_redis_saver.store_name = "plainredisasync"
async_redis_saver.store_distribution = "langgraph-checkpoint-plainredis"
async_redis_saver.store_script = "resumefuzz.stores.scripts.langgraph_plainredis:ASYNC_SCRIPT"  # its scripts' store
