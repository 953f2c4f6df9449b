import signal
import threading

from django.core.management.base import BaseCommand

from tasks.protector import run_protectors


class Command(BaseCommand):
    help = ("The standing protection: keep a seat in every live group a protect rule covers and commit "
            "partitions added by anyone at their log start before the group takes them. Runs until SIGTERM "
            "or SIGINT, then leaves every group.")

    def handle(self, *args, **options):
        stopping = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stopping.set())
        self.stdout.write("protector: running (SIGTERM to stop)")
        run_protectors(stop=stopping.is_set)
        self.stdout.write("protector: stopped, every seat left")
