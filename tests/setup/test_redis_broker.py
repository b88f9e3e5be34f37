"""The Redis broker transport (config/redis_broker.py) survives the way a Celery 5.7 consumer drops a
connection to a Redis that has gone away: ``collect()``, then ``close()``, with an unacknowledged
message still held (as a worker holds a countdown audit)."""

import shutil
import subprocess
import uuid

import pytest
from kombu import Connection, Exchange, Queue

from benchmarks.stack import free_port, redis_server_argv

pytestmark = pytest.mark.services


@pytest.fixture
def redis_server(tmp_path):
    """A private redis-server, so the test can kill it; yields (URL, the process)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (bin/test needs it for the live tests anyway)")
    port = free_port()
    process = subprocess.Popen(
        redis_server_argv(port, tmp_path),
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            subprocess.run(["sleep", "0.05"])
    yield url, process
    process.kill()
    process.wait()


def lose_redis_holding_a_message(url: str, process: subprocess.Popen, transport: str) -> Connection:
    """A connection holding one unacknowledged message when its Redis dies."""
    connection = Connection(url, transport=transport, transport_options={"socket_timeout": 1})
    queue = Queue(f"chorus-test-{uuid.uuid4().hex[:8]}", Exchange("chorus-test", "direct"), routing_key="k")
    channel = connection.default_channel
    connection.Producer(channel).publish({"n": 1}, exchange=queue.exchange, routing_key="k", declare=[queue])
    assert queue(channel).get(no_ack=False) is not None
    assert channel.qos._delivered, "the channel holds an unacknowledged message"
    process.kill()
    process.wait()
    return connection


def drop_like_the_consumer(connection: Connection) -> None:
    """What Celery 5.7's consumer leaves when ``collect()`` gives up on the channel (a socket timeout on
    the dead Redis, which ``collect`` swallows) and drops the transport; then its ``close()``."""
    connection._do_close_transport()
    connection.close()


def test_kombus_own_transport_fails_this_way(redis_server):
    """The failure the fix is for (when kombu mends it, this test says so and the fix can go)."""
    connection = lose_redis_holding_a_message(*redis_server, "redis")
    with pytest.raises(AttributeError, match="hostname"):
        drop_like_the_consumer(connection)


def test_chorus_transport_closes_cleanly(redis_server):
    connection = lose_redis_holding_a_message(*redis_server, "config.redis_broker:Transport")
    channel = connection.default_channel
    drop_like_the_consumer(connection)
    assert channel.closed and not channel.qos._delivered
