"""Typed environment readers refuse bad values, naming the variable."""

import re
from pathlib import Path

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


@pytest.mark.parametrize(("value", "why"), [
    ("ldap://dc1.corp.example:389 ldaps://dc2.corp.example", "use ldap:// (with LDAP_START_TLS) or ldaps://"),
    ("http://dc1.corp.example", "must be ldap://host[:port] or ldaps://host[:port]"),
    ("ldap://", "must be ldap://host[:port]"),
    ("ldap://dc1.corp.example:port", "invalid port"),
    ("ldaps://dc1.corp.example/dc=corp", "must be ldap://host[:port]"),
])
def test_it_refuses_ldap_uris_that_are_not_one_scheme_of_hosts(monkeypatch, value, why):
    from controlplane.env import env_ldap_uris

    monkeypatch.setenv("X_LDAP", value)
    with pytest.raises(ImproperlyConfigured, match=f"X_LDAP.*{re.escape(why)}"):
        env_ldap_uris("X_LDAP")


def test_it_reads_ldap_uris_tried_in_order(monkeypatch):
    from controlplane.env import env_ldap_uris

    monkeypatch.setenv("X_LDAP", " ldaps://dc1.corp.example  ldaps://dc2.corp.example:636 ")
    assert env_ldap_uris("X_LDAP") == "ldaps://dc1.corp.example ldaps://dc2.corp.example:636"
    monkeypatch.delenv("X_LDAP")
    assert env_ldap_uris("X_LDAP") == ""


@pytest.mark.parametrize("value", ["uid=%(user)s", "(uid=%s)", "(cn=admin)", "(&(uid=%(user)s)(x=100%))"])
def test_it_refuses_a_user_filter_without_the_username_in_parentheses(monkeypatch, value):
    from controlplane.env import env_ldap_user_filter

    monkeypatch.setenv("X_FILTER", value)
    with pytest.raises(ImproperlyConfigured, match="X_FILTER"):
        env_ldap_user_filter("X_FILTER", "(uid=%(user)s)")


def test_it_reads_a_secret_from_its_variable_or_its_file_and_never_says_it(monkeypatch, tmp_path):
    from controlplane.env import env_secret

    monkeypatch.setenv("X_SECRET", "in-the-environment")
    assert env_secret("X_SECRET") == "in-the-environment"
    (tmp_path / "secret").write_text("in-a-file\n")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "secret"))
    with pytest.raises(ImproperlyConfigured, match="set X_SECRET or X_SECRET_FILE, not both") as refused:
        env_secret("X_SECRET")
    assert "in-the-environment" not in str(refused.value)
    monkeypatch.delenv("X_SECRET")
    assert env_secret("X_SECRET") == "in-a-file"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_SECRET_FILE: cannot read"):
        env_secret("X_SECRET")


def test_it_refuses_a_choice_outside_the_list(monkeypatch):
    from controlplane.env import env_choice

    monkeypatch.setenv("X_TYPE", "groupofnames")
    with pytest.raises(ImproperlyConfigured, match="X_TYPE must be one of groupOfNames, posix, activedirectory"):
        env_choice("X_TYPE", "groupOfNames", ("groupOfNames", "posix", "activedirectory"))


def test_every_setting_read_from_the_environment_is_documented():
    """docs/configuration.md (or docs/people.md, for sign-in) names every
    variable controlplane/settings.py reads: a setting nobody can find is a
    setting nobody can use."""
    root = Path(__file__).resolve().parents[2]
    source = (root / "controlplane" / "settings.py").read_text()
    read = set(re.findall(r"\benv_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", source))
    read |= set(re.findall(r"os\.environ(?:\.get)?[(\[]\s*\"([A-Z][A-Z0-9_]+)\"", source))
    assert len(read) > 50, "the settings' reads were not found: the pattern no longer matches settings.py"
    docs = (root / "docs" / "configuration.md").read_text() + (root / "docs" / "people.md").read_text()
    undocumented = sorted(name for name in read if f"`{name}`" not in docs and f"`{name} " not in docs)
    assert undocumented == [], f"read by settings.py, named in neither docs/configuration.md nor docs/people.md: {undocumented}"
