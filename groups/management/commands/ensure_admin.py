"""Create (or keep) the admin user used by `make up`.

Credentials come from ADMIN_USERNAME / ADMIN_PASSWORD, or a random password
is generated once and kept in a file readable only by its owner.
"""

import os
import secrets
from pathlib import Path

from django.core.management.base import BaseCommand

from groups.services.accounts import admin_ensure


class Command(BaseCommand):
    help = "Create the admin user if missing and print its credentials."

    def add_arguments(self, parser):
        parser.add_argument("--password-file", type=Path, required=True)

    def handle(self, *args, password_file: Path, **options):
        username = os.environ.get("ADMIN_USERNAME", "admin")
        password = os.environ.get("ADMIN_PASSWORD", "")
        if not password:
            if password_file.exists():
                password = password_file.read_text().strip()
            else:
                password = secrets.token_urlsafe(12)
                password_file.parent.mkdir(parents=True, exist_ok=True)
                password_file.touch(mode=0o600)
                password_file.write_text(password + "\n")
        admin_ensure(username=username, password=password)
        self.stdout.write(f"login: {username} / {password}")
