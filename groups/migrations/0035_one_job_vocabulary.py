"""Both kinds of job speak one vocabulary (groups.domain.job_states): an
expansion's ``state`` becomes ``status``, and its words those of a
remediation's: planned -> requested, done -> succeeded, done_with_loss ->
succeeded_with_loss (approved, running, failed and refused stay).
Reversible. Audit rows keep the action names they were written with
("expansion.done"): the audit is append-only."""

from django.db import migrations, models

# The expansion's old words and the vocabulary's; any other value is the same in both.
RENAMED = {"planned": "requested", "done": "succeeded", "done_with_loss": "succeeded_with_loss"}


def _rename(apps, mapping: dict[str, str]) -> None:
    expansion_job = apps.get_model("groups", "ExpansionJob")
    for old, new in mapping.items():
        expansion_job.objects.filter(status=old).update(status=new)


def forward(apps, schema_editor) -> None:
    _rename(apps, RENAMED)


def backward(apps, schema_editor) -> None:
    _rename(apps, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):

    dependencies = [
        ("groups", "0034_console_color_scheme"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="expansionjob",
            name="one_active_expansion_per_topic",
        ),
        migrations.RemoveIndex(
            model_name="expansionjob",
            name="groups_expa_state_75c4b5_idx",
        ),
        migrations.RenameField(
            model_name="expansionjob",
            old_name="state",
            new_name="status",
        ),
        migrations.AlterField(
            model_name="expansionjob",
            name="status",
            field=models.CharField(choices=[("requested", "requested"), ("approved", "approved"),
                                            ("running", "running"), ("succeeded", "succeeded"),
                                            ("succeeded_with_loss", "done with loss"), ("failed", "failed"),
                                            ("refused", "refused")], default="requested", max_length=20),
        ),
        migrations.RunPython(forward, backward),
        migrations.AlterField(
            model_name="remediationjob",
            name="status",
            field=models.CharField(choices=[("requested", "requested"), ("approved", "approved"),
                                            ("queued", "queued"), ("waiting", "waiting"), ("running", "running"),
                                            ("succeeded", "succeeded"), ("failed", "failed"),
                                            ("cancelled", "cancelled")], max_length=20),
        ),
        migrations.AddIndex(
            model_name="expansionjob",
            index=models.Index(fields=["status"], name="groups_expa_status_7a8b22_idx"),
        ),
        migrations.AddConstraint(
            model_name="expansionjob",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ("requested", "approved", "running"))), fields=("topic",),
                name="one_active_expansion_per_topic"),
        ),
    ]
