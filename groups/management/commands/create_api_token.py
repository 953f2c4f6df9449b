from django.core.management.base import BaseCommand, CommandError

from groups.services.tokens import TokenRefused, api_token_create
from groups.selectors.access import user_named


class Command(BaseCommand):
    help = "Create an API token for a user; the token is printed once and only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--name", default="cli")
        parser.add_argument("--days", type=int, default=None,
                            help="valid for this many days (default API_TOKEN_DEFAULT_DAYS, at most API_TOKEN_MAX_DAYS)")
        parser.add_argument("--read-only", action="store_true", help="may read, never change anything")

    def handle(self, *args, **options):
        user = user_named(username=options["user"])
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        try:
            _, key = api_token_create(user=user, name=options["name"], days=options["days"],
                                      read_only=options["read_only"])
        except TokenRefused as error:
            raise CommandError(str(error)) from None
        self.stdout.write(key)
