"""Chorus settings.

The embedded default (no environment variables) runs on SQLite in ./var with a Celery broker that
needs no server (kombu's SQLAlchemy transport over a SQLite file, config/broker.py), so a newcomer
needs neither PostgreSQL nor Redis.
Production configuration comes from environment variables; README "Configuration" lists them.
"""

import os
from decimal import Decimal
from pathlib import Path

import dj_database_url

from config import broker

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CHORUS_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG", "DJANGO_SECRET_KEY" not in os.environ)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "chorus-insecure-development-key-do-not-use-in-production")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # the API docs' Swagger UI files, served by us instead of a CDN
    "annotation",
    "annotation.channels",
    "annotation.webhooks",
    "audits",
]

# Django's database sessions (cached in Redis where it is set), read with one hand-written statement
# (annotation/sessions.py).
SESSION_ENGINE = "annotation.sessions"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.csp.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "annotation.api.auth.TokenDownloadMiddleware",
    "annotation.services.activity.ActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotation.permissions.may_edit_context",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------
# SQLite is tuned for many concurrent web processes: WAL lets readers run beside the writer, and
# IMMEDIATE transactions take the write lock up front, so two writers never deadlock on a lock
# upgrade; the timeout makes a writer wait for the lock instead of failing.
# CHORUS_SQLITE_PATH moves the database file out of CHORUS_VAR_DIR (the tests point the processes
# they start at the test database with it).
SQLITE_PATH = Path(os.environ.get("CHORUS_SQLITE_PATH", VAR_DIR / "chorus.sqlite3"))
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery, cache --------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
if not CELERY_BROKER_URL:
    # The embedded default: a SQLite file beside the database, no server (config/broker.py says why).
    CELERY_BROKER_URL = broker.broker_url(VAR_DIR / "broker.sqlite3")
    CELERY_BROKER_TRANSPORT = broker.TRANSPORT
    CELERY_BROKER_TRANSPORT_OPTIONS = broker.TRANSPORT_OPTIONS
    # Remote control and events need a fanout exchange, which the SQL transport does not have.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
else:
    # Label submission must never wait on the broker. Socket timeouts bound a hung (not dead) Redis,
    # which otherwise blocks a publish forever. No "max_retries": 0 here: it makes a worker that holds
    # unacknowledged (e.g. countdown) messages crash for good when Redis restarts ("Unrecoverable
    # error ... 'NoneType' object has no attribute 'hostname'"). Fail-fast publishing is asked for per
    # call instead (audits.services.audit_schedule_recompute: max_retries=0, retry=False).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 1, "socket_connect_timeout": 1}
    CELERY_BROKER_CONNECTION_TIMEOUT = 1
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        # kombu's Redis transport, fixed so a worker survives a Redis restart (config/redis_broker.py).
        CELERY_BROKER_TRANSPORT = "config.redis_broker:Transport"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    # Approve/reject MTurk assignments, pay bonuses, refill, extend or expire HITs (annotation.channels).
    "mturk-reconcile": {
        "task": "annotation.channels.tasks.mturk_reconcile_task",
        "schedule": int(os.environ.get("CHORUS_MTURK_RECONCILE_SECONDS", 300)),
    },
    # Heal what a lost Prolific hook missed: submissions, places, the study's state (annotation.channels).
    "prolific-reconcile": {
        "task": "annotation.channels.tasks.prolific_reconcile_task",
        "schedule": int(os.environ.get("CHORUS_PROLIFIC_RECONCILE_SECONDS", 300)),
    },
    # Find each campaign's new events (completed prompts, worker actions, thresholds) for outbound webhooks.
    "webhooks-scan": {
        "task": "annotation.webhooks.tasks.webhooks_scan_task",
        "schedule": float(os.environ.get("CHORUS_WEBHOOK_SCAN_SECONDS", 5)),
    },
    # Schedule every campaign whose audit is behind its labels (heals lost enqueues, broker outages).
    "audit-sweep": {"task": "audits.sweep", "schedule": float(os.environ.get("CHORUS_AUDIT_SWEEP_SECONDS", 15))},
}
# Embedded beat (celery worker -B) and celery beat keep their schedule state here, not in the cwd.
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Live audits (audits.conf.DEFAULTS lists every key and its meaning).
CHORUS_AUDIT = {
    name: float(os.environ[f"CHORUS_AUDIT_{name}"])
    for name in (
        "COUNTDOWN",
        "PENDING_TTL",
        "FULL_TTL",
        "RETRY_AFTER",
        "FULL_EVERY_LABELS",
        "FULL_GROWTH",
        "FULL_MAX_AGE",
        "FULL_MIN_INTERVAL",
        "FULL_DUTY",
        "HISTORY_RESOLUTION",
        "STALE_AFTER",
    )
    if os.environ.get(f"CHORUS_AUDIT_{name}")
}

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "config.redis_cache.RedisCache",  # Django's, one client handle per pool
            "LOCATION": REDIS_URL,
            # A hung Redis must not hold up a label submission (audit debouncing uses the cache).
            "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
    }
else:
    # Shared by every process of the embedded default (web, Celery worker); add() is atomic there.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "chorus_cache"}}

# --- Auth, i18n, static ---------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "annotation.throttling.ThrottledModelBackend",
    # Never reached by authenticate() (the throttled backend decides every attempt); listed so that
    # sessions opened with login(..., backend=ModelBackend) stay valid.
    "django.contrib.auth.backends.ModelBackend",
]
CHORUS_LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("CHORUS_LOGIN_FAILURES_PER_ACCOUNT", 10))
CHORUS_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("CHORUS_LOGIN_FAILURES_PER_ADDRESS", 50))
CHORUS_LOGIN_FAILURE_WINDOW = int(os.environ.get("CHORUS_LOGIN_FAILURE_WINDOW", 15 * 60))
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # filled by collectstatic; WhiteNoise serves it

# --- Chorus ---------------------------------------------------------------------------------------
CHORUS_MAX_IMPORT_BYTES = int(os.environ.get("CHORUS_MAX_IMPORT_BYTES", 20 * 1024 * 1024))
# Seconds an unused invitation link (campaign page → one person) stays valid; a used one keeps working
# for the person it is bound to.
CHORUS_INVITATION_MAX_AGE = int(os.environ.get("CHORUS_INVITATION_MAX_AGE", 14 * 24 * 3600))
DATA_UPLOAD_MAX_MEMORY_SIZE = CHORUS_MAX_IMPORT_BYTES + 1024 * 1024
# The task page posts one field per answer option, and a prompt may have up to 1,023 of them
# (annotation.models.prompts.MAX_OPTIONS); Django's default of 1,000 fields would refuse the largest.
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1100

# Publishing channels (annotation.channels). MTurk credentials are read from the environment by the
# backend itself (CHORUS_MTURK_ACCESS_KEY_ID / CHORUS_MTURK_SECRET_ACCESS_KEY, else boto3's default
# chain) and never pass through settings. The sandbox is the default: real money needs
# CHORUS_MTURK_SANDBOX=0. CHORUS_PUBLIC_URL is Chorus's https:// address, where MTurk opens task pages.
CHORUS_PUBLIC_URL = os.environ.get("CHORUS_PUBLIC_URL", "")
CHORUS_CHANNELS = {
    "mturk": {
        "BACKEND": "annotation.channels.mturk.MTurkChannel",
        "OPTIONS": {
            "sandbox": env_bool("CHORUS_MTURK_SANDBOX", True),
            "endpoint_url": os.environ.get("CHORUS_MTURK_ENDPOINT_URL", ""),
            "max_attempts": int(os.environ.get("CHORUS_MTURK_MAX_ATTEMPTS", 8)),
        },
    },
}
# Prolific (annotation.channels.services.prolific): the deployment's researcher token, never logged or
# shown; researchers may save their own on the channels page instead.
CHORUS_PROLIFIC_API_URL = os.environ.get("CHORUS_PROLIFIC_API_URL", "https://api.prolific.com/api/v1/")
CHORUS_PROLIFIC_TOKEN = os.environ.get("CHORUS_PROLIFIC_TOKEN", "")
CHORUS_PROLIFIC_COMPLETION_URL = os.environ.get(
    "CHORUS_PROLIFIC_COMPLETION_URL", "https://app.prolific.com/submissions/complete"
)
CHORUS_MAX_BONUS = Decimal(os.environ.get("CHORUS_MAX_BONUS", "10.00"))
# Prolific's minimum hourly pay (GBP); the publishing form warns below it.
CHORUS_PROLIFIC_MIN_HOURLY = Decimal(os.environ.get("CHORUS_PROLIFIC_MIN_HOURLY", "6.00"))
# Outbound webhooks refuse targets on loopback, private or link-local addresses unless this is set
# (development, tests).
CHORUS_WEBHOOKS_ALLOW_PRIVATE = env_bool("CHORUS_WEBHOOKS_ALLOW_PRIVATE", False)
FILE_UPLOAD_MAX_MEMORY_SIZE = CHORUS_MAX_IMPORT_BYTES + 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "annotation.api.schema.ChorusAutoSchema",
    # Token first, so an anonymous API call gets 401 with a WWW-Authenticate challenge, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotation.api.authentication.WorkerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "annotation.api.exceptions.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "annotation.api.parsers.BoundedJSONParser",
        "annotation.api.parsers.BoundedFormParser",
        "annotation.api.parsers.BoundedMultiPartParser",
    ],
    "DEFAULT_THROTTLE_RATES": {"auth": os.environ.get("CHORUS_AUTH_THROTTLE_RATE", "30/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Chorus API",
    "VERSION": "1.0.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    # No badge from validator.swagger.io: the docs page talks to no other site.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Three models have a choice field named kind or action: one enum name each in the schema.
    "ENUM_NAME_OVERRIDES": {
        "WorkerActionKindEnum": "annotation.models.worker_actions.WorkerAction.Kind",
        "QualityRuleActionEnum": "annotation.models.worker_actions.QualityRule.Action",
        "AuditSnapshotKindEnum": "audits.models.AuditSnapshot.Kind",
        "GroundTruthRunStatusEnum": "audits.models.GroundTruthRun.Status",
        "BootstrapRunStatusEnum": "audits.models.BootstrapRun.Status",
        "ClusteringRoleEnum": "audits.models.AnswerClustering.Role",
        "ClusteringSaveRoleEnum": ["independent", "adjudicated"],
    },
}

# --- Security -------------------------------------------------------------------------------------
# Our pages load scripts and styles from our own origin only, and no inline script or style.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
if not DEBUG:
    # Production (DJANGO_SECRET_KEY set): HTTPS only. Behind a TLS-terminating proxy, set
    # DJANGO_SECURE_PROXY_SSL_HEADER=1 so the proxy's X-Forwarded-Proto is trusted.
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", 365 * 24 * 3600))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", True)
    if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
