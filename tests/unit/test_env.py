"""Typed environment readers refuse bad values, naming the variable."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_database, env_dotted_paths, env_int


def test_it_parses_a_postgresql_url(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://user:p%40ss@db.example:6543/gap")
    config = env_database("DATABASE_URL", "")
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"], config["NAME"]) == (
        "user", "p@ss", "db.example", "6543", "gap",
    )


@pytest.mark.parametrize("value", ["sqlite:///x.db", "postgresql://host-only", "postgresql://h:notaport/db"])
def test_it_refuses_database_urls_that_are_not_postgresql(monkeypatch, value):
    monkeypatch.setenv("DATABASE_URL", value)
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        env_database("DATABASE_URL", "")


def test_it_reads_booleans_and_refuses_other_words(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "perhaps")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG")


def test_it_applies_the_minimum(monkeypatch):
    monkeypatch.setenv("N", "0")
    with pytest.raises(ImproperlyConfigured, match="N must be at least 1"):
        env_int("N", 5, minimum=1)
    monkeypatch.delenv("N")
    assert env_int("N", 5, minimum=1) == 5


def test_it_reads_dotted_paths_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("HANDLERS", " pkg.mod.fn , builtins.list ")
    assert env_dotted_paths("HANDLERS") == ("pkg.mod.fn", "builtins.list")
    monkeypatch.setenv("HANDLERS", "pkg.mod.fn,os.system; rm -rf /")
    with pytest.raises(ImproperlyConfigured, match="HANDLERS: 'os.system; rm -rf /' is not a dotted path"):
        env_dotted_paths("HANDLERS")
    monkeypatch.delenv("HANDLERS")
    assert env_dotted_paths("HANDLERS") == ()


def test_it_reads_a_spark_connect_url_and_never_echoes_a_token(monkeypatch):
    from controlplane.env import env_spark_connect_url

    monkeypatch.delenv("X_CONNECT", raising=False)
    assert env_spark_connect_url("X_CONNECT") == ""
    monkeypatch.setenv("X_CONNECT", "sc://spark.example:15002")
    assert env_spark_connect_url("X_CONNECT") == "sc://spark.example:15002"
    for bad in ["http://spark:15002", "sc://spark", "sc://spark:port", "spark:15002"]:
        monkeypatch.setenv("X_CONNECT", bad)
        with pytest.raises(ImproperlyConfigured, match=f"X_CONNECT must look like sc://host:port, got '{bad}'"):
            env_spark_connect_url("X_CONNECT")
    monkeypatch.setenv("X_CONNECT", "sc://spark:15002/;token=s3cret")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_spark_connect_url("X_CONNECT")
    assert "s3cret" not in str(refused.value) and "sc://spark:15002/;..." in str(refused.value)
