"""The embedded default's Celery broker: kombu's SQLAlchemy transport over a SQLite file in ``var/``.

Why this transport: the embedded default must run a real Celery worker with no Redis or other server.
kombu's filesystem transport, used before, writes each message to a file that its consumer may read
while the publisher is still writing it; the worker then dies with "Unrecoverable error:
JSONDecodeError" (kombu issue 1551). A row insert is atomic: a consumer sees a whole message or none.
kombu's own SQLAlchemy transport does the queueing; this subclass only fits it to SQLite:

- WAL and a busy timeout, so the web processes that publish and the worker that polls wait for one
  another's short write transactions instead of failing with "database is locked";
- a delivered message is deleted rather than hidden: kombu never reads a hidden row again (an
  unacknowledged message is put back as a new row when a worker shuts down cleanly), so hidden rows
  would only grow the file for as long as Chorus runs;
- a short polling interval, since freshness of the live audit is bounded by it.

Production uses Redis (``REDIS_URL`` or ``CELERY_BROKER_URL``) and never loads this module.
"""

from json import loads
from queue import Empty

from kombu.transport import sqlalchemy as kombu_sqlalchemy
from kombu.utils.encoding import bytes_to_str
from sqlalchemy import event, text

# Seconds a publisher or the worker waits for the other's write lock (held for a row insert or delete)
# before giving up, like the Redis broker's socket timeout: a label's request never waits longer on the
# broker. A publish that gives up is logged and healed by the audit sweep; a worker whose poll gives up
# reconnects.
BUSY_TIMEOUT = 1


def _sqlite_pragmas(dbapi_connection, connection_record):
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class Channel(kombu_sqlalchemy.Channel):
    def _engine_from_config(self):
        engine = super()._engine_from_config()
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine

    def _get(self, queue):
        """Take the oldest message of ``queue`` and delete its row, in one IMMEDIATE transaction
        (the write lock is taken before the read, so two consumers never take the same row)."""
        queue_row = self._get_or_create(queue)
        session = self.session
        session.execute(text("BEGIN IMMEDIATE TRANSACTION"))
        try:
            message = (
                session.query(self.message_cls)
                .filter(self.message_cls.queue_id == queue_row.id, self.message_cls.visible != False)  # noqa: E712
                .order_by(self.message_cls.id)
                .first()
            )
            if message is None:
                raise Empty()
            payload = loads(bytes_to_str(message.payload))
            session.delete(message)
            return payload
        finally:
            session.commit()


class Transport(kombu_sqlalchemy.Transport):
    Channel = Channel
    polling_interval = 0.1  # seconds between polls when every queue is empty


def broker_url(path) -> str:
    """The Celery broker URL of a SQLite broker file at ``path`` (with ``TRANSPORT`` as the transport)."""
    return f"sqlite:///{path}"


TRANSPORT = f"{__name__}:Transport"
TRANSPORT_OPTIONS = {"connect_args": {"timeout": BUSY_TIMEOUT}}
