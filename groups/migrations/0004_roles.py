"""The two roles: viewer (read everything) and approver (may request, approve,
dismiss, and manage clusters). Assign people to them in the admin."""

from django.db import migrations

from groups.roles import ensure_roles


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = None
    ensure_roles(group_model=apps.get_model("auth", "Group"), permission_model=apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [("groups", "0003_remediation"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
