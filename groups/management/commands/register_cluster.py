from django.core.management.base import BaseCommand, CommandError

from groups.cluster_forms import ClusterForm
from groups.models import Cluster
from groups.services.clusters import cluster_register


class Command(BaseCommand):
    help = ("Register a Kafka cluster (or update its bootstrap servers), validated as the cluster form "
            "validates and audited. Idempotent.")

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--bootstrap-servers", required=True)

    def handle(self, *args, name: str, bootstrap_servers: str, **options):
        existing = Cluster.objects.filter(name=name).first()
        # Every other field as stored (or the model's defaults): only the bootstrap servers change.
        stored = {field: getattr(existing or Cluster(), field) for field in ClusterForm.Meta.fields}
        form = ClusterForm(data={**stored, "name": name, "bootstrap_servers": bootstrap_servers}, instance=existing)
        if not form.is_valid():
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
            raise CommandError(f"cluster {name!r} not registered: {problems}")
        cluster, created = cluster_register(data=form.cleaned_data, source="cli")
        self.stdout.write(f"cluster {cluster.name} {'registered' if created else 'updated'}: {cluster.bootstrap_servers}")
