"""A finding's way out (repaired, dismissed, expired), the job that repaired
it and what it recovered. Findings closed before this migration get the
resolution their closed_reason names."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def resolutions_from_reasons(apps, schema_editor):
    Finding = apps.get_model("groups", "Finding")
    closed = Finding.objects.filter(closed_at__isnull=False, resolution="")
    closed.filter(closed_reason__startswith="dismissed").update(resolution="dismissed")
    # Until now the only other way out was the topic's deletion: its offsets are gone.
    closed.exclude(closed_reason__startswith="dismissed").update(resolution="expired")


class Migration(migrations.Migration):

    dependencies = [
        ('groups', '0007_finding_pickup'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='finding',
            name='recovered_messages',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='finding',
            name='redelivered_messages',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='finding',
            name='resolution',
            field=models.CharField(blank=True, choices=[('repaired', 'Repaired'), ('dismissed', 'Dismissed'), ('expired', 'Expired')], default='', max_length=10),
        ),
        migrations.AddField(
            model_name='finding',
            name='resolved_by_job',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='resolved_findings', to='groups.remediationjob'),
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['resolution', 'closed_at'], name='groups_find_resolut_e7248a_idx'),
        ),
        migrations.RunPython(resolutions_from_reasons, migrations.RunPython.noop),
    ]
