#!/usr/bin/env bash
# Starts and stops the app's own background processes (web, worker, Spark
# Connect server for backfills, beat, demo producer and consumer) with pid files and
# logs under .gapwatch/.
#
#   scripts/app.sh start    (idempotent: a running process is left alone)
#   scripts/app.sh stop
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GAPWATCH_ROOT"
RUN=$GAPWATCH_HOME/run
LOGS=$GAPWATCH_HOME/logs
mkdir -p "$RUN" "$LOGS"
PY=$VENV/bin

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# spawn NAME COMMAND...: runs COMMAND in its own session, so stop can end its children too.
spawn() {
  local name=$1; shift
  local pid=$RUN/$name.pid
  if pid_alive "$pid"; then return 0; fi
  setsid nohup "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$pid"
}

stop_one() {
  local pid=$RUN/$1.pid
  if pid_alive "$pid"; then
    kill -TERM -- -"$(cat "$pid")" 2>/dev/null || kill "$(cat "$pid")" 2>/dev/null || true
    for _ in $(seq 1 60); do pid_alive "$pid" || break; sleep 0.25; done
    pid_alive "$pid" && kill -KILL -- -"$(cat "$pid")" 2>/dev/null || true
  fi
  rm -f "$pid"
}

web_ready() { curl -fs -o /dev/null "http://127.0.0.1:$WEB_PORT/accounts/login/"; }

case ${1:-} in
  start)
    # gunicorn serves plain HTTP on loopback: without DEBUG, Django would redirect it to HTTPS and
    # send its cookies over HTTPS only (a login that never sticks). Behind a TLS proxy, set them to 1.
    SECURE_SSL_REDIRECT=${SECURE_SSL_REDIRECT:-0} SESSION_COOKIE_SECURE=${SESSION_COOKIE_SECURE:-0} \
      CSRF_COOKIE_SECURE=${CSRF_COOKIE_SECURE:-0} spawn web "$PY/gunicorn" -c python:controlplane.gunicorn_conf controlplane.wsgi \
      --bind "127.0.0.1:$WEB_PORT" --access-logfile -
    # The watch has workers of its own (queue "watch": polls and the watcher's ticks), so no job,
    # however long, takes its capacity; jobs and everything else run on the other (issue 42).
    spawn watcher "$PY/celery" -A controlplane worker -Q watch --concurrency 4 --loglevel INFO -n "watch@%h"
    spawn worker "$PY/celery" -A controlplane worker -Q celery --concurrency 2 --loglevel INFO -n "worker@%h"
    # Only when the URL is ours (localhost): a URL of a server elsewhere is the user's to run.
    if [[ "$SPARK_CONNECT_URL" == sc://localhost:* ]]; then
      spawn spark-connect "$PY/python" -m adapters.spark.connect --port "${SPARK_CONNECT_URL##*:}" \
        --master "${SPARK_MASTER:-local[*]}"
      # Two jobs before the first real one, made-up records and then the first cluster's newest,
      # both discarded (adapters/spark/warm_up.py): it ends by itself.
      spawn spark-connect-warm-up "$PY/python" manage.py warm_spark_connect
    fi
    spawn beat "$PY/celery" -A controlplane beat --loglevel INFO \
      -S django_celery_beat.schedulers:DatabaseScheduler --pidfile=
    # The standing protection (issue 43): seats in the live groups that protect rules cover.
    spawn protector "$PY/python" manage.py protect
    if [ "${DEMO:-1}" != 0 ]; then
      spawn demo "$PY/python" -m demo.scenario --bootstrap "$KAFKA_BOOTSTRAP_SERVERS" --state-dir "$GAPWATCH_HOME/demo"
    fi
    for _ in $(seq 1 120); do web_ready && break; sleep 0.25; done
    web_ready || { tail -n 30 "$LOGS/web.log" >&2; echo "app: web server did not answer (log: $LOGS/web.log)" >&2; exit 1; }
    ;;
  stop)
    for name in demo protector beat spark-connect-warm-up spark-connect worker watcher web; do stop_one "$name"; done
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
