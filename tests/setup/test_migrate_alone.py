"""Every documented way to set Chorus up gives a working sign-in: ``manage.py migrate`` alone included.

The embedded default's cache is a database cache (audit debouncing, the sign-in throttle). The test
database pytest-django builds gets its cache table from Django's test runner, which would hide a
missing one, so this test sets up a fresh embedded default in its own folder, in other processes,
exactly as a user would.
"""

import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]

SIGN_IN = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
get_user_model().objects.create_user("newcomer", password="a-long-password-1")
response = Client(HTTP_HOST="localhost").post(
    "/accounts/login/", {"username": "newcomer", "password": "a-long-password-1"}
)
print(response.status_code, response.headers.get("Location"))
"""


def test_sign_in_works_after_migrate_alone(tmp_path):
    env = {**os.environ, "CHORUS_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CHORUS_SQLITE_PATH"):
        env.pop(name, None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=BASE_DIR, env=env, check=True)
    result = subprocess.run(
        [sys.executable, "-c", SIGN_IN], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["302", "/"], result.stdout
