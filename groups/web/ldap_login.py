"""Login through an LDAP directory or Active Directory (issue 23, item 2), on
django-auth-ldap: the login form's username and password are checked by
binding as the person, found by a search as Gapwatch's service account
(LDAP_BIND_DN); their groups come from a group search, and roles from those
groups' names through the role mappings (``groups.services.identity``).

1. Off while LDAP_SERVER_URI is empty; otherwise tried on the login form
   before local accounts (AUTHENTICATION_BACKENDS).
2. The connection is StartTLS (LDAP_START_TLS, on by default) or ldaps://,
   the server's certificate checked against LDAP_CA_FILE (or the system's
   CAs) and its host name.
3. The person is matched to an account by (server URI, DN), never by name: a
   local account of the same name is not taken over. A new person gets a new
   account without a usable password: their password is the directory's and
   never reaches Gapwatch's database.
4. A directory that cannot be asked (down, untrusted certificate, refused
   service account) is a failed login and a message on the login page, in
   words; local accounts still log in.
"""

from __future__ import annotations

import logging

import ldap
from django.conf import settings
from django.db import transaction
from django_auth_ldap.backend import LDAPBackend, ldap_error
from django_auth_ldap.config import (
    GroupOfNamesType,
    LDAPSearch,
    NestedActiveDirectoryGroupType,
    PosixGroupType,
)

from groups.models import DirectoryIdentity
from groups.services.identity import Identity, directory_user_create, identity_login
from groups.selectors.access import users_with_identity

log = logging.getLogger("gapwatch.ldap")

# LDAP_GROUP_TYPE -> how membership is read: member DNs (groupOfNames), member
# uids (posixGroup), or member DNs followed through nested groups (Active Directory).
GROUP_TYPES = {
    "groupOfNames": GroupOfNamesType,
    "posix": PosixGroupType,
    "activedirectory": NestedActiveDirectoryGroupType,
}


def ldap_enabled() -> bool:
    return bool(settings.LDAP_SERVER_URI)


def _start_tls() -> bool:
    # ldaps:// is TLS from the first byte; StartTLS is for ldap:// only.
    return settings.LDAP_START_TLS and not settings.LDAP_SERVER_URI.startswith("ldaps://")


def connection_options(*, require_certificate: int = ldap.OPT_X_TLS_DEMAND, timeout: int | None = None) -> dict:
    """python-ldap options of every connection. OPT_X_TLS_NEWCTX comes last: it
    makes the connection's TLS context from the options set before it."""
    timeout = timeout or settings.LDAP_TIMEOUT
    options = {
        ldap.OPT_REFERRALS: 0,  # Active Directory's referrals would be followed anonymously
        ldap.OPT_NETWORK_TIMEOUT: timeout,
        ldap.OPT_TIMEOUT: timeout,
        ldap.OPT_X_TLS_REQUIRE_CERT: require_certificate,
    }
    if settings.LDAP_CA_FILE:
        options[ldap.OPT_X_TLS_CACERTFILE] = settings.LDAP_CA_FILE
    options[ldap.OPT_X_TLS_NEWCTX] = 0
    return options


def library_settings() -> dict:
    """django-auth-ldap's settings (its AUTH_LDAP_* names without the prefix),
    from Gapwatch's. It writes nothing itself: no attribute or group mirroring,
    no cache of DNs or groups (a login always asks the directory)."""
    return {
        "SERVER_URI": settings.LDAP_SERVER_URI,
        "BIND_DN": settings.LDAP_BIND_DN,
        "BIND_PASSWORD": settings.LDAP_BIND_PASSWORD,
        "START_TLS": _start_tls(),
        "CONNECTION_OPTIONS": connection_options(),
        "USER_SEARCH": LDAPSearch(settings.LDAP_USER_SEARCH_BASE, ldap.SCOPE_SUBTREE, settings.LDAP_USER_FILTER),
        "GROUP_SEARCH": LDAPSearch(settings.LDAP_GROUP_SEARCH_BASE, ldap.SCOPE_SUBTREE,
                                   settings.LDAP_GROUP_FILTER or settings.LDAP_GROUP_FILTERS[settings.LDAP_GROUP_TYPE]),
        "GROUP_TYPE": GROUP_TYPES[settings.LDAP_GROUP_TYPE](),
        "ALWAYS_UPDATE_USER": False,
        "USER_ATTR_MAP": {},
        "MIRROR_GROUPS": None,
        "FIND_GROUP_PERMS": False,
        "CACHE_TIMEOUT": 0,
    }


def _first(attrs: dict | None, name: str) -> str:
    values = (attrs or {}).get(name) or [""]
    return str(values[0])


class DirectoryBackend(LDAPBackend):
    """The LDAP authentication backend: does nothing without LDAP_SERVER_URI."""

    @property
    def default_settings(self) -> dict:
        return library_settings()

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not ldap_enabled():
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_group_permissions(self, user, obj=None):
        # Roles are Django groups, whose permissions the local backend (ModelBackend) gives.
        return set()

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def get_or_build_user(self, username, ldap_user):
        """Called once the person's bind succeeded: their groups are read (an
        LDAPError here fails the login, reported like any other), then their
        account found by (server URI, DN) or made, and their roles set."""
        identity = Identity(
            source=DirectoryIdentity.Source.LDAP, issuer=settings.LDAP_SERVER_URI, subject=ldap_user.dn,
            username=username.strip().lower(), groups=tuple(sorted(ldap_user.group_names)),
            email=_first(ldap_user.attrs, "mail"), first_name=_first(ldap_user.attrs, "givenName"),
            last_name=_first(ldap_user.attrs, "sn"),
        )
        # One transaction: a new account never exists without the identity that finds it again.
        with transaction.atomic():
            user = users_with_identity(source=identity.source, issuer=identity.issuer,
                                       subject=identity.subject).first()
            if user is None:
                user = directory_user_create(identity=identity)
            identity_login(user=user, identity=identity)
        return user, False  # not "built": the library then saves nothing itself


_CONNECTION_ERRORS = (ldap.SERVER_DOWN, ldap.CONNECT_ERROR, ldap.TIMEOUT)
# The diagnosis is a second connection, after a failed one: kept short, since
# every password login waits for it while the directory is failing.
DIAGNOSIS_SECONDS = 2


def certificate_untrusted() -> bool:
    """Whether the directory answers once its certificate is not checked: then
    the certificate was why it could not be asked. No credentials are sent on
    this connection (an anonymous "who am I")."""
    connection = ldap.initialize(settings.LDAP_SERVER_URI.split()[0], bytes_mode=False)
    try:
        options = connection_options(require_certificate=ldap.OPT_X_TLS_ALLOW,
                                     timeout=min(settings.LDAP_TIMEOUT, DIAGNOSIS_SECONDS))
        for option, value in options.items():
            connection.set_option(option, value)
        if _start_tls():
            connection.start_tls_s()
        connection.whoami_s()
        return True
    except _CONNECTION_ERRORS:
        return False
    except ldap.LDAPError:
        return True  # it answered, if with a refusal
    finally:
        try:
            connection.unbind_s()
        except ldap.LDAPError:
            pass  # never connected


def problem_in_words(exception: ldap.LDAPError) -> str:
    """Why the directory could not be asked. A failed TLS handshake (StartTLS's
    CONNECT_ERROR, or no answer on ldaps://) says nothing more through
    OpenLDAP's GnuTLS, so its cause is found by trying without the check."""
    if isinstance(exception, ldap.INVALID_CREDENTIALS):
        return ("the directory refused Gapwatch's service account: an administrator must check "
                "LDAP_BIND_DN and LDAP_BIND_PASSWORD")
    handshake = isinstance(exception, ldap.CONNECT_ERROR) or (
        isinstance(exception, ldap.SERVER_DOWN) and settings.LDAP_SERVER_URI.startswith("ldaps://"))
    if handshake and certificate_untrusted():
        return ("the directory's TLS certificate is not trusted (not signed by a CA of LDAP_CA_FILE, "
                "or not made out to its host name)")
    if isinstance(exception, ldap.CONNECT_ERROR):
        return "the TLS handshake with the directory failed"
    if isinstance(exception, _CONNECTION_ERRORS):
        return "the directory cannot be reached"
    return f"the directory answered with an error ({type(exception).__name__})"


def _note_problem(sender, context, user, request, exception, **kwargs) -> None:
    """django-auth-ldap's ``ldap_error`` (the library has logged it): kept on
    the request for the login page."""
    words = problem_in_words(exception)
    log.warning("LDAP login failed: %s (%s)", words, settings.LDAP_SERVER_URI)
    if request is not None:
        request.ldap_problem = words


ldap_error.connect(_note_problem, sender=DirectoryBackend, dispatch_uid="gapwatch-ldap-problem")


def login_problem(request) -> str | None:
    """The message of the login page when the directory could not be asked."""
    words = getattr(request, "ldap_problem", None)
    if not words:
        return None
    return f"Logging in through the directory failed: {words}." + (
        " Local accounts can still log in." if settings.LOCAL_LOGIN else "")
