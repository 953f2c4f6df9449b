"""Django settings. Every deployment-specific value comes from the environment
through ``controlplane.env``; a bad value stops start-up naming the variable."""

from __future__ import annotations

from pathlib import Path

from csp.constants import NONE, SELF
from kombu import Queue

from controlplane.env import (
    env_bool,
    env_bool_renamed,
    env_choice,
    env_database,
    env_dotted_paths,
    env_file,
    env_int,
    env_ldap_uris,
    env_ldap_user_filter,
    env_list,
    env_networks,
    env_redis,
    env_secret,
    env_spark_connect_url,
    env_spark_master,
    env_str,
    require_production_secrets,
    require_set,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)

# A development key only with DEBUG on; without DEBUG a missing, short or
# development key stops start-up. The local stack (scripts/env.sh) generates a
# random key per install under .gapwatch/, mode 0600.
SECRET_KEY = env_str("SECRET_KEY", "dev-only-insecure-key-never-use-in-production" if DEBUG else None)

# Encrypts SASL passwords at rest. Its own variable so SECRET_KEY can rotate;
# falls back to a key derived from SECRET_KEY.
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY", SECRET_KEY)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
if not DEBUG:
    require_production_secrets(secret_key=SECRET_KEY, field_key=FIELD_ENCRYPTION_KEY, allowed_hosts=ALLOWED_HOSTS)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", ",")

DATABASES = {"default": env_database("DATABASE_URL", "postgresql://gapwatch:gapwatch@127.0.0.1:5439/gapwatch")}
REDIS_URL = env_redis("REDIS_URL", "redis://127.0.0.1:6379/0")
SPARK_MASTER = env_spark_master("SPARK_MASTER", "local[*]")
# Connector jars fetched by Maven at setup time; Spark never downloads at run time.
SPARK_KAFKA_JARS_DIR = Path(env_str("SPARK_KAFKA_JARS_DIR", str(BASE_DIR / ".gapwatch" / "lib" / "spark")))
POLL_INTERVAL_SECONDS = env_int("POLL_INTERVAL_SECONDS", 10, minimum=1)
KAFKA_TIMEOUT_SECONDS = env_int("KAFKA_TIMEOUT_SECONDS", 10, minimum=1)
# Committed-offset fetches in flight at once (the client fetches one group per call).
KAFKA_MAX_IN_FLIGHT = env_int("KAFKA_MAX_IN_FLIGHT", 32, minimum=1)
# A worker closes its kept client of a cluster no poll or tick used for this
# long (a deleted or disabled cluster's): its connections and threads go.
KAFKA_CLIENT_IDLE_SECONDS = env_int("KAFKA_CLIENT_IDLE_SECONDS", 600, minimum=1)
# A cluster's CA or client certificate that expires within this many days is
# shown on the clusters page (gapwatch_cluster_certificates_expiring in /metrics).
CERTIFICATE_EXPIRY_WARNING_DAYS = env_int("CERTIFICATE_EXPIRY_WARNING_DAYS", 30, minimum=0)
# A finding nobody picked up after this many polls while data arrives is "unowned".
UNOWNED_AFTER_POLLS = env_int("UNOWNED_AFTER_POLLS", 30, minimum=1)
# While a group owns a new partition without a first commit, poll again this soon.
FAST_POLL_SECONDS = env_int("FAST_POLL_SECONDS", 2, minimum=1)
# The watcher (tasks/watching.py): one metadata request per cluster this often;
# on a partition-count change, and while a new partition is being picked up, a
# targeted snapshot of its topic and the groups reading it (issue 11).
WATCH_INTERVAL_SECONDS = env_int("WATCH_INTERVAL_SECONDS", 1, minimum=1)
# Kafka's own Java Admin client (adapters/kafka/java_admin.py) in a small JVM per
# worker process (started at the first poll, ~0.6 s, ~130 MB): share groups
# (KIP-932), streams groups (KIP-1071), topic ids, the watcher's partition
# counts, a poll's groups and commits. Off for clusters without share and
# streams groups that cannot spare it (librdkafka then reads the rest).
# SHARE_AND_STREAMS_GROUPS is its old name.
JAVA_ADMIN_CLIENT = env_bool_renamed("JAVA_ADMIN_CLIENT", "SHARE_AND_STREAMS_GROUPS", True)
# While a new partition is being picked up, a tick observes this many times,
# evenly over its interval: the pickup bracket is about interval / this wide.
WATCH_OBSERVATIONS_PER_TICK = env_int("WATCH_OBSERVATIONS_PER_TICK", 4, minimum=1)
# A member fetches its start position just after it takes a partition; its
# likely start (an estimate, never a bound) is read from the time index this
# long after the pickup was seen.
PICKUP_GRACE_MS = env_int("PICKUP_GRACE_MS", 250, minimum=0)
# A partition taken without a commit is watched this long for the group's first
# commit, the upper bound of what it missed; full polls go on looking after that.
FIRST_COMMIT_WATCH_SECONDS = env_int("FIRST_COMMIT_WATCH_SECONDS", 300, minimum=0)
# Jobs whose worker died are found and enqueued again (tasks.celery_tasks.recover_jobs).
JOB_RECOVERY_SECONDS = env_int("JOB_RECOVERY_SECONDS", 60, minimum=1)
JOB_STALL_SECONDS = env_int("JOB_STALL_SECONDS", 600, minimum=1)
# An expansion job (issue 33) watches its new partitions at most this long for
# every group's start to be decided (a classic group's members see them at their
# metadata refresh, 300 s by default), and waits at most EXPANSION_VERIFY_SECONDS
# for its backfills' verification; what is still open then is said in its verdict.
EXPANSION_WATCH_SECONDS = env_int("EXPANSION_WATCH_SECONDS", 900, minimum=1)
EXPANSION_VERIFY_SECONDS = env_int("EXPANSION_VERIFY_SECONDS", 3600, minimum=1)
# A running expansion no run touched for this long, with its lock free, lost its next run's
# message (a killed worker): recover_expansions (every EXPANSION_RECOVERY_SECONDS) starts it again.
EXPANSION_STALL_SECONDS = env_int("EXPANSION_STALL_SECONDS", 30, minimum=1)
EXPANSION_RECOVERY_SECONDS = env_int("EXPANSION_RECOVERY_SECONDS", 10, minimum=1)
# How often a worker reads the retention and first missed record of open findings (tasks.urgency).
URGENCY_INTERVAL_SECONDS = env_int("URGENCY_INTERVAL_SECONDS", 300, minimum=10)
# Protection by membership (issue 43): Gapwatch's member of a live group waits at most
# EXPANSION_JOIN_SECONDS for its seat (a classic group's join waits for its slowest member to rejoin),
# and asks again for EXPANSION_COMMIT_SECONDS while the new partitions are unknown to the coordinator.
# It subscribes only to PROTECT_ANCHOR_TOPIC (one partition, made when missing), so it takes none of
# the group's partitions. The seat is held by the jobs worker running the expansion, never by the watch.
EXPANSION_JOIN_SECONDS = env_int("EXPANSION_JOIN_SECONDS", 60, minimum=1)
EXPANSION_COMMIT_SECONDS = env_int("EXPANSION_COMMIT_SECONDS", 10, minimum=1)
PROTECT_ANCHOR_TOPIC = env_str("PROTECT_ANCHOR_TOPIC", "gapwatch-anchor")
# The standing protection (``python manage.py protect``): the partition counts of the topics its
# seats' groups read are read every PROTECT_WATCH_MS, the rules and groups every PROTECT_REFRESH_SECONDS.
PROTECT_WATCH_MS = env_int("PROTECT_WATCH_MS", 100, minimum=10)
PROTECT_REFRESH_SECONDS = env_int("PROTECT_REFRESH_SECONDS", 5, minimum=1)
# A dead worker's poll lock expires after this long.
POLL_LOCK_SECONDS = env_int("POLL_LOCK_SECONDS", max(120, 6 * POLL_INTERVAL_SECONDS), minimum=10)
# A cluster of at least POLL_SPLIT_PARTITIONS partitions (0: never) is polled
# in POLL_PARTS parts that several Celery workers read at once (tasks.poll_parts);
# the worker that took the poll writes it, once. Below it, one worker reads all.
POLL_SPLIT_PARTITIONS = env_int("POLL_SPLIT_PARTITIONS", 100_000, minimum=0)
POLL_PARTS = env_int("POLL_PARTS", 4, minimum=2)
LAG_SAMPLE_INTERVAL_SECONDS = env_int("LAG_SAMPLE_INTERVAL_SECONDS", 60, minimum=1)
LAG_SAMPLE_RETENTION_HOURS = env_int("LAG_SAMPLE_RETENTION_HOURS", 72, minimum=1)
# Global webhook for finding events; a cluster's own webhook_url takes precedence.
WEBHOOK_URL = env_str("WEBHOOK_URL", "")
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 5, minimum=1)
# Webhooks go to public addresses only, unless this closed network allows
# loopback and private ones (checked when saved and again when sent).
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE", False)
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# Personal API tokens (each user's "API tokens" page): the expiry offered by
# default and the longest allowed, in days.
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365, minimum=1)
API_TOKEN_DEFAULT_DAYS = min(env_int("API_TOKEN_DEFAULT_DAYS", 30, minimum=1), API_TOKEN_MAX_DAYS)
# Reverse proxies (addresses or networks) whose X-Forwarded-For is believed;
# empty: no forwarding header is, and a request carrying one is not "loopback".
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES")
# Four-eyes: the person who requests a remediation cannot approve it.
FOUR_EYES = env_bool("FOUR_EYES", False)
# A reset job whose group has members waits at most this long for it to be Empty, then fails.
RESET_WAIT_DEADLINE_SECONDS = env_int("RESET_WAIT_DEADLINE_SECONDS", 3600, minimum=1)
# Where Parquet backfills are written (a local folder or any Hadoop-compatible URI).
BACKFILL_OUTPUT = env_str("BACKFILL_OUTPUT", str(BASE_DIR / ".gapwatch" / "backfills"))
# A backfill job process running longer is killed and the job failed; keep it below the visibility timeout.
BACKFILL_TIMEOUT_SECONDS = env_int("BACKFILL_TIMEOUT_SECONDS", 3600, minimum=30)
# A backfill's Kafka request (offsets, fetches) unanswered this long fails the
# job, which publishes nothing; Spark's default for a fetch is 120 s.
BACKFILL_KAFKA_TIMEOUT_SECONDS = env_int("BACKFILL_KAFKA_TIMEOUT_SECONDS", 120, minimum=1)
# A read_committed backfill whose range an open transaction holds (the last
# stable offset below its end) waits this long for it to end, then fails saying
# which. The broker's transaction.max.timeout.ms (15 min by default) bounds any
# producer's transaction.timeout.ms, after which the coordinator aborts it.
BACKFILL_TRANSACTION_WAIT_SECONDS = env_int("BACKFILL_TRANSACTION_WAIT_SECONDS", 900, minimum=0)
# A Spark Connect server (sc://host:port; python -m adapters.spark.connect) that runs
# backfill jobs in a warm JVM, local or on a cluster; empty, or no server
# answering: each job runs in a Spark process of its own. Its token is a secret.
SPARK_CONNECT_URL = env_spark_connect_url("SPARK_CONNECT_URL")
SPARK_CONNECT_TOKEN = env_str("SPARK_CONNECT_TOKEN", "")
# Python handlers (dotted paths, comma separated) approvers may choose as a
# backfill's sink; each is called with an iterator of one Spark partition's records.
BACKFILL_HANDLERS = env_dotted_paths("BACKFILL_HANDLERS")
# Where a backfill runs: "process", a driver process of its own that the jobs
# worker launches without waiting (tasks/backfill/driver.py; a worker is never
# held for a Spark run); "worker", inside the Celery task (the tests that patch
# the runner in their own process). At most BACKFILL_DRIVERS run at once; the
# others stay queued until a slot is free.
BACKFILL_DRIVER = env_choice("BACKFILL_DRIVER", "process", ("process", "worker"))
BACKFILL_DRIVERS = env_int("BACKFILL_DRIVERS", 2, minimum=1)
# A driver and its Spark job run at this niceness (0-19): batch work yields the
# CPU to the watch's polls and ticks, whose timing the numbers depend on.
BACKFILL_NICENESS = env_int("BACKFILL_NICENESS", 10, minimum=0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_celery_beat",
    "axes",
    "mozilla_django_oidc",
    # django-ninja's templates and static copy of Swagger UI, for /api/v1/docs (no CDN).
    "ninja",
    "groups",
    "tasks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "controlplane.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF: an API call without credentials is a 401, not a CSRF page.
    "controlplane.middleware.ApiAuthenticationMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "groups.services.tokens.ApiTokenMiddleware",
    "controlplane.middleware.RoleRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # After CSP's (so before it on the answer): the OpenID provider in form-action.
    "groups.web.sso.ProviderFormAction",
    # Last, as django-axes asks: it turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

# Brute-force protection for /accounts/login/ and /admin/login/ (django-axes):
# after LOGIN_FAILURE_LIMIT wrong passwords for one user from one address,
# that pair is locked out (even the right password fails) for the cool-off.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "groups.web.sso.OidcBackend",  # does nothing unless OIDC_ISSUER is set
    "groups.web.ldap_login.DirectoryBackend",  # does nothing unless LDAP_SERVER_URI is set
    "groups.web.sso.LocalBackend",  # Gapwatch's own passwords, unless LOCAL_LOGIN=0
]

# Single sign-on through OpenID Connect (groups/web/sso.py; docs/people.md, "Single
# sign-on"): off while OIDC_ISSUER is empty. The provider's endpoints come from
# its discovery document; the client is confidential and uses PKCE (S256).
OIDC_ISSUER = env_str("OIDC_ISSUER", "").rstrip("/") or ""
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGORITHM", "RS256")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # for the provider's logout (id_token_hint)
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_VERIFY_SSL = env_str("OIDC_CA_BUNDLE", "") or True
OIDC_OP_LOGOUT_URL_METHOD = "groups.web.sso.provider_logout_url"
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
# LDAP / Active Directory login (groups/web/ldap_login.py; docs/people.md, "LDAP /
# Active Directory"): off while LDAP_SERVER_URI is empty. People are found by
# LDAP_USER_FILTER under LDAP_USER_SEARCH_BASE as LDAP_BIND_DN, then bind with
# their own password; their groups are found under LDAP_GROUP_SEARCH_BASE.
LDAP_SERVER_URI = env_ldap_uris("LDAP_SERVER_URI")
LDAP_BIND_DN = env_str("LDAP_BIND_DN", "")
LDAP_BIND_PASSWORD = env_secret("LDAP_BIND_PASSWORD")
LDAP_USER_SEARCH_BASE = env_str("LDAP_USER_SEARCH_BASE", "")
LDAP_USER_FILTER = env_ldap_user_filter("LDAP_USER_FILTER", "(uid=%(user)s)")
LDAP_GROUP_SEARCH_BASE = env_str("LDAP_GROUP_SEARCH_BASE", "")
LDAP_GROUP_TYPE = env_choice("LDAP_GROUP_TYPE", "groupOfNames", ("groupOfNames", "posix", "activedirectory"))
# The group search's filter for each LDAP_GROUP_TYPE, unless LDAP_GROUP_FILTER says otherwise.
LDAP_GROUP_FILTERS = {"groupOfNames": "(objectClass=groupOfNames)", "posix": "(objectClass=posixGroup)",
                      "activedirectory": "(objectClass=group)"}
LDAP_GROUP_FILTER = env_str("LDAP_GROUP_FILTER", "")
LDAP_START_TLS = env_bool("LDAP_START_TLS", True)  # ldap:// only; ldaps:// is TLS already
LDAP_CA_FILE = env_file("LDAP_CA_FILE")  # empty: the system's CAs
LDAP_TIMEOUT = env_int("LDAP_TIMEOUT_SECONDS", 5, minimum=1)
if LDAP_SERVER_URI:
    require_set("LDAP_SERVER_URI", LDAP_USER_SEARCH_BASE=LDAP_USER_SEARCH_BASE,
                LDAP_GROUP_SEARCH_BASE=LDAP_GROUP_SEARCH_BASE)
# Local accounts (passwords kept by Gapwatch): for break-glass use once a
# directory is configured; LOCAL_LOGIN=0 switches their login off.
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "controlplane.client_address.client_address_text"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

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
                "groups.web.context.freshness",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".gapwatch" / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

SESSION_COOKIE_HTTPONLY = True
# Cookies only over HTTPS in production; turn off only to try a production
# configuration over plain HTTP on loopback.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HTTPS in production: redirect plain HTTP, and tell browsers (HSTS). Behind a
# TLS-terminating proxy, set SECURE_PROXY_SSL_HEADER=1 (it sends X-Forwarded-Proto).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Healthz stays reachable over plain HTTP for load balancers inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Content-Security-Policy (django-csp): scripts, styles and images from this
# origin only; no inline script, no framing, forms post only here.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF], "script-src": [SELF], "style-src": [SELF], "img-src": [SELF, "data:"],
        "object-src": [NONE], "base-uri": [SELF], "frame-ancestors": [NONE], "form-action": [SELF],
    },
}

# Celery: Redis is the broker and result store. Long tasks (Spark) need late
# acks, requeue on worker loss and a visibility timeout above the longest task.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4 * 3600}
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Two queues (issue 42): "watch" for the polls and the watcher's ticks, "celery" (the default)
# for everything else, jobs above all. `make up` and the compose file run a worker for each, so
# no job, however long, takes the watch's capacity; a worker started without -Q serves both.
WATCH_QUEUE = "watch"
CELERY_TASK_QUEUES = (Queue("celery"), Queue(WATCH_QUEUE))
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = {name: {"queue": WATCH_QUEUE} for name in (
    "gapwatch.poll_all_clusters", "gapwatch.poll_cluster", "gapwatch.poll_part",
    "gapwatch.watch_all_clusters", "gapwatch.watch_cluster",
)}
# Loaded into django-celery-beat's database schedule when beat starts.
CELERY_BEAT_SCHEDULE = {
    "poll-all-clusters": {
        "task": "gapwatch.poll_all_clusters",
        "schedule": float(POLL_INTERVAL_SECONDS),
        # A poll still queued after one interval is stale: the next one replaces it.
        "options": {"expires": float(POLL_INTERVAL_SECONDS)},
    },
    "watch-all-clusters": {
        "task": "gapwatch.watch_all_clusters",
        "schedule": float(WATCH_INTERVAL_SECONDS),
        # A tick still queued after one interval is stale: the next one replaces it.
        "options": {"expires": float(WATCH_INTERVAL_SECONDS)},
    },
    "recover-jobs": {
        "task": "gapwatch.recover_jobs",
        "schedule": float(JOB_RECOVERY_SECONDS),
        "options": {"expires": float(JOB_RECOVERY_SECONDS)},
    },
    "read-urgency": {
        "task": "gapwatch.read_urgency_all",
        "schedule": float(URGENCY_INTERVAL_SECONDS),
        "options": {"expires": float(URGENCY_INTERVAL_SECONDS)},
    },
    "recover-expansions": {
        "task": "gapwatch.recover_expansions",
        "schedule": float(EXPANSION_RECOVERY_SECONDS),
        "options": {"expires": float(EXPANSION_RECOVERY_SECONDS)},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
