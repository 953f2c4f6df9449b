"""gunicorn's settings for Gapwatch's web process, one home for every way it
starts (scripts/app.sh, the Dockerfile, the load test):
``gunicorn -c python:controlplane.gunicorn_conf controlplane.wsgi``.
Command-line flags (and gunicorn's own ``GUNICORN_CMD_ARGS``) still win:
``--bind``, ``--workers``..."""

bind = "0.0.0.0:8000"
workers = 2
worker_class = "gthread"
threads = 4
timeout = 60
# The gthread worker closes a connection that waits longer than ``keepalive``
# for its (next) request, also one whose request is already on the wire when
# its event loop was held up (gunicorn#1698, #3038): on a busy 2-core machine
# the 2 s default dropped six requests of a load test at one instant
# (RemoteDisconnected, Connection reset). 30 s outlasts any such stall, and a
# kept-alive connection costs a socket, not a thread.
keepalive = 30
