"""Django's Redis cache backend, keeping one ``redis.Redis`` handle per connection pool.

Django's client builds a new ``redis.Redis`` object for every cache call; its constructor was about 8 %
of a label's CPU on the API (``benchmarks/cycle_cost.py --profile``: every submit debounces the live
audit with one ``cache.add``). The handle holds no connection of its own (each command borrows one
from the pool, which Django already keeps per process) and redis-py's handles may be shared between
threads, so one per pool is enough.
"""

from django.core.cache.backends import redis


class RedisCacheClient(redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._handles = {}  # by pool (Django keeps its pools for the life of the process)

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        handle = self._handles.get(pool)
        if handle is None:
            handle = self._handles[pool] = self._client(connection_pool=pool)
        return handle


class RedisCache(redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
