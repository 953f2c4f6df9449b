"""The two roles: viewer (read everything) and approver (may request, approve,
dismiss, and manage clusters). Assign people to them in the admin."""

from django.db import migrations


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    Group.objects.get_or_create(name="viewer")
    approver, _ = Group.objects.get_or_create(name="approver")
    approver.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="groups", codename__in=["approve_remediation", "manage_clusters"]
        )
    )


class Migration(migrations.Migration):
    dependencies = [("groups", "0003_remediation"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
