from django.core.management.base import BaseCommand

from groups.models import Cluster


class Command(BaseCommand):
    help = "Register a Kafka cluster (or update its bootstrap servers). Idempotent."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--bootstrap-servers", required=True)

    def handle(self, *args, name: str, bootstrap_servers: str, **options):
        cluster, created = Cluster.objects.update_or_create(
            name=name, defaults={"bootstrap_servers": bootstrap_servers}
        )
        self.stdout.write(f"cluster {cluster.name} {'registered' if created else 'updated'}: {cluster.bootstrap_servers}")
