"""Typed readers for settings that come from the environment.

Each refuses a bad value with an ``ImproperlyConfigured`` that names the
variable, so a misconfigured deployment stops at start-up, not at first use.
"""

from __future__ import annotations

import os
import re
import warnings
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


_DOTTED_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def env_dotted_paths(name: str) -> tuple[str, ...]:
    """Comma-separated ``package.module.name`` paths; empty gives ()."""
    paths = tuple(env_list(name, ""))
    for path in paths:
        if not _DOTTED_PATH.match(path):
            raise ImproperlyConfigured(f"{name}: {path!r} is not a dotted path like package.module.function")
    return paths


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def env_bool_renamed(name: str, old_name: str, default: bool = False) -> bool:
    """``env_bool(name)``; while only ``old_name`` is set, its value, with a
    warning on stderr naming the new variable (the old one still works)."""
    if name not in os.environ and old_name in os.environ:
        warnings.warn(f"{old_name} is renamed {name}; set {name} instead (the old name still works for now)",
                      FutureWarning, stacklevel=2)
        return env_bool(old_name, default)
    return env_bool(name, default)


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_networks(name: str) -> tuple:
    """Comma-separated IP addresses or networks (``10.0.0.5,192.168.0.0/24``)."""
    import ipaddress

    networks = []
    for item in env_list(name, ""):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an IP address or network") from None
    return tuple(networks)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_secret(name: str) -> str:
    """A secret from ``NAME``, or from the file named by ``NAME_FILE`` (one
    trailing newline dropped), as Docker and Kubernetes secrets are mounted;
    empty when neither is set. The value is never part of an error message."""
    file_name = os.environ.get(f"{name}_FILE", "")
    if not file_name:
        return os.environ.get(name, "")
    if os.environ.get(name):
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    try:
        with open(file_name, encoding="utf-8") as secret:
            return secret.read().removesuffix("\n")
    except OSError as error:
        raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name!r} ({error.strerror})") from None


def env_file(name: str) -> str:
    """Empty, or the path of a file that exists and can be read."""
    path = os.environ.get(name, "").strip()
    if path and not os.access(path, os.R_OK):
        raise ImproperlyConfigured(f"{name}: {path!r} is not a readable file")
    return path


def env_ldap_uris(name: str) -> str:
    """Empty, or one or more (space-separated, tried in order) ``ldap://host:port``
    or ``ldaps://host:port`` URIs of one scheme."""
    uris = os.environ.get(name, "").split()
    schemes = set()
    for uri in uris:
        url = urlparse(uri)
        try:
            url.port  # noqa: B018 - a bad port raises
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {uri!r} has an invalid port") from None
        if url.scheme not in {"ldap", "ldaps"} or not url.hostname or url.path.strip("/") or url.query:
            raise ImproperlyConfigured(f"{name} must be ldap://host[:port] or ldaps://host[:port], got {uri!r}")
        schemes.add(url.scheme)
    if len(schemes) > 1:
        raise ImproperlyConfigured(f"{name}: use ldap:// (with LDAP_START_TLS) or ldaps:// for every server, not both")
    return " ".join(uris)


def env_ldap_user_filter(name: str, default: str) -> str:
    """An LDAP filter in parentheses naming the login's username as ``%(user)s``
    (django-auth-ldap escapes it), e.g. ``(sAMAccountName=%(user)s)``."""
    value = env_str(name, default).strip()
    if not (value.startswith("(") and value.endswith(")")) or "%(user)s" not in value:
        raise ImproperlyConfigured(f"{name} must be an LDAP filter in parentheses with %(user)s, "
                                   f"like (uid=%(user)s), got {value!r}")
    try:
        value % {"user": "x"}
    except (KeyError, ValueError, TypeError):
        raise ImproperlyConfigured(f"{name}: only %(user)s may follow a %, got {value!r}") from None
    return value


def require_set(because: str, **values: str) -> None:
    """Each of ``values`` (a setting's name and value) must be non-empty, ``because`` it is needed."""
    for name, value in values.items():
        if not value:
            raise ImproperlyConfigured(f"{name} must be set when {because} is")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_database(name: str, default: str) -> dict:
    """Parse ``postgresql://user:password@host:port/dbname`` into Django's DATABASES entry."""
    raw = env_str(name, default)
    url = urlparse(raw)
    if url.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(
            f"{name} must be a postgresql:// URL (Gapwatch runs on PostgreSQL only), got scheme {url.scheme!r}"
        )
    database = url.path.lstrip("/")
    if not url.hostname or not database:
        raise ImproperlyConfigured(f"{name} must name a host and a database, like postgresql://user:pass@host:5432/db")
    try:
        port = url.port or 5432
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port") from None
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(database),
        "USER": unquote(url.username or ""),
        "PASSWORD": unquote(url.password or ""),
        "HOST": url.hostname,
        "PORT": str(port),
        "CONN_MAX_AGE": env_int("DB_CONN_MAX_AGE", 60, minimum=0),
        "CONN_HEALTH_CHECKS": True,
    }


def env_redis(name: str, default: str) -> str:
    raw = env_str(name, default)
    url = urlparse(raw)
    if url.scheme not in {"redis", "rediss"} or not url.hostname:
        raise ImproperlyConfigured(f"{name} must be a redis:// URL, got {raw!r}")
    return raw


def env_spark_master(name: str, default: str) -> str:
    raw = env_str(name, default)
    if not (raw.startswith(("local", "spark://", "k8s://")) or raw == "yarn"):
        raise ImproperlyConfigured(f"{name} must be local[...], spark://..., yarn or k8s://..., got {raw!r}")
    return raw


def env_spark_connect_url(name: str) -> str:
    """Empty, or ``sc://host:port`` (parameters such as a token belong in
    their own variables, not in the URL)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return ""
    url = urlparse(raw)
    try:
        port = url.port
    except ValueError:
        port = None
    if url.scheme != "sc" or not url.hostname or port is None or url.path.strip("/") or url.query:
        shown = raw.split(";")[0] + (";..." if ";" in raw else "")  # never echo a token
        raise ImproperlyConfigured(f"{name} must look like sc://host:port, got {shown!r}")
    return raw


# Keys that must never protect a production install: the development default,
# and anything short enough to guess.
_MIN_KEY_LENGTH = 50


def require_production_secrets(*, secret_key: str, field_key: str, allowed_hosts: list[str]) -> None:
    """With DEBUG off: refuse ALLOWED_HOSTS=* and a short or development key."""
    if "*" in allowed_hosts:
        raise ImproperlyConfigured("ALLOWED_HOSTS must name the hosts Gapwatch answers for, not '*'")
    for name, key in (("SECRET_KEY", secret_key), ("FIELD_ENCRYPTION_KEY", field_key)):
        if len(key) < _MIN_KEY_LENGTH or "insecure" in key or key.startswith("dev-only"):
            raise ImproperlyConfigured(
                f"{name} must be a random value of at least {_MIN_KEY_LENGTH} characters "
                "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
            )
