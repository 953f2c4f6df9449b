from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('groups', '0019_transactions_isolation'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='kafka_features',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
