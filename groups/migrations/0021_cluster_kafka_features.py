from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('groups', '0020_finding_record_counts'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='kafka_features',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
