"""OpenLDAP's ``slapd`` (Debian's package, which scripts/setup.sh installs), a
real LDAP server for the tests of LDAP login: a directory of its own in a
temporary folder (``slapd -f`` with a generated slapd.conf, the mdb backend),
plain LDAP with StartTLS and LDAPS on free loopback ports, its server
certificate signed by a CA of the test's own (tests/pki.py).

The directory is ``dc=gapwatch,dc=test``: people under ``ou=people``,
groups under ``ou=groups`` (``groupOfNames``, with a ``posixGroup`` twin under
``ou=posix``), and a service account (``cn=gapwatch,ou=services``) that may
search; anonymous users may only bind. Entries are added and changed with
ldapadd and ldapmodify (ldap-utils) as the directory's root.

``start`` returns once slapd answers a search; ``close`` kills it and removes
its folder. It dies with the test process too (``_die_with_parent``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.harness.processes import _die_with_parent, free_ports
from tests.harness.kafka_clients import wait_until
from tests.pki import CertificateAuthority

SLAPD = "/usr/sbin/slapd"
SCHEMAS = Path("/etc/ldap/schema")
SUFFIX = "dc=gapwatch,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
BIND_DN = f"cn=gapwatch,ou=services,{SUFFIX}"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
POSIX_GROUPS = f"ou=posix,{SUFFIX}"
# groupOfNames must have a member: every group keeps this one, so the last person can leave.
NOBODY = f"cn=nobody,{SUFFIX}"


def ssha(password: str) -> str:
    """``{SSHA}``: what slappasswd writes (salted SHA-1), made without a process."""
    salt = secrets.token_bytes(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


class Slapd:
    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gapwatch-slapd-"))
        self.port, self.tls_port = free_ports(2)
        self.uri = f"ldap://127.0.0.1:{self.port}"
        self.ldaps_uri = f"ldaps://127.0.0.1:{self.tls_port}"
        self.ca = CertificateAuthority("Gapwatch test LDAP CA")
        self.ca_file = self.workdir / "ca.pem"
        self.root_password = secrets.token_urlsafe(18)
        self.bind_password = secrets.token_urlsafe(18)
        self.process: subprocess.Popen | None = None
        self._next_uid = 10000

    def _write_config(self) -> Path:
        server = self.ca.issue("127.0.0.1", hosts=("127.0.0.1", "localhost"))
        self.ca_file.write_text(self.ca.certificate_pem)
        (self.workdir / "server.pem").write_text(server.certificate_pem)
        key = self.workdir / "server.key"
        key.write_text(server.key_pem())
        key.chmod(0o600)
        (self.workdir / "data").mkdir()
        schemas = "\n".join(f"include {SCHEMAS / name}.schema" for name in ("core", "cosine", "inetorgperson", "nis"))
        config = self.workdir / "slapd.conf"
        config.write_text(f"""{schemas}
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {self.workdir / "slapd.pid"}
TLSCACertificateFile {self.ca_file}
TLSCertificateFile {self.workdir / "server.pem"}
TLSCertificateKeyFile {key}

database mdb
maxsize 16777216
suffix "{SUFFIX}"
rootdn "{ROOT_DN}"
rootpw {ssha(self.root_password)}
directory {self.workdir / "data"}
index objectClass,uid,cn,member,memberUid eq
# People bind with their password (anonymous may only bind); Gapwatch's service account reads.
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{BIND_DN}" read by self read by * none
""")
        return config

    def start(self) -> Slapd:
        """slapd on ldap:// (StartTLS) and ldaps://, loaded with the bare tree; waits until it answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        log = open(self.workdir / "slapd.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            # -d: stay in the foreground (logging connections and operations to slapd.log).
            [SLAPD, "-f", str(config), "-h", f"{self.uri}/ {self.ldaps_uri}/", "-d", "stats"],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
        )

        def answering() -> bool:
            assert self.process.poll() is None, f"slapd exited; see {self.workdir / 'slapd.log'}"
            self._tool("ldapwhoami", check=True)
            return True

        wait_until(answering, timeout=30, what=f"slapd on {self.uri}", retry_on=(subprocess.CalledProcessError,))
        self.add(f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
dc: gapwatch
o: Gapwatch tests

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: ou=posix,{SUFFIX}
objectClass: organizationalUnit
ou: posix

dn: ou=services,{SUFFIX}
objectClass: organizationalUnit
ou: services

dn: {BIND_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: gapwatch
userPassword: {ssha(self.bind_password)}
""")
        return self

    def _tool(self, tool: str, ldif: str = "", *, check: bool = True) -> subprocess.CompletedProcess:
        """An ldap-utils tool as the directory's root, over StartTLS with the test CA."""
        return subprocess.run(
            [tool, "-x", "-ZZ", "-H", self.uri, "-D", ROOT_DN, "-w", self.root_password],
            input=ldif, capture_output=True, text=True, timeout=30, check=check,
            env={**os.environ, "LDAPTLS_CACERT": str(self.ca_file), "LDAPTLS_REQCERT": "demand"},
        )

    def add(self, ldif: str) -> None:
        """ldapadd: new entries."""
        done = self._tool("ldapadd", ldif, check=False)
        assert done.returncode == 0, f"ldapadd failed: {done.stderr}"

    def modify(self, ldif: str) -> None:
        """ldapmodify: changes (``changetype`` in the LDIF)."""
        done = self._tool("ldapmodify", ldif, check=False)
        assert done.returncode == 0, f"ldapmodify failed: {done.stderr}"

    def add_person(self, uid: str, password: str, *, groups: tuple[str, ...] = (), mail: str = "") -> str:
        """A person (inetOrgPerson and posixAccount) with ``password`` (stored
        {SSHA}), in ``groups`` (each made when missing, as a groupOfNames and a
        posixGroup of the same name); returns their DN."""
        self._next_uid += 1
        dn = f"uid={uid},{PEOPLE}"
        self.add(f"""dn: {dn}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {uid}
cn: {uid.title()} Tester
givenName: {uid.title()}
sn: Tester
mail: {mail or f"{uid}@example.test"}
uidNumber: {self._next_uid}
gidNumber: {self._next_uid}
homeDirectory: /home/{uid}
userPassword: {ssha(password)}
""")
        for group in groups:
            self.set_membership(dn, group, member=True)
        return dn

    def group_exists(self, group: str) -> bool:
        found = subprocess.run(
            ["ldapsearch", "-x", "-ZZ", "-LLL", "-H", self.uri, "-D", ROOT_DN, "-w", self.root_password,
             "-b", f"cn={group},{GROUPS}", "-s", "base", "dn"],
            capture_output=True, text=True, timeout=30,
            env={**os.environ, "LDAPTLS_CACERT": str(self.ca_file), "LDAPTLS_REQCERT": "demand"})
        return found.returncode == 0

    def set_membership(self, member_dn: str, group: str, *, member: bool) -> None:
        """Adds the entry ``member_dn`` (a person or a group) to ``group`` or
        removes it, in both the groupOfNames and (for people) the posixGroup."""
        uid = member_dn.split(",")[0].split("=", 1)[1] if member_dn.startswith("uid=") else ""
        if not self.group_exists(group):
            if not member:
                return
            self._next_uid += 1
            self.add(f"""dn: cn={group},{GROUPS}
objectClass: groupOfNames
cn: {group}
member: {NOBODY}
member: {member_dn}

dn: cn={group},{POSIX_GROUPS}
objectClass: posixGroup
cn: {group}
gidNumber: {self._next_uid}
""" + (f"memberUid: {uid}\n" if uid else ""))
            return
        change = "add" if member else "delete"
        self.modify(f"""dn: cn={group},{GROUPS}
changetype: modify
{change}: member
member: {member_dn}
""" + (f"""
dn: cn={group},{POSIX_GROUPS}
changetype: modify
{change}: memberUid
memberUid: {uid}
""" if uid else ""))

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        shutil.rmtree(self.workdir, ignore_errors=True)
