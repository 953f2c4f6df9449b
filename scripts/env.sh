# Sourced by the scripts and the Makefile's recipes: one place for the local
# stack's ports, paths and the environment the app reads. Every value can be
# overridden from the caller's environment.
GAPWATCH_ROOT=${GAPWATCH_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
GAPWATCH_HOME=${GAPWATCH_HOME:-$GAPWATCH_ROOT/.gapwatch}
PG_PORT=${PG_PORT:-5439}
REDIS_PORT=${REDIS_PORT:-6379}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
WEB_PORT=${WEB_PORT:-8000}
KAFKA_HEAP=${KAFKA_HEAP:-512m}
VENV=${VENV:-$GAPWATCH_ROOT/.venv}

export GAPWATCH_ROOT GAPWATCH_HOME PG_PORT REDIS_PORT KAFKA_PORT KAFKA_CONTROLLER_PORT WEB_PORT VENV
export DATABASE_URL=${DATABASE_URL:-postgresql://gapwatch:gapwatch@127.0.0.1:$PG_PORT/gapwatch}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}
export KAFKA_BOOTSTRAP_SERVERS=${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:$KAFKA_PORT}
# The local stack runs as it is deployed, DEBUG off: Gapwatch's own error pages,
# never Django's debug page listing every URL. `DEBUG=1 make up` for developers.
export DEBUG=${DEBUG:-0}
# Keys of this install, made once, readable by its owner only (never the public
# development key: anyone reading the database could decrypt SASL passwords).
install_secret() {
  local file=$GAPWATCH_HOME/$1
  if [ ! -s "$file" ]; then
    mkdir -p "$GAPWATCH_HOME"
    (umask 077 && head -c 48 /dev/urandom | base64 | tr -d '\n/+=' >"$file")
  fi
  cat "$file"
}
export SECRET_KEY=${SECRET_KEY:-$(install_secret secret-key)}
export FIELD_ENCRYPTION_KEY=${FIELD_ENCRYPTION_KEY:-$(install_secret field-encryption-key)}
export ALLOWED_HOSTS=${ALLOWED_HOSTS:-127.0.0.1,localhost}
export SPARK_KAFKA_JARS_DIR=${SPARK_KAFKA_JARS_DIR:-$GAPWATCH_HOME/lib/spark}
# The Spark Connect server app.sh starts for backfills (empty SPARK_CONNECT_URL:
# none; every job runs in a Spark process of its own), and its token.
SPARK_CONNECT_PORT=${SPARK_CONNECT_PORT:-15002}
export SPARK_CONNECT_PORT
export SPARK_CONNECT_URL=${SPARK_CONNECT_URL-sc://localhost:$SPARK_CONNECT_PORT}
export SPARK_CONNECT_TOKEN=${SPARK_CONNECT_TOKEN:-$(install_secret spark-connect-token)}
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-controlplane.settings}
# Spark JVMs started through spark-submit map the class archive setup.sh made
# (adapters/spark/class_archive.py); a JVM that does not match it ignores it.
if [ -z "${SPARK_SUBMIT_OPTS+x}" ] && [ -s "$GAPWATCH_HOME/spark/classes.jsa" ]; then
  export SPARK_SUBMIT_OPTS="-XX:SharedArchiveFile=$GAPWATCH_HOME/spark/classes.jsa"
fi
