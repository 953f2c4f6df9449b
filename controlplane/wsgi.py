"""The WSGI application gunicorn serves (`make up`, the Dockerfile)."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()

# Everything loaded at start (Django, the project's modules, settings) leaves
# the garbage collector's view: a full collection then scans only what
# requests allocate. The triaged home page over 10,000 findings allocates
# enough to trigger full collections, each of which walked ~145,000 loaded
# objects: its p95 went from 205 ms to 129 ms (bench/RESULTS.md).
gc.freeze()
