"""Settings for the test suite (pytest.ini): the production settings, and what only tests need.

Processes the tests start (a Celery worker, gunicorn, ``manage.py demo``) run on ``config.settings``
and are pointed at the test database through the environment (``DATABASE_URL`` or
``CHORUS_SQLITE_PATH``), as a deployment would be.
"""

import os

from config.settings import *  # noqa: F403 (this module is the production settings plus the lines below)
from config.settings import DATABASES, VAR_DIR

# Parallel test runs on one machine (CI beside a developer, helpers) keep apart by this suffix.
_suffix = os.environ.get("CHORUS_TEST_DB_SUFFIX", "")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so threads and processes in tests share one database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_chorus{_suffix}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_chorus{_suffix}"}

# Django's test client sends this host name.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]  # noqa: F405
