"""Production's Celery broker: kombu's Redis transport, with one fix so a worker outlives a Redis restart.

When a Celery 5.7 worker loses the broker, its consumer first collects the connection (which drops the
transport's reference to its kombu ``Connection``) and then closes it. Closing the channel restores the
worker's unacknowledged messages (the countdown audits it holds), which needs that reference to build a
Redis client: ``AttributeError: 'NoneType' object has no attribute 'hostname'`` escapes, and the worker
exits with "Unrecoverable error" instead of reconnecting. ``benchmarks/soak.py`` (which restarts Redis
under load) saw it in about one run in four.

Here the restore is skipped once the reference is gone. Nothing is lost by skipping it: the broker was
unreachable, so the restore could not have run anyway; the messages stay in Redis's unacked hash, from
which kombu puts them back in the queue after the visibility timeout (or Redis restarted empty), and the
audit sweep re-schedules every campaign whose audit is behind its labels within seconds.
"""

from kombu.transport import redis as kombu_redis


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client=None):
        if client is None and self.channel.connection.client is None:
            self._delivered.clear()
            return
        super().restore_unacked(client)


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel
