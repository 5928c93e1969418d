"""``redis_saver``'s and ``async_redis_saver``'s stores in a reproduction script: a
``RedisSaver`` (``AsyncRedisSaver``) on the Redis server at 127.0.0.1:6379, under a key prefix of
the script's own, whose keys are deleted when the script exits."""

import atexit
import os

import redis
import redis.asyncio
from langgraph_checkpoint_plainredis import AsyncRedisSaver, RedisSaver

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def delete_keys_at_exit():
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    atexit.register(lambda: [client.delete(key) for key in
                             client.scan_iter(f"repro:{os.path.basename(WORKDIR)}:*")])


def redis_saver(cls=RedisSaver):
    return cls(redis.Redis.from_url("redis://127.0.0.1:6379/0"),
               prefix=f"repro:{os.path.basename(WORKDIR)}")


def async_redis_saver(cls=AsyncRedisSaver):
    return cls(redis.asyncio.Redis.from_url("redis://127.0.0.1:6379/0"),
               prefix=f"repro:{os.path.basename(WORKDIR)}")


SCRIPT = ScriptStore(functions=(delete_keys_at_exit, redis_saver), build="redis_saver",
                     setup=("delete_keys_at_exit()",),
                     distributions=("langgraph-checkpoint-plainredis", "redis"))
ASYNC_SCRIPT = ScriptStore(functions=(delete_keys_at_exit, async_redis_saver),
                           build="async_redis_saver", setup=("delete_keys_at_exit()",),
                           distributions=("langgraph-checkpoint-plainredis", "redis"))
