"""``python -m tasks.backfill.drive <job id>``: a backfill's driver process
(``tasks.backfill.driver``), Django set up before anything imports a model."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    django.setup()
    from tasks.backfill.driver import main

    sys.exit(main(sys.argv))
