"""Settings shared by every mode. Everything a deployment changes comes from the environment (README: Configuration)."""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.utils.csp import CSP

from config.logs import logging_config

from .env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("WAYMARK_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = env_str("WAYMARK_SECRET_KEY", "waymark-insecure-local-key-change-me-in-production-0123456789")
# Django's debug pages only when WAYMARK_DEBUG=1 is set on purpose, in every mode (production.py forces it off).
DEBUG = env_bool("WAYMARK_DEBUG", False)
ALLOWED_HOSTS = env_list("WAYMARK_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("WAYMARK_CSRF_TRUSTED_ORIGINS")
CSRF_FAILURE_VIEW = "config.error_views.csrf_failure"  # the styled 403 page, saying to reload

INSTALLED_APPS = [
    "config.admin_site.WaymarkAdminConfig",  # django.contrib.admin, for admins only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "ninja",  # the API docs page from local static files (no CDN, no inline script: see SECURE_CSP)
    "accounts",
    "trajectories",
    "llm",
    "graphs",
    "procedures",
    "intents",
    "reviews",
    "rubrics",
    "otlp",
    "uplift",
    "dashboard",
]

MIDDLEWARE = [
    # a per-step call's 304 leaves out the 200's browser security headers (config/step_middleware.py)
    "config.step_middleware.LeanNotModifiedMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Django's CSP, WhiteNoise, session, auth, messages and htmx middleware, skipped by the per-step API calls
    # (config/step_api.py), which authenticate with a bearer token and use none of them; their CSP is built once
    # (config/step_middleware.py)
    "config.step_middleware.PreparedPolicyMiddleware",
    "config.step_middleware.BrowserStaticFilesMiddleware",
    "config.step_middleware.BrowserSessionMiddleware",
    "config.middleware.NotModifiedAwareCommonMiddleware",  # no Content-Length on a 304 (RFC 9110 §8.6)
    "django.middleware.csrf.CsrfViewMiddleware",  # by its own name: `check --deploy` looks for it (W003)
    "config.step_middleware.BrowserAuthenticationMiddleware",
    "config.step_middleware.BrowserMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.step_middleware.BrowserHtmxMiddleware",
    "accounts.middleware.RequestIdMiddleware",
    # htmx requests whose session ended get the whole login page (HX-Redirect); a GET of a form's POST-only address
    # redirects to its page, other 405s are the styled page (config/middleware.py)
    "config.middleware.HtmxLoginMiddleware",
    "config.middleware.PageMethodMiddleware",
    "config.middleware.LongUrlMiddleware",
    # a body over DATA_UPLOAD_MAX_MEMORY_SIZE answers 413 before the CSRF check or a view reads it
    # (config/middleware.py)
    "config.middleware.BodyLimitMiddleware",
    "config.middleware.RejectNulMiddleware",
    "config.busy.DatabaseBusyMiddleware",
]

# Content-Security-Policy on every response: scripts only from our own static files (no inline script, no eval;
# JSON islands of type application/json are data, not scripts). Inline styles stay allowed: Mermaid's drawings
# carry their own <style> element.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "accounts:login"

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
                "config.context_processors.waymark",
            ],
        },
    },
]


def _database_from_env() -> dict:
    url = env_str("DATABASE_URL")
    if url:
        return dj_database_url.parse(url, conn_max_age=env_int("WAYMARK_DB_CONN_MAX_AGE", 60))
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": VAR_DIR / "waymark.sqlite3",
        # WAL: readers never wait behind the writer. IMMEDIATE: a write transaction takes the lock when it begins, so
        # writers queue for up to `timeout` seconds (the busy handler) instead of failing on a lock upgrade; a write
        # that still cannot get the lock answers 503 with Retry-After (config/busy.py). docs/operations.md: limits.
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": env_int("WAYMARK_SQLITE_TIMEOUT", 20),
        },
    }


DATABASES = {"default": _database_from_env()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    # The embedded default runs a web and a worker process: a file cache is shared by both.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }
# Worker liveness stamps (common/liveness.py) have an alias of their own: on the embedded default their own folder,
# so that culling the other entries (sessions, counters) never drops a stamp; on Redis the same server.
CACHES["liveness"] = (
    {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "liveness")}
)
WAYMARK_LIVENESS_CACHE = "liveness"

# Sessions read from the cache, written to both (Django's cached_db): a logged-in page reads its session without a
# database query; a session outlives a cache flush (read back from the database).
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
# Django's ModelBackend, with the session's user and roles served from a per-process cache (accounts.session_users).
AUTHENTICATION_BACKENDS = ["accounts.backends.SessionUserBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- Celery -----------------------------------------------------------------------------------------------------
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    # The embedded default: kombu's filesystem transport under var/, no server needed.
    _broker = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "control_folder": str(_broker / "control"),
        "store_processed": False,
        # How long a worker sleeps when it finds no message it can take: with one task in flight (prefetch 1), at
        # most one task per interval moves (kombu's default of 1 s made it about one task a second).
        "polling_interval": float(env_str("WAYMARK_BROKER_POLL_SECONDS", "0.05")),
    }
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = env_int("WAYMARK_TASK_TIME_LIMIT", 15 * 60)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("WAYMARK_TASK_SOFT_TIME_LIMIT", 14 * 60)
CELERY_TASK_ALWAYS_EAGER = env_bool("WAYMARK_TASKS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes every database connection before and after each task unless this is set, so each task
# opened a new connection (a few ms on PostgreSQL, more under load). With it set, the fixup closes them only every this
# many tasks, and config/celery.py gives a task's connections Django's own rules instead, as a request's: around each
# task, close_old_connections() closes one older than CONN_MAX_AGE (WAYMARK_DB_CONN_MAX_AGE; 0, SQLite's and the test
# settings': every task, as before), one left in a transaction and one whose errors it cannot recover from.
CELERY_DB_REUSE_MAX = 1000
CELERY_IMPORTS = ("common.reaper", "config.heartbeat", "common.liveness", "trajectories.jobs")
CELERY_BEAT_SCHEDULE = {
    "reap-stuck-work": {"task": "common.reaper.reap_stuck_work", "schedule": timedelta(minutes=1)},
    "reap-job-leases": {"task": "trajectories.jobs.reap_job_leases", "schedule": timedelta(minutes=1)},
    "settle-overdue-replays": {"task": "procedures.settle_overdue_replays", "schedule": timedelta(minutes=1)},
    "requeue-expired-replays": {"task": "procedures.requeue_expired_replays", "schedule": timedelta(minutes=1)},
    "mine-new-runs": {"task": "procedures.mine_new_runs", "schedule": timedelta(minutes=10)},
    "deliver-due-webhooks": {"task": "reviews.deliver_due_webhooks", "schedule": timedelta(minutes=1)},
    "resume-evolution-runs": {"task": "graphs.evolution_reap", "schedule": timedelta(minutes=1)},
    "roll-up-call-totals": {"task": "llm.roll_up_call_totals", "schedule": timedelta(minutes=10)},
    "resume-rubric-jobs": {"task": "reviews.rubric_reap", "schedule": timedelta(minutes=1)},
    # /healthz reads the age of this stamp; an undelivered beat is dropped after a minute rather than piling up.
    "worker-heartbeat": {
        "task": "config.heartbeat.heartbeat",
        "schedule": timedelta(minutes=1),
        "options": {"expires": 60},
    },
}
# /healthz calls the worker "stale" when the last heartbeat is older than this (three missed beats by default).
WAYMARK_HEARTBEAT_STALE_SECONDS = env_int("WAYMARK_HEARTBEAT_STALE_SECONDS", 180)
# Worker liveness (common/liveness.py): each process that runs tasks stamps itself every STAMP seconds; beat looks
# every CHECK seconds for leases whose owner's stamp is older than STALE and ends them, so the work is taken over
# within STALE + CHECK seconds of a worker's death instead of when its lease runs out.
WAYMARK_LIVENESS_STAMP_SECONDS = env_int("WAYMARK_LIVENESS_STAMP_SECONDS", 5)
WAYMARK_LIVENESS_STALE_SECONDS = env_int("WAYMARK_LIVENESS_STALE_SECONDS", 30)
WAYMARK_LIVENESS_CHECK_SECONDS = env_int("WAYMARK_LIVENESS_CHECK_SECONDS", 15)
CELERY_BEAT_SCHEDULE["release-dead-leases"] = {
    "task": "common.liveness.release_dead_leases",
    "schedule": timedelta(seconds=WAYMARK_LIVENESS_CHECK_SECONDS),
}

# --- Waymark ------------------------------------------------------------------------------------------------------
WAYMARK_TOKEN_PEPPER = env_str("WAYMARK_TOKEN_PEPPER", SECRET_KEY)
# Login throttling (accounts/throttle.py): failures per (username, address) and per browser with the username's device
# cookie; per address, whatever the usernames; per username from browsers without its device cookie, from any address
# (above the first, so one address alone never reaches it). Each counted over, and locked for, LOCKOUT seconds.
WAYMARK_LOGIN_MAX_FAILURES = env_int("WAYMARK_LOGIN_MAX_FAILURES", 5)
WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS", 20)
WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT = env_int("WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT", 20)
WAYMARK_LOGIN_LOCKOUT_SECONDS = env_int("WAYMARK_LOGIN_LOCKOUT_SECONDS", 300)
WAYMARK_LOGIN_DEVICE_COOKIE_DAYS = env_int("WAYMARK_LOGIN_DEVICE_COOKIE_DAYS", 90)
WAYMARK_TRUSTED_PROXY_COUNT = env_int("WAYMARK_TRUSTED_PROXY_COUNT", 0)
# API rate limits (common/ratelimit.py): calls per token, failed authentications per client IP, per window.
WAYMARK_API_RATE_PER_TOKEN = env_int("WAYMARK_API_RATE_PER_TOKEN", 1200)
WAYMARK_API_AUTH_FAILURES_PER_IP = env_int("WAYMARK_API_AUTH_FAILURES_PER_IP", 30)
WAYMARK_API_RATE_WINDOW_SECONDS = env_int("WAYMARK_API_RATE_WINDOW_SECONDS", 60)
# Each process counts a token's calls in memory and adds them to the shared count in batches of at most this many
# (or a hundredth of a larger limit), and at least every FLUSH seconds; an IP's failed-authentication block is re-read
# at least every CHECK seconds. A token can exceed its limit by less than a batch per other web process
# (common/ratelimit.py).
WAYMARK_API_RATE_BATCH = env_int("WAYMARK_API_RATE_BATCH", 20)
WAYMARK_API_RATE_FLUSH_SECONDS = 0.5
WAYMARK_API_RATE_CHECK_SECONDS = 1.0
# Verified API tokens cached per process (accounts/token_cache.py): how long an entry lives, how often a process
# reads the shared auth version (a revoked token or a removed role stops working within this time), how many entries,
# and how often the last-used times are written. 0 seconds turns the cache off.
WAYMARK_TOKEN_CACHE_SECONDS = env_int("WAYMARK_TOKEN_CACHE_SECONDS", 30)
WAYMARK_TOKEN_CACHE_CHECK_SECONDS = 0.5
WAYMARK_TOKEN_CACHE_SIZE = 10_000
WAYMARK_TOKEN_LAST_USED_FLUSH_SECONDS = env_int("WAYMARK_TOKEN_LAST_USED_FLUSH_SECONDS", 30)
WAYMARK_STUCK_AFTER_SECONDS = env_int("WAYMARK_STUCK_AFTER_SECONDS", 30 * 60)
# URLs longer than this answer the styled 414 page (config/middleware.py; below gunicorn's own 8190-byte limit).
WAYMARK_MAX_URL_LENGTH = env_int("WAYMARK_MAX_URL_LENGTH", 8000)
WAYMARK_INGEST_MAX_RUNS = env_int("WAYMARK_INGEST_MAX_RUNS", 1000)
WAYMARK_INGEST_MAX_BYTES = env_int("WAYMARK_INGEST_MAX_BYTES", 5 * 1024 * 1024)
# Fair shares of ingest (common/fairshare.py): JSON and OTLP ingest requests in flight at once per token and per agent,
# counted across every web process; past either, 429 `too_many_in_flight` with Retry-After (0 turns a cap off). A slot
# expires SLOT seconds after it was taken, so a process that dies mid-request frees its writer's slots by then.
WAYMARK_INGEST_CONCURRENT_PER_TOKEN = env_int("WAYMARK_INGEST_CONCURRENT_PER_TOKEN", 2)
WAYMARK_INGEST_CONCURRENT_PER_AGENT = env_int("WAYMARK_INGEST_CONCURRENT_PER_AGENT", 4)
WAYMARK_INGEST_SLOT_SECONDS = env_int("WAYMARK_INGEST_SLOT_SECONDS", 60)
# The ingest bodies one web process works on at once, in bytes of Content-Length (common/ingest_memory.py; 0: no bound);
# a request that does not fit waits up to WAIT seconds, holding no body, then answers 503 `busy` with Retry-After.
WAYMARK_INGEST_PROCESS_BYTES = env_int("WAYMARK_INGEST_PROCESS_BYTES", 4 * WAYMARK_INGEST_MAX_BYTES)
WAYMARK_INGEST_PROCESS_WAIT_SECONDS = env_int("WAYMARK_INGEST_PROCESS_WAIT_SECONDS", 20)
# OTLP trace ingest (otlp/): a trace without its root span is written after this many seconds without a new span
# (beat, "sweep-quiet-otlp-traces"); at most this many spans are kept per pending trace.
WAYMARK_OTLP_QUIET_SECONDS = env_int("WAYMARK_OTLP_QUIET_SECONDS", 300)
WAYMARK_OTLP_MAX_SPANS_PER_TRACE = env_int("WAYMARK_OTLP_MAX_SPANS_PER_TRACE", 5000)
CELERY_BEAT_SCHEDULE["sweep-quiet-otlp-traces"] = {"task": "otlp.sweep_quiet_traces", "schedule": timedelta(minutes=1)}
DATA_UPLOAD_MAX_MEMORY_SIZE = WAYMARK_INGEST_MAX_BYTES + 1024 * 1024
WAYMARK_REDACT_PATTERNS = env_list("WAYMARK_REDACT_PATTERNS")
WAYMARK_MINE_MIN_NEW_RUNS = env_int("WAYMARK_MINE_MIN_NEW_RUNS", 10)
WAYMARK_LIVE_REPLAY = env_bool("WAYMARK_LIVE_REPLAY", False)
WAYMARK_LIVE_REPLAY_SECONDS = env_int("WAYMARK_LIVE_REPLAY_SECONDS", 15 * 60)
# Webhook endpoints on private, loopback, link-local or reserved addresses are refused unless this is on (tests and
# local development only: it lets an admin make the server call its own network).
WAYMARK_WEBHOOKS_ALLOW_PRIVATE = env_bool("WAYMARK_WEBHOOKS_ALLOW_PRIVATE", False)
# Graph evolution: a step's lease (renewed at every stage and model call), how long agents have to answer the
# evaluation jobs of one evaluation, and Python evaluators an operator may pick ({"name": "dotted.path"}).
WAYMARK_EVOLUTION_LEASE_SECONDS = env_int("WAYMARK_EVOLUTION_LEASE_SECONDS", 300)
# How long one task goes on with a run's next rounds before it sends the next one as a message (graphs/tasks.py).
WAYMARK_EVOLUTION_SLICE_SECONDS = env_int("WAYMARK_EVOLUTION_SLICE_SECONDS", 60)
WAYMARK_EVALUATION_JOB_SECONDS = env_int("WAYMARK_EVALUATION_JOB_SECONDS", 15 * 60)
WAYMARK_GRAPH_EVALUATORS: dict[str, str] = {}
# Intent proposals: a batch's lease; the schedule that proposes for runs no proposal covered yet (0: off); the
# embedder factory ("package.module.factory", loading its model from a local path; empty: hashed n-grams, offline).
WAYMARK_INTENT_LEASE_SECONDS = env_int("WAYMARK_INTENT_LEASE_SECONDS", 300)
WAYMARK_INTENT_PROPOSE_EVERY_MINUTES = env_int("WAYMARK_INTENT_PROPOSE_EVERY_MINUTES", 60)
WAYMARK_INTENT_EMBEDDER = env_str("WAYMARK_INTENT_EMBEDDER", "")
# The local model directory read by intents.embedders.model2vec_from_settings (the optional model2vec adapter).
WAYMARK_INTENT_EMBEDDER_PATH = env_str("WAYMARK_INTENT_EMBEDDER_PATH", "")
CELERY_BEAT_SCHEDULE["resume-intent-proposals"] = {"task": "intents.proposal_reap", "schedule": timedelta(minutes=1)}
if WAYMARK_INTENT_PROPOSE_EVERY_MINUTES > 0:
    CELERY_BEAT_SCHEDULE["propose-intents"] = {
        "task": "intents.propose_new_runs",
        "schedule": timedelta(minutes=WAYMARK_INTENT_PROPOSE_EVERY_MINUTES),
    }

ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
# Certified uplift (uplift.core.policy): the fields of the default certification policy that differ from Policy()'s
# (non-inferiority with a 2-point margin, n >= 10, alpha 0.05 per held-out split, 20 decisions a split). Operators set
# a policy per kind and parent on the policy page; this is the fallback when none is set.
WAYMARK_CERTIFICATION_POLICY: dict = {}
# The safety scan of learned text (uplift.core.safety): hosts a learned URL may name without a finding (a host allows
# its subdomains), comma-separated.
WAYMARK_LEARNED_TEXT_HOSTS = env_list("WAYMARK_LEARNED_TEXT_HOSTS")
# The model-coverage check (uplift.core.coverage): how many of an active artifact's newest production runs it reads,
# and how often beat runs it.
WAYMARK_COVERAGE_RUNS = env_int("WAYMARK_COVERAGE_RUNS", 200)
CELERY_BEAT_SCHEDULE["check-model-coverage"] = {"task": "uplift.coverage_check", "schedule": timedelta(minutes=10)}
# The watch after activation (uplift.core.watch): its error budget, the runs each arm needs before a decision, the
# canary runs after which it promotes without a signal, and how long it watches (hours); beat looks every minute.
WAYMARK_WATCH_ALPHA = float(env_str("WAYMARK_WATCH_ALPHA", "0.05"))
WAYMARK_WATCH_MIN_RUNS = env_int("WAYMARK_WATCH_MIN_RUNS", 30)
WAYMARK_WATCH_MAX_CANARY_RUNS = env_int("WAYMARK_WATCH_MAX_CANARY_RUNS", 2000)
WAYMARK_WATCH_WINDOW_HOURS = env_int("WAYMARK_WATCH_WINDOW_HOURS", 168)
CELERY_BEAT_SCHEDULE["watch-after-activation"] = {"task": "uplift.watch_tick", "schedule": timedelta(minutes=1)}

WAYMARK_ANTHROPIC_MODEL = env_str("WAYMARK_ANTHROPIC_MODEL", "claude-sonnet-4-6")
WAYMARK_MODEL_TIMEOUT = float(env_str("WAYMARK_MODEL_TIMEOUT", "60"))
WAYMARK_MODEL_RETRIES = env_int("WAYMARK_MODEL_RETRIES", 3)

# Logs: "plain" lines, or one JSON object per line ("json", the production default) carrying request_id and, inside a
# Celery task, task_id and task_name (config/logs.py). Celery workers use this configuration too (config/celery.py).
LOGGING = logging_config(env_str("WAYMARK_LOG_FORMAT", "plain"), env_str("WAYMARK_LOG_LEVEL", "INFO"))

# A periodic message that waited longer than its period is dropped by the worker that finally reads it instead of
# being run (the next one is already on its way): a backlog never turns into a queue of no-op reapers ahead of work.
for _entry in CELERY_BEAT_SCHEDULE.values():
    _entry.setdefault("options", {}).setdefault("expires", _entry["schedule"].total_seconds())
