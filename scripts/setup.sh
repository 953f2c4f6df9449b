#!/usr/bin/env bash
# Installs everything the stack and the tests need, once; quick when done.
#  1. Debian packages (PostgreSQL, Redis, Chromium for browser tests, slapd
#     and python-ldap's build headers) when missing and running as root.
#  2. Kafka broker/tools jars and the Spark Kafka connector jars, with Maven;
#     Keycloak (the OpenID provider of the OAuth tests), with Maven too, and
#     the Java 21+ it needs, built once for the tests (SKIP_KEYCLOAK=1: neither).
#  3. .venv with the project and its test dependencies (redone when
#     pyproject.toml changes).
#  4. The Go clients of the pickup tests, built with the Go toolchain
#     (Debian's golang-go when go is missing and running as root).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GAPWATCH_ROOT"
mkdir -p "$GAPWATCH_HOME"

need_packages=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need_packages+=(postgresql)
command -v redis-server >/dev/null || need_packages+=(redis-server)
[ "${SKIP_BROWSER:-0}" = 1 ] || command -v chromium >/dev/null || need_packages+=(chromium)
command -v java >/dev/null || need_packages+=(openjdk-17-jre-headless)
command -v javac >/dev/null || need_packages+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_packages+=(maven)
# The single-reader reference of the backfill benchmark (bench/backfill_bench.py).
command -v kcat >/dev/null || need_packages+=(kcat)
# npm installs axe-core, which the browser tests inject into every page (services/npm).
command -v npm >/dev/null || need_packages+=(npm)
# promtool checks the shipped alerting rules (tests/integration/test_monitoring.py).
command -v promtool >/dev/null || need_packages+=(prometheus)
# python-ldap (under django-auth-ldap: LDAP login) builds against OpenLDAP's and SASL's headers.
[ -f /usr/include/ldap.h ] || need_packages+=(libldap2-dev)
[ -f /usr/include/sasl/sasl.h ] || need_packages+=(libsasl2-dev)
# The LDAP server of the LDAP login tests (tests/integration/slapd.py) and its ldapmodify.
[ -x /usr/sbin/slapd ] || need_packages+=(slapd)
command -v ldapmodify >/dev/null || need_packages+=(ldap-utils)
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
  service slapd stop >/dev/null 2>&1 || true
fi

jars_stamp=$GAPWATCH_HOME/lib/.stamp
jars_hash=$(cat services/maven/pom.xml services/maven/kafka/pom.xml services/maven/spark/pom.xml \
  services/maven/streams/pom.xml | sha256sum | cut -c1-16)
if [ "$(cat "$jars_stamp" 2>/dev/null)" != "$jars_hash" ]; then
  echo "setup: fetching Kafka and Spark connector jars with Maven"
  rm -rf "$GAPWATCH_HOME/lib"
  mvn -q -B -s services/maven/settings.xml -f services/maven/pom.xml dependency:copy-dependencies
  echo "$jars_hash" >"$jars_stamp"
fi

# The older brokers of the release matrix (tests/integration/test_kafka_releases.py),
# one folder each: $GAPWATCH_HOME/lib/kafka-<version>. 3.x logs through log4j 1, 4.x Log4j2.
releases_dir=$GAPWATCH_HOME/lib/kafka-releases
releases_hash=$(cat services/maven/kafka-release/pom.xml services/maven/kafka-release/releases | sha256sum | cut -c1-16)
if [ "$(cat "$releases_dir/.stamp" 2>/dev/null)" != "$releases_hash" ]; then
  rm -rf "$releases_dir"
  while read -r release; do
    [ -n "$release" ] || continue
    echo "setup: fetching the Kafka $release broker jars with Maven"
    logging=log4j2
    [ "${release%%.*}" -ge 4 ] || logging=log4j1
    mvn -q -B -s services/maven/settings.xml -f services/maven/kafka-release/pom.xml dependency:copy-dependencies \
      -P "$logging" -Dkafka.release="$release" -Djars.dir="$releases_dir/$release"
  done <services/maven/kafka-release/releases
  echo "$releases_hash" >"$releases_dir/.stamp"
fi

# Keycloak runs on Java 21 or newer; the broker and Spark stay on the default java.
java_21_home() {
  local home version
  for home in "${KEYCLOAK_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/*; do
    [ -n "$home" ] && [ -x "$home/bin/java" ] || continue
    version=$("$home/bin/java" -XshowSettings:properties -version 2>&1 |
      awk -F'= ' '/java.specification.version/ {print $2}')
    if [ "${version%%.*}" -ge 21 ] 2>/dev/null; then
      echo "$home"
      return
    fi
  done
}
if [ "${SKIP_KEYCLOAK:-0}" != 1 ]; then
  keycloak_dir=$GAPWATCH_HOME/keycloak
  keycloak_java=$(java_21_home)
  if [ -z "$keycloak_java" ]; then
    echo "setup: Keycloak (the OpenID provider of the OAuth tests) needs Java 21 or newer, and none was found" \
      "in KEYCLOAK_JAVA_HOME, JAVA_HOME or /usr/lib/jvm/*: install one (e.g. openjdk-21-jre-headless)" \
      "and set KEYCLOAK_JAVA_HOME, or run with SKIP_KEYCLOAK=1 (the OAuth tests will then fail)" >&2
    exit 1
  fi
  keycloak_hash=$(sha256sum services/maven/keycloak/pom.xml | cut -c1-16)
  if [ "$(cat "$keycloak_dir/.stamp" 2>/dev/null)" != "$keycloak_hash" ]; then
    echo "setup: fetching Keycloak with Maven"
    rm -rf "$keycloak_dir"
    mvn -q -B -s services/maven/settings.xml -f services/maven/keycloak/pom.xml dependency:unpack \
      -Dkeycloak.dir="$keycloak_dir"
    echo "$keycloak_hash" >"$keycloak_dir/.stamp"
  fi
  echo "$keycloak_java" >"$keycloak_dir/java-home"
  # Keycloak's build-time options, fixed once here (tests/integration/keycloak.py starts it
  # with `start --optimized`; `start-dev` rebuilds on every start, ~15 s on 2 cores). An
  # in-memory database: each start is a fresh server that leaves nothing in the shared install.
  keycloak_build=(--db=dev-mem --health-enabled=false --metrics-enabled=false)
  keycloak_built=$(echo "$keycloak_hash $keycloak_java ${keycloak_build[*]}" | sha256sum | cut -c1-16)
  if [ "$(cat "$keycloak_dir/.built" 2>/dev/null)" != "$keycloak_built" ]; then
    echo "setup: building Keycloak (${keycloak_build[*]})"
    JAVA_HOME=$keycloak_java "$(ls -d "$keycloak_dir"/keycloak-*/ | tail -1)bin/kc.sh" build "${keycloak_build[@]}" \
      >"$keycloak_dir/build.log" 2>&1 || { echo "setup: kc.sh build failed; see $keycloak_dir/build.log" >&2; exit 1; }
    echo "$keycloak_built" >"$keycloak_dir/.built"
  fi
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

# Gapwatch's own Java helpers (services/java), compiled against the Kafka client
# jars for the JVM tasks/kafka/jvm.py starts; again when they or Java change.
java_helpers=$GAPWATCH_HOME/lib/gapwatch-java
helpers_hash=$( (java -version 2>&1; cat services/java/gapwatch/*.java; ls "$GAPWATCH_HOME/lib/kafka") | sha256sum | cut -c1-16)
if [ "$(cat "$java_helpers/.stamp" 2>/dev/null)" != "$helpers_hash" ]; then
  echo "setup: compiling the Java helpers"
  rm -rf "$java_helpers" && mkdir -p "$java_helpers"
  javac --release 17 -nowarn -cp "$GAPWATCH_HOME/lib/kafka/*" -d "$java_helpers" services/java/gapwatch/*.java
  echo "$helpers_hash" >"$java_helpers/.stamp"
fi

# The Go clients of the pickup tests (tests/clients/go: sarama, kafka-go, franz-go,
# confluent-kafka-go) in one program, built with cgo (confluent-kafka-go links the
# librdkafka its module ships); its modules are fetched here, never when tests run.
go_sources=tests/clients/go
go_binary=$GAPWATCH_HOME/bin/gapwatch-go-consumer
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH=$PATH:/usr/local/go/bin
fi
if ! command -v go >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: the Go clients of the pickup tests need the Go toolchain; install it (apt-get install golang-go)" \
      "or run as root" >&2
    exit 1
  fi
  echo "setup: installing golang-go"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null
fi
go_needed=$(awk '$1 == "go" {print $2}' "$go_sources/go.mod")
go_have=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$go_needed" "$go_have" | sort -V | head -1)" != "$go_needed" ]; then
  echo "setup: the Go clients (tests/clients/go/go.mod) need Go $go_needed or newer; $(command -v go) is $go_have" >&2
  exit 1
fi
go_hash=$( (go env GOVERSION; cat "$go_sources"/go.mod "$go_sources"/go.sum "$go_sources"/*.go) | sha256sum | cut -c1-16)
if [ "$(cat "$go_binary.stamp" 2>/dev/null)" != "$go_hash" ]; then
  echo "setup: building the Go clients (downloading their modules on the first build)"
  mkdir -p "$GAPWATCH_HOME/bin"
  rm -f "$go_binary" "$go_binary.stamp"
  (cd "$go_sources" && CGO_ENABLED=1 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$go_binary" .)
  echo "$go_hash" >"$go_binary.stamp"
fi

# A class-data-sharing archive of Spark's classes (tasks/spark/class_archive.py),
# made again when Java, pyspark or the connector jars change; env.sh uses it.
cds_archive=$GAPWATCH_HOME/spark/classes.jsa
cds_hash=$( (java -version 2>&1; "$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'; ls "$GAPWATCH_HOME/lib/spark") | sha256sum | cut -c1-16)
if [ "$(cat "$cds_archive.stamp" 2>/dev/null)" != "$cds_hash" ]; then
  echo "setup: writing the Spark class archive"
  mkdir -p "$GAPWATCH_HOME/spark"
  rm -f "$cds_archive" "$cds_archive.stamp"
  if SPARK_SUBMIT_OPTS="-XX:ArchiveClassesAtExit=$cds_archive" "$VENV/bin/python" -m tasks.spark.class_archive \
      "$GAPWATCH_HOME/lib/spark" >"$GAPWATCH_HOME/spark/class-archive.log" 2>&1 && [ -s "$cds_archive" ]; then
    echo "$cds_hash" >"$cds_archive.stamp"
  else
    echo "setup: no Spark class archive (Spark starts without it; see $GAPWATCH_HOME/spark/class-archive.log)" >&2
    rm -f "$cds_archive"
  fi
fi
