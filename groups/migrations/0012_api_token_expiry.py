"""Personal API tokens expire, can be revoked and can be read-only (issue 23).
Tokens made before this migration expire API_TOKEN_MAX_DAYS after they were made."""

from datetime import timedelta

from django.conf import settings
from django.db import migrations, models


def expire_old_tokens(apps, schema_editor):
    ApiToken = apps.get_model("groups", "ApiToken")
    for token in ApiToken.objects.filter(expires_at__isnull=True):
        token.expires_at = token.created_at + timedelta(days=settings.API_TOKEN_MAX_DAYS)
        token.save(update_fields=["expires_at"])


class Migration(migrations.Migration):

    dependencies = [
        ("groups", "0011_cluster_last_success_and_group_partitions"),
    ]

    operations = [
        migrations.AddField(model_name="apitoken", name="expires_at", field=models.DateTimeField(null=True)),
        migrations.AddField(model_name="apitoken", name="revoked_at",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(model_name="apitoken", name="read_only", field=models.BooleanField(default=False)),
        migrations.RunPython(expire_old_tokens, migrations.RunPython.noop),
        migrations.AlterField(model_name="apitoken", name="expires_at", field=models.DateTimeField()),
    ]
