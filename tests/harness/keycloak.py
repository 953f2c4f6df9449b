"""Keycloak, a real OpenID provider, for the tests of OAUTHBEARER clusters:
the distribution that scripts/setup.sh unpacks into ``$GAPWATCH_HOME/keycloak``
(Maven Central, ``org.keycloak:keycloak-quarkus-dist``) and built once
(``kc.sh build``: an in-memory database), run with the Java 21+ that setup.sh
found as ``kc.sh start --optimized`` (no rebuild on start), plain HTTP, on
free loopback ports. A realm is imported through the admin API (``import_realm``): a
confidential client per caller, client-credentials only, with the audience
the broker expects.

Start once per session (``start``, then ``wait``: about 20 s on two cores),
``close`` kills it and removes its folder. It dies with the test process too
(SIGTERM, so kc.sh stops its Java child: ``procs._die_with_parent``).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from tests.harness.processes import _die_with_parent, free_ports
from tests.harness.kafka_clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
GAPWATCH_HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))
HEAP = "-Xms64m -Xmx384m"
# Compiled by C1 only: a test's Keycloak serves a few hundred requests, and C2
# doubled the CPU its start took (23 s against 11 s, measured on 2 cores).
JIT = "-XX:TieredStopAtLevel=1"
REALM = "gapwatch"
AUDIENCE = "kafka"
# Short-lived tokens (the realm's minimum is one minute), so a session sees refreshes.
TOKEN_SECONDS = 60


def keycloak_install() -> tuple[Path, Path]:
    """Keycloak's home and the Java home it runs on, as scripts/setup.sh left them."""
    homes = sorted((GAPWATCH_HOME / "keycloak").glob("keycloak-*/bin/kc.sh"))
    java_file = GAPWATCH_HOME / "keycloak" / "java-home"
    if not homes or not java_file.is_file():
        raise AssertionError(f"Keycloak is not installed in {GAPWATCH_HOME / 'keycloak'}: run scripts/setup.sh "
                             "(it needs Java 21 or newer)")
    return homes[-1].parents[1], Path(java_file.read_text().strip())


class Keycloak:
    def __init__(self, workdir: Path | None = None) -> None:
        self.home, self.java_home = keycloak_install()
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gapwatch-keycloak-"))
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self._admin_password = secrets.token_urlsafe(24)
        self.process: subprocess.Popen | None = None

    @property
    def issuer(self) -> str:
        return f"{self.url}/realms/{REALM}"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/certs"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/token"

    def start(self) -> Keycloak:
        """Start the server; returns at once (``wait`` for it to serve)."""
        env = {**os.environ, "JAVA_HOME": str(self.java_home), "JAVA_OPTS_KC_HEAP": HEAP, "JAVA_OPTS_APPEND": JIT,
               # The bootstrap admin (master realm) exists only in this process's memory.
               "KC_BOOTSTRAP_ADMIN_USERNAME": "admin", "KC_BOOTSTRAP_ADMIN_PASSWORD": self._admin_password}
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "keycloak.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            # Built by setup.sh (--db=dev-mem, no management interface); one node: a local cache.
            [str(self.home / "bin" / "kc.sh"), "start", "--optimized", "--cache=local", "--http-enabled=true",
             "--hostname-strict=false", "--http-host=127.0.0.1", f"--http-port={self.port}"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=functools.partial(_die_with_parent, signal.SIGTERM),
        )
        return self

    def wait(self, timeout: float = 240) -> Keycloak:
        def serving() -> bool:
            assert self.process.poll() is None, f"Keycloak exited; see {self.workdir / 'keycloak.log'}"
            with urllib.request.urlopen(f"{self.url}/realms/master/.well-known/openid-configuration", timeout=5):
                return True

        wait_until(serving, timeout=timeout, what="Keycloak to serve OpenID discovery", retry_on=(Exception,))
        return self

    def import_realm(self) -> None:
        """The realm the broker trusts; clients come with ``add_client``."""
        self._admin("POST", "/admin/realms", {
            "realm": REALM, "enabled": True, "accessTokenLifespan": TOKEN_SECONDS,
            # Kept in memory: every token a client was issued (client_logins).
            "eventsEnabled": True, "enabledEventTypes": ["CLIENT_LOGIN"],
        })

    def add_client(self, client_id: str, *, token_seconds: int | None = None) -> str:
        """A confidential client with the client-credentials flow only, whose
        tokens carry the broker's audience (and live ``token_seconds``, if
        given, instead of the realm's TOKEN_SECONDS); returns its secret."""
        secret = secrets.token_urlsafe(24)
        lifespan = {"attributes": {"access.token.lifespan": str(token_seconds)}} if token_seconds else {}
        self._admin("POST", f"/admin/realms/{REALM}/clients", {
            **lifespan,
            "clientId": client_id, "enabled": True, "publicClient": False, "secret": secret,
            "clientAuthenticatorType": "client-secret", "serviceAccountsEnabled": True,
            "standardFlowEnabled": False, "directAccessGrantsEnabled": False,
            "protocolMappers": [{
                "name": "kafka audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper",
                "config": {"included.custom.audience": AUDIENCE, "access.token.claim": "true",
                           "id.token.claim": "false"},
            }],
        })
        return secret

    def add_login_client(self, client_id: str, *, base_url: str, groups_claim: str = "groups") -> str:
        """A confidential client for people logging in to Gapwatch at
        ``base_url`` (authorization code with PKCE S256 required), whose ID
        token and userinfo carry the person's group names in ``groups_claim``;
        returns its secret."""
        secret = secrets.token_urlsafe(24)
        self._admin("POST", f"/admin/realms/{REALM}/clients", {
            "clientId": client_id, "enabled": True, "publicClient": False, "secret": secret,
            "clientAuthenticatorType": "client-secret", "standardFlowEnabled": True,
            "directAccessGrantsEnabled": False, "serviceAccountsEnabled": False,
            "redirectUris": [f"{base_url}/oidc/callback/"], "webOrigins": [base_url],
            "attributes": {"pkce.code.challenge.method": "S256",
                           "post.logout.redirect.uris": f"{base_url}/accounts/login/"},
            "protocolMappers": [{
                "name": "groups", "protocol": "openid-connect", "protocolMapper": "oidc-group-membership-mapper",
                "config": {"claim.name": groups_claim, "full.path": "false", "id.token.claim": "true",
                           "access.token.claim": "true", "userinfo.token.claim": "true"},
            }],
        })
        return secret

    def add_user(self, username: str, password: str, *, groups: tuple[str, ...] = (), email: str = "") -> str:
        """A person of the realm with a password and membership of ``groups``
        (made when missing); returns their subject (the user's id)."""
        self._admin("POST", f"/admin/realms/{REALM}/users", {
            "username": username, "enabled": True, "emailVerified": True, "email": email or f"{username}@example.test",
            "firstName": username.title(), "lastName": "Tester",
            "credentials": [{"type": "password", "value": password, "temporary": False}],
        })
        subject = self._admin("GET", f"/admin/realms/{REALM}/users?exact=true&username={urllib.parse.quote(username)}")[0]["id"]
        for group in groups:
            self.set_membership(subject, group, member=True)
        return subject

    def set_membership(self, subject: str, group: str, *, member: bool) -> None:
        """Adds the user to ``group`` (made when missing) or removes them from it."""
        found = [g for g in self._admin("GET", f"/admin/realms/{REALM}/groups?search={urllib.parse.quote(group)}")
                 if g["name"] == group]
        if not found:
            self._admin("POST", f"/admin/realms/{REALM}/groups", {"name": group})
            found = [g for g in self._admin("GET", f"/admin/realms/{REALM}/groups?search={urllib.parse.quote(group)}")
                     if g["name"] == group]
        self._admin("PUT" if member else "DELETE", f"/admin/realms/{REALM}/users/{subject}/groups/{found[0]['id']}")

    def set_client_enabled(self, client_id: str, enabled: bool) -> None:
        """Disable (revoke) or enable a client: a disabled one gets no token."""
        found = self._admin("GET", f"/admin/realms/{REALM}/clients?clientId={urllib.parse.quote(client_id)}")
        self._admin("PUT", f"/admin/realms/{REALM}/clients/{found[0]['id']}", {**found[0], "enabled": enabled})

    def client_logins(self, client_id: str) -> list[int]:
        """When (Unix ms) each token of the client was issued, oldest first."""
        events = self._admin("GET", f"/admin/realms/{REALM}/events?type=CLIENT_LOGIN&max=1000"
                                    f"&client={urllib.parse.quote(client_id)}")
        return sorted(event["time"] for event in events)

    def _admin(self, method: str, path: str, body: dict | None = None):
        token = self._post_form(f"{self.url}/realms/master/protocol/openid-connect/token", {
            "grant_type": "password", "client_id": "admin-cli", "username": "admin",
            "password": self._admin_password})["access_token"]
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    @staticmethod
    def _post_form(url: str, form: dict) -> dict:
        with urllib.request.urlopen(url, data=urllib.parse.urlencode(form).encode(), timeout=30) as answer:
            return json.loads(answer.read())

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        shutil.rmtree(self.workdir, ignore_errors=True)
