import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from groups.cluster_forms import ClusterForm
from groups.models import Cluster
from groups.services.clusters import cluster_register
from groups.selectors.clusters import cluster_named

# Secrets come from the environment or a file, never from the command line (other users see it in ps).
SECRET_ENVIRONMENT = {
    "sasl_password": "GAPWATCH_SASL_PASSWORD",
    "ssl_key_password": "GAPWATCH_SSL_KEY_PASSWORD",
    "oauth_client_secret": "GAPWATCH_OAUTH_CLIENT_SECRET",
}
# Options that name a field: what is not given keeps its stored value (or the default).
FIELD_OPTIONS = ("security_protocol", "sasl_mechanism", "sasl_username", "oauth_token_endpoint", "oauth_client_id",
                 "oauth_scope")
PEM_FILES = {"ca_file": "ssl_ca_pem", "certificate_file": "ssl_certificate_pem"}


class Command(BaseCommand):
    help = ("Register a Kafka cluster (or update it), validated as the cluster form validates and audited. "
            "Idempotent. Secrets: " + ", ".join(f"${env}" for env in SECRET_ENVIRONMENT.values())
            + " and --key-file (a path); never on the command line.")

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--bootstrap-servers", required=True)
        parser.add_argument("--security-protocol", choices=Cluster.SecurityProtocol.values)
        parser.add_argument("--sasl-mechanism", choices=[value for value in Cluster.SaslMechanism.values if value])
        parser.add_argument("--sasl-username")
        parser.add_argument("--ca-file", type=Path, help="PEM: the CA certificates that signed the brokers'")
        parser.add_argument("--certificate-file", type=Path, help="PEM: the client certificate (mutual TLS)")
        parser.add_argument("--key-file", type=Path, help="PEM: the client certificate's private key")
        parser.add_argument("--hostname-verification", choices=["https", "none"])
        parser.add_argument("--oauth-token-endpoint")
        parser.add_argument("--oauth-client-id")
        parser.add_argument("--oauth-scope")

    def handle(self, *args, name: str, bootstrap_servers: str, **options):
        existing = cluster_named(name=name)
        # Every field not given as stored (or the model's default).
        current = existing or Cluster()
        data = {field: getattr(current, field) for field in ClusterForm.Meta.fields}
        data["ssl_endpoint_identification"] = "https" if current.ssl_endpoint_identification else "none"
        data.update({"name": name, "bootstrap_servers": bootstrap_servers})
        data.update({field: options[field] for field in FIELD_OPTIONS if options.get(field) is not None})
        if options.get("hostname_verification"):
            data["ssl_endpoint_identification"] = options["hostname_verification"]
        for option, field in PEM_FILES.items():
            if options.get(option):
                data[field] = self._read(options[option])
        secrets = {field: os.environ[env] for field, env in SECRET_ENVIRONMENT.items() if os.environ.get(env)}
        if options.get("key_file"):
            secrets["ssl_key_pem"] = self._read(options["key_file"])
        form = ClusterForm(data={**data, **secrets}, instance=existing)
        if not form.is_valid():
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
            raise CommandError(f"cluster {name!r} not registered: {problems}")
        cluster, created = cluster_register(data=form.cleaned_data, secrets=form.secrets, source="cli")
        self.stdout.write(f"cluster {cluster.name} {'registered' if created else 'updated'}: {cluster.bootstrap_servers}")

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text()
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
