"""Bad settings stop start-up with a message naming the variable.

Each case starts a fresh interpreter, as a deployment would."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

GOOD = {
    "DATABASE_URL": "postgresql://u:p@127.0.0.1:5432/db",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "SECRET_KEY": "s" * 50,
    "DEBUG": "0",
}


def start_django(**overrides: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in GOOD}
    env.update(GOOD)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('started')"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_starts_with_good_settings():
    result = start_django()
    assert result.returncode == 0, result.stderr
    assert "started" in result.stdout


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"DATABASE_URL": "mysql://u:p@127.0.0.1/db"}, "DATABASE_URL"),
        ({"DATABASE_URL": "postgresql://"}, "DATABASE_URL"),
        ({"SECRET_KEY": None}, "SECRET_KEY"),
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"POLL_INTERVAL_SECONDS": "ten"}, "POLL_INTERVAL_SECONDS"),
        ({"POLL_INTERVAL_SECONDS": "0"}, "POLL_INTERVAL_SECONDS"),
        ({"REDIS_URL": "http://127.0.0.1"}, "REDIS_URL"),
        ({"SPARK_MASTER": "mesos://x"}, "SPARK_MASTER"),
        ({"ALLOWED_HOSTS": "*"}, "ALLOWED_HOSTS"),
        ({"ALLOWED_HOSTS": "gapwatch.example,*"}, "ALLOWED_HOSTS"),
        ({"SECRET_KEY": "short"}, "SECRET_KEY"),
        ({"SECRET_KEY": "dev-only-insecure-key-never-use-in-production" + "x" * 10}, "SECRET_KEY"),
        ({"FIELD_ENCRYPTION_KEY": "short"}, "FIELD_ENCRYPTION_KEY"),
        ({"TRUSTED_PROXIES": "10.0.0.1,not-an-ip"}, "TRUSTED_PROXIES"),
    ],
    ids=["mysql-url", "url-without-host", "no-secret-key-debug-off", "bad-bool", "poll-not-int", "poll-zero",
         "redis-not-redis", "unknown-spark-master", "any-host", "any-host-among-others", "short-secret-key",
         "development-secret-key", "short-field-key", "bad-trusted-proxy"],
)
def test_it_refuses_bad_settings_naming_the_variable(overrides, named):
    result = start_django(**overrides)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.strip().splitlines()[-1]


def test_a_missing_secret_key_is_allowed_only_in_debug():
    result = start_django(SECRET_KEY=None, DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_check_deploy_reports_nothing_with_production_settings():
    # Not the test process's own DJANGO_ALLOW_ASYNC_UNSAFE (set for Playwright) nor its keys.
    env = {key: value for key, value in os.environ.items()
           if key not in GOOD and key not in ("FIELD_ENCRYPTION_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(GOOD, ALLOWED_HOSTS="gapwatch.example", SECRET_KEY="k" * 30 + "Q7-z" * 10)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_local_stack_makes_its_own_keys_once_readable_by_its_owner_only(tmp_path):
    def keys() -> list[str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "GAPWATCH_HOME")}
        script = 'source scripts/env.sh && echo "$SECRET_KEY" && echo "$FIELD_ENCRYPTION_KEY"'
        result = subprocess.run(["bash", "-c", script], cwd=ROOT, env={**env, "GAPWATCH_HOME": str(tmp_path)},
                                capture_output=True, text=True, timeout=60, check=True)
        return result.stdout.split()

    first, second = keys(), keys()
    assert first == second, "made once, then reused"
    secret_key, field_key = first
    assert secret_key != field_key and len(secret_key) >= 50 and "insecure" not in secret_key
    for name in ("secret-key", "field-encryption-key"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("given", "debug"), [(None, "0"), ("1", "1")], ids=["make-up", "DEBUG=1-make-up"])
def test_the_local_stack_runs_with_debug_off_unless_a_developer_asks(tmp_path, given, debug):
    env = {key: value for key, value in os.environ.items() if key not in ("DEBUG", "GAPWATCH_HOME")}
    if given is not None:
        env["DEBUG"] = given
    result = subprocess.run(["bash", "-c", 'source scripts/env.sh && echo "$DEBUG"'], cwd=ROOT,
                            env={**env, "GAPWATCH_HOME": str(tmp_path)}, capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == debug


@pytest.mark.parametrize(("overrides", "java_admin", "warned"), [
    ({}, True, False),
    ({"JAVA_ADMIN_CLIENT": "false"}, False, False),
    ({"SHARE_AND_STREAMS_GROUPS": "false"}, False, True),  # the old name: still read, with a warning
    ({"SHARE_AND_STREAMS_GROUPS": "false", "JAVA_ADMIN_CLIENT": "true"}, True, False),  # the new name wins
])
def test_the_java_admin_setting_keeps_its_old_name_as_an_alias_that_warns(overrides, java_admin, warned):
    env = {key: value for key, value in os.environ.items()
           if key not in GOOD and key not in ("JAVA_ADMIN_CLIENT", "SHARE_AND_STREAMS_GROUPS")}
    env.update(GOOD, **overrides)
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                               "print('java admin', settings.JAVA_ADMIN_CLIENT)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"java admin {java_admin}" in result.stdout
    assert ("SHARE_AND_STREAMS_GROUPS is renamed JAVA_ADMIN_CLIENT" in result.stderr) == warned, result.stderr
