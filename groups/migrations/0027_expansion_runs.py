"""Issue 42: an expansion job advances in short runs, never a sleeping worker."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("groups", "0026_policy_evidence_and_if_latest")]

    operations = [
        migrations.AddField(model_name="expansionjob", name="run_token",
                            field=models.CharField(blank=True, default="", max_length=32)),
        migrations.AddField(model_name="expansionjob", name="attempts",
                            field=models.PositiveIntegerField(default=0)),
    ]
