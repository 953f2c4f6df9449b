"""Issue 41: an assumed policy proves nothing definite (the figures under
latest move beside the bounds), and a group's own starts can prove its policy."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("groups", "0025_repair_rules")]

    operations = [
        migrations.AddField(
            model_name="finding", name="missed_definite_if_latest",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="finding", name="missed_possible_if_latest",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="consumergroup", name="evidenced_policy",
            field=models.CharField(choices=[("unknown", "Unknown"), ("latest", "Latest"), ("earliest", "Earliest")],
                                   default="unknown", max_length=10),
        ),
        migrations.AddField(
            model_name="consumergroup", name="policy_evidence", field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="consumergroup", name="policy_evidenced_at", field=models.DateTimeField(blank=True, null=True),
        ),
    ]
