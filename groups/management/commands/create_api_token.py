from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from groups.services.tokens import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a user; the token is printed once and only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--name", default="cli")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        _, key = api_token_create(user=user, name=options["name"])
        self.stdout.write(key)
