"""The session engine (``SESSION_ENGINE``): Django's database sessions, read with one hand-written
statement (``annotation.rows``), since every page a signed-in worker opens reads its session."""

from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from annotation.rows import Columns, datetime_param, fetch, table

_SESSION = Columns(Session, "s")


class SessionStore(db.SessionStore):
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
