from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("groups", "0023_expansion_job"),
    ]

    operations = [
        migrations.AddField(
            model_name="remediationjob",
            name="progress_stages",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
