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
    ],
    ids=["mysql-url", "url-without-host", "no-secret-key-debug-off", "bad-bool", "poll-not-int", "poll-zero",
         "redis-not-redis", "unknown-spark-master"],
)
def test_it_refuses_bad_settings_naming_the_variable(overrides, named):
    result = start_django(**overrides)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.strip().splitlines()[-1]


def test_a_missing_secret_key_is_allowed_only_in_debug():
    result = start_django(SECRET_KEY=None, DEBUG="1")
    assert result.returncode == 0, result.stderr
