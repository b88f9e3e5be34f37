"""The session engine (``SESSION_ENGINE``): Django's database sessions, read with one hand-written
statement (``annotation.rows``), since every page a signed-in worker opens reads its session.

With Redis (production), Django's cached sessions: every page reads its session from Redis, and the
database only when Redis has forgotten it; every write goes to both (Django's ``cached_db``, so a
signed-out session is gone from both at once). The embedded default's cache is the database itself,
where that would read twice, so it reads the database alone.
"""

from django.conf import settings
from django.contrib.sessions.backends import cached_db, db
from django.contrib.sessions.models import Session
from django.utils import timezone

from annotation.rows import Columns, datetime_param, fetch, table

_SESSION = Columns(Session, "s")


class _HandWrittenRead:
    def _get_session_from_db(self):
        """As Django's: the unexpired session of this key, or None (and the key forgotten)."""
        rows = fetch(
            f"SELECT {_SESSION.sql} FROM {table(Session)} s WHERE s.session_key = %s AND s.expire_date > %s",
            [self.session_key, datetime_param(timezone.now())],
        )
        if not rows:
            self._session_key = None
            return None
        return _SESSION.load(rows[0])


class DatabaseSessionStore(_HandWrittenRead, db.SessionStore):
    pass


class CachedSessionStore(_HandWrittenRead, cached_db.SessionStore):
    pass


SessionStore = CachedSessionStore if settings.REDIS_URL else DatabaseSessionStore
