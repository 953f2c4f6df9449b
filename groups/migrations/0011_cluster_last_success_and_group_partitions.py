from django.db import migrations, models


def from_last_poll(apps, schema_editor):
    """A cluster whose last poll succeeded last succeeded then."""
    Cluster = apps.get_model("groups", "Cluster")
    Cluster.objects.filter(status="ok").update(last_success_at=models.F("last_poll_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('groups', '0010_cluster_tls_and_oauth'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='last_success_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(from_last_poll, migrations.RunPython.noop),
        migrations.AddField(
            model_name='grouptopic',
            name='partitions',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
