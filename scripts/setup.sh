#!/usr/bin/env bash
# Installs everything the stack and the tests need, once; quick when done.
#  1. Debian packages (PostgreSQL, Redis, Chromium for browser tests) when
#     missing and running as root.
#  2. Kafka broker/tools jars and the Spark Kafka connector jars, with Maven.
#  3. .venv with the project and its test dependencies (redone when
#     pyproject.toml changes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GAPWATCH_ROOT"
mkdir -p "$GAPWATCH_HOME"

need_packages=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need_packages+=(postgresql)
command -v redis-server >/dev/null || need_packages+=(redis-server)
[ "${SKIP_BROWSER:-0}" = 1 ] || command -v chromium >/dev/null || need_packages+=(chromium)
command -v java >/dev/null || need_packages+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_packages+=(maven)
# The single-reader reference of the backfill benchmark (bench/backfill_bench.py).
command -v kcat >/dev/null || need_packages+=(kcat)
# npm installs axe-core, which the browser tests inject into every page (services/npm).
command -v npm >/dev/null || need_packages+=(npm)
# promtool checks the shipped alerting rules (tests/integration/test_monitoring.py).
command -v promtool >/dev/null || need_packages+=(prometheus)
if [ ${#need_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing ${need_packages[*]}; install them (apt-get install ${need_packages[*]}) or run as root" >&2
    exit 1
  fi
  echo "setup: installing ${need_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_packages[@]}" >/dev/null
  # The Debian packages start their own servers where they can; ours run under .gapwatch/.
  service redis-server stop >/dev/null 2>&1 || true
fi

jars_stamp=$GAPWATCH_HOME/lib/.stamp
jars_hash=$(cat services/maven/pom.xml services/maven/*/pom.xml | sha256sum | cut -c1-16)
if [ "$(cat "$jars_stamp" 2>/dev/null)" != "$jars_hash" ]; then
  echo "setup: fetching Kafka and Spark connector jars with Maven"
  rm -rf "$GAPWATCH_HOME/lib"
  mvn -q -B -s services/maven/settings.xml -f services/maven/pom.xml dependency:copy-dependencies
  echo "$jars_hash" >"$jars_stamp"
fi

npm_stamp=$GAPWATCH_HOME/npm/.stamp
npm_hash=$(sha256sum services/npm/package.json | cut -c1-16)
if [ "$(cat "$npm_stamp" 2>/dev/null)" != "$npm_hash" ]; then
  echo "setup: installing the browser tests' JavaScript (axe-core) with npm"
  rm -rf "$GAPWATCH_HOME/npm"
  mkdir -p "$GAPWATCH_HOME/npm"
  cp services/npm/package.json "$GAPWATCH_HOME/npm/"
  npm install --prefix "$GAPWATCH_HOME/npm" --no-audit --no-fund --silent
  echo "$npm_hash" >"$npm_stamp"
fi

venv_stamp=$VENV/.gapwatch-stamp
venv_hash=$(cat pyproject.toml $(ls guard/pyproject.toml 2>/dev/null) | sha256sum | cut -c1-16)
if [ "$(cat "$venv_stamp" 2>/dev/null)" != "$venv_hash" ]; then
  echo "setup: installing the project into $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # The consumer-side guard is its own package (not on PyPI); the control
  # plane depends on it for the Redis key layout, so it is installed with it.
  "$VENV/bin/pip" install -q -e ./guard -e ".[test]"
  echo "$venv_hash" >"$venv_stamp"
fi
