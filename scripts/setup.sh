#!/usr/bin/env bash
# Installs what is missing, once; quick when nothing changed (each step keeps a
# stamp of what it installed).
#
#   scripts/setup.sh         what the stack needs (`make up`, through `make setup`)
#   scripts/setup.sh tests   what only the tests need, after the first (`make test`,
#                            through `make setup-tests`)
#
# The stack:
#  1. Debian packages when missing and running as root: PostgreSQL, Redis,
#     Java 17, Maven, and the OpenLDAP and SASL headers python-ldap builds against.
#  2. The Kafka broker/tools jars and the Spark Kafka connector jars, with Maven.
#  3. .venv with the project and the guard (redone when pyproject.toml changes).
#  4. Gapwatch's Java helpers (javac) and a class-data-sharing archive of Spark's classes.
# The tests:
#  1. Debian packages: Chromium's headless shell, slapd and ldap-utils, npm, prometheus (promtool),
#     kcat, and golang-go when no Go is found.
#  2. With Maven: Kafka Streams (WordCountDemo), the older brokers of the release
#     matrix, and Keycloak with the Java 21+ it needs, built once (SKIP_KEYCLOAK=1: no Keycloak).
#  3. axe-core with npm; the project's `test` extra into .venv.
#  4. The Go clients of the pickup tests, built with the Go toolchain.
#
# Every step that reaches the network is tried 3 times (`fetch`); when the last
# try fails, the step is named and the tool's own output shown.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GAPWATCH_ROOT"
mkdir -p "$GAPWATCH_HOME"
part=${1:-stack}
case "$part" in
  stack|tests) ;;
  *) echo "usage: scripts/setup.sh [stack|tests]" >&2; exit 2 ;;
esac

setup_logs=$GAPWATCH_HOME/logs/setup
mkdir -p "$setup_logs"

# fetch STEP COMMAND...: runs COMMAND, which reaches the network, up to 3 times,
# 5 s and then 20 s apart. Its output goes to $setup_logs/<step>.log (quiet when
# it works); when the last try fails, the step is named and the end of that
# output shown, and setup stops.
# The line of a tool's output most likely to say why it failed: its first error
# line (npm, Maven, pip and apt-get print the cause first), else its last line.
first_error() {
  { grep -m 1 -iE 'error|fail|^E:' "$1" || grep -v '^[[:space:]]*$' "$1" | tail -n 1; } | cut -c1-200
}

fetch() {
  local step=$1 try pause log
  shift
  log=$setup_logs/$(echo "$step" | tr -cs 'A-Za-z0-9.' '-' | sed 's/-*$//').log
  for try in 1 2 3; do
    if "$@" >"$log" 2>&1; then
      return 0
    fi
    [ "$try" = 3 ] && break
    pause=$((5 * try * try))
    echo "setup: $step failed (try $try of 3: $(first_error "$log"));" \
      "trying again in ${pause} s" >&2
    sleep "$pause"
  done
  echo "setup: $step failed 3 times; the last try said (all of it: $log):" >&2
  tail -n 40 "$log" | sed 's/^/  | /' >&2
  exit 1
}

apt_install() {
  local packages=("$@")
  [ ${#packages[@]} -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing ${packages[*]}; install them (apt-get install ${packages[*]}) or run as root" >&2
    exit 1
  fi
  echo "setup: installing ${packages[*]}"
  fetch "apt-get update" apt-get update
  fetch "apt-get install ${packages[*]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${packages[@]}"
  # The Debian packages start their own servers where they can; ours run under .gapwatch/.
  service redis-server stop >/dev/null 2>&1 || true
  service slapd stop >/dev/null 2>&1 || true
}

maven() {
  mvn -B -s third_party/maven/settings.xml "$@"
}

# The venv's installs: the project's own stamp, and one for its test extra.
venv_hash=$(cat pyproject.toml $(ls guard/pyproject.toml 2>/dev/null) | sha256sum | cut -c1-16)

setup_stack() {
  local need=()
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v java >/dev/null || need+=(openjdk-17-jre-headless)
  # javac compiles the Java helpers of the poll's JVM (adapters/kafka/java).
  command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || need+=(maven)
  # python-ldap (under django-auth-ldap: LDAP login) builds against OpenLDAP's and SASL's headers.
  [ -f /usr/include/ldap.h ] || need+=(libldap2-dev)
  [ -f /usr/include/sasl/sasl.h ] || need+=(libsasl2-dev)
  apt_install "${need[@]}"

  # The stamp covers every module of third_party/maven/pom.xml; the stack fetches
  # Kafka and Spark's connector, the tests Kafka Streams (setup_tests).
  local jars_stamp=$GAPWATCH_HOME/lib/.stamp jars_hash
  jars_hash=$(cat third_party/maven/pom.xml third_party/maven/kafka/pom.xml third_party/maven/spark/pom.xml \
    third_party/maven/streams/pom.xml | sha256sum | cut -c1-16)
  if [ "$(cat "$jars_stamp" 2>/dev/null)" != "$jars_hash" ]; then
    echo "setup: fetching the Kafka and Spark connector jars with Maven"
    rm -rf "$GAPWATCH_HOME/lib"
    fetch "maven kafka and spark jars" maven -f third_party/maven/pom.xml -pl kafka,spark dependency:copy-dependencies
    echo "$jars_hash" >"$jars_stamp"
  fi

  local venv_stamp=$VENV/.gapwatch-stamp
  if [ "$(cat "$venv_stamp" 2>/dev/null)" != "$venv_hash" ]; then
    echo "setup: installing the project into $VENV"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    fetch "pip upgrade pip" "$VENV/bin/pip" install --upgrade pip
    # The consumer-side guard is its own package (not on PyPI); the control
    # plane depends on it for the Redis key layout, so it is installed with it.
    fetch "pip install the project" "$VENV/bin/pip" install -e ./guard -e .
    echo "$venv_hash" >"$venv_stamp"
  fi

  # Gapwatch's own Java helpers (adapters/kafka/java), compiled against the Kafka client
  # jars for the JVM adapters/kafka/jvm.py starts; again when they or Java change.
  local java_helpers=$GAPWATCH_HOME/lib/gapwatch-java helpers_hash
  helpers_hash=$( (java -version 2>&1; cat adapters/kafka/java/gapwatch/*.java; ls "$GAPWATCH_HOME/lib/kafka") |
    sha256sum | cut -c1-16)
  # In a jar too: the JVM's class path holds the jar (a folder with files on it would not match
  # the class archive below).
  if [ "$(cat "$java_helpers/.stamp" 2>/dev/null)" != "$helpers_hash" ] || [ ! -s "$java_helpers.jar" ]; then
    echo "setup: compiling the Java helpers"
    rm -rf "$java_helpers" "$java_helpers.jar" && mkdir -p "$java_helpers"
    javac --release 17 -nowarn -cp "$GAPWATCH_HOME/lib/kafka/*" -d "$java_helpers" adapters/kafka/java/gapwatch/*.java
    jar cf "$java_helpers.jar" -C "$java_helpers" gapwatch
    echo "$helpers_hash" >"$java_helpers/.stamp"
  fi

  # A class-data-sharing archive of what that JVM loads for a poll's reads
  # (adapters/kafka/class_archive.py), made again when Java, the jars or the helpers change.
  local client_archive=$GAPWATCH_HOME/lib/kafka-client.jsa client_hash
  client_hash=$( (java -version 2>&1; cat "$java_helpers/.stamp"; ls "$GAPWATCH_HOME/lib/kafka") | sha256sum | cut -c1-16)
  if [ "$(cat "$client_archive.stamp" 2>/dev/null)" != "$client_hash" ]; then
    echo "setup: writing the Kafka client's class archive"
    rm -f "$client_archive" "$client_archive.stamp"
    if "$VENV/bin/python" -m adapters.kafka.class_archive "$client_archive" \
        >"$GAPWATCH_HOME/lib/kafka-client-archive.log" 2>&1 && [ -s "$client_archive" ]; then
      echo "$client_hash" >"$client_archive.stamp"
    else
      echo "setup: no Kafka client class archive (its JVM starts without it; see $GAPWATCH_HOME/lib/kafka-client-archive.log)" >&2
      rm -f "$client_archive"
    fi
  fi

  # A class-data-sharing archive of Spark's classes (adapters/spark/class_archive.py),
  # made again when Java, pyspark or the connector jars change; env.sh uses it.
  local cds_archive=$GAPWATCH_HOME/spark/classes.jsa cds_hash
  cds_hash=$( (java -version 2>&1; "$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'
    ls "$GAPWATCH_HOME/lib/spark") | sha256sum | cut -c1-16)
  if [ "$(cat "$cds_archive.stamp" 2>/dev/null)" != "$cds_hash" ]; then
    echo "setup: writing the Spark class archive"
    mkdir -p "$GAPWATCH_HOME/spark"
    rm -f "$cds_archive" "$cds_archive.stamp"
    if SPARK_SUBMIT_OPTS="-XX:ArchiveClassesAtExit=$cds_archive" "$VENV/bin/python" -m adapters.spark.class_archive \
        "$GAPWATCH_HOME/lib/spark" >"$GAPWATCH_HOME/spark/class-archive.log" 2>&1 && [ -s "$cds_archive" ]; then
      echo "$cds_hash" >"$cds_archive.stamp"
    else
      echo "setup: no Spark class archive (Spark starts without it; see $GAPWATCH_HOME/spark/class-archive.log)" >&2
      rm -f "$cds_archive"
    fi
  fi
}

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

setup_tests() {
  local need=()
  # The browser tests: Playwright drives the system's Chromium, its headless shell (the browser without
  # its desktop parts: about half the CPU of the full build in the browser tests, bench/RESULTS.md).
  [ "${SKIP_BROWSER:-0}" = 1 ] || command -v chromium-headless-shell >/dev/null || need+=(chromium-headless-shell)
  # The single-reader reference of the backfill benchmark (bench/backfill_bench.py).
  command -v kcat >/dev/null || need+=(kcat)
  # npm installs axe-core, which the browser tests inject into every page (third_party/npm).
  command -v npm >/dev/null || need+=(npm)
  # promtool checks the shipped alerting rules (tests/integration/test_monitoring.py).
  command -v promtool >/dev/null || need+=(prometheus)
  # The LDAP server of the LDAP login tests (tests/harness/slapd.py) and its ldapmodify.
  [ -x /usr/sbin/slapd ] || need+=(slapd)
  command -v ldapmodify >/dev/null || need+=(ldap-utils)
  # The Go clients of the pickup tests (below).
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH=$PATH:/usr/local/go/bin
  fi
  command -v go >/dev/null || need+=(golang-go)
  apt_install "${need[@]}"

  # Kafka Streams and its examples (WordCountDemo, tests/harness/kafka_clients.py):
  # the stack's Maven step empties $GAPWATCH_HOME/lib whenever its poms change.
  if ! ls "$GAPWATCH_HOME"/lib/streams/*.jar >/dev/null 2>&1; then
    echo "setup: fetching the Kafka Streams jars with Maven"
    fetch "maven kafka streams jars" maven -f third_party/maven/pom.xml -pl streams dependency:copy-dependencies
  fi

  # The older brokers of the release matrix (tests/integration/test_kafka_releases.py),
  # one folder each: $GAPWATCH_HOME/lib/kafka-<version>. 3.x logs through log4j 1, 4.x Log4j2.
  local releases_dir=$GAPWATCH_HOME/lib/kafka-releases releases_hash release logging
  releases_hash=$(cat third_party/maven/kafka-release/pom.xml third_party/maven/kafka-release/releases | sha256sum |
    cut -c1-16)
  if [ "$(cat "$releases_dir/.stamp" 2>/dev/null)" != "$releases_hash" ]; then
    rm -rf "$releases_dir"
    while read -r release; do
      [ -n "$release" ] || continue
      echo "setup: fetching the Kafka $release broker jars with Maven"
      logging=log4j2
      [ "${release%%.*}" -ge 4 ] || logging=log4j1
      fetch "maven kafka $release jars" maven -f third_party/maven/kafka-release/pom.xml dependency:copy-dependencies \
        -P "$logging" -Dkafka.release="$release" -Djars.dir="$releases_dir/$release"
    done <third_party/maven/kafka-release/releases
    echo "$releases_hash" >"$releases_dir/.stamp"
  fi

  # Class-data-sharing archives of the tests' KRaft nodes and Kafka's console tools
  # (tests/harness/class_archives.py), written from one broker's run; again when Java,
  # the jars or the module change.
  local test_archives=$GAPWATCH_HOME/lib/kafka-test-archives test_archives_hash
  test_archives_hash=$( (java -version 2>&1; ls "$GAPWATCH_HOME/lib/kafka"; cat tests/harness/class_archives.py) |
    sha256sum | cut -c1-16)
  if [ "$(cat "$test_archives/.stamp" 2>/dev/null)" != "$test_archives_hash" ]; then
    echo "setup: writing the class archives of the tests' Kafka JVMs"
    rm -rf "$test_archives"
    if "$VENV/bin/python" -m tests.harness.class_archives >"$GAPWATCH_HOME/lib/kafka-test-archives.log" 2>&1; then
      echo "$test_archives_hash" >"$test_archives/.stamp"
    else
      echo "setup: no class archives for the tests' Kafka JVMs (they start without them; see" \
        "$GAPWATCH_HOME/lib/kafka-test-archives.log)" >&2
      rm -rf "$test_archives"
    fi
  fi

  if [ "${SKIP_KEYCLOAK:-0}" != 1 ]; then
    local keycloak_dir=$GAPWATCH_HOME/keycloak keycloak_java keycloak_hash keycloak_built
    keycloak_java=$(java_21_home)
    if [ -z "$keycloak_java" ]; then
      echo "setup: Keycloak (the OpenID provider of the OAuth tests) needs Java 21 or newer, and none was found" \
        "in KEYCLOAK_JAVA_HOME, JAVA_HOME or /usr/lib/jvm/*: install one (e.g. openjdk-21-jre-headless)" \
        "and set KEYCLOAK_JAVA_HOME, or run with SKIP_KEYCLOAK=1 (the OAuth tests will then fail)" >&2
      exit 1
    fi
    keycloak_hash=$(sha256sum third_party/maven/keycloak/pom.xml | cut -c1-16)
    if [ "$(cat "$keycloak_dir/.stamp" 2>/dev/null)" != "$keycloak_hash" ]; then
      echo "setup: fetching Keycloak with Maven"
      rm -rf "$keycloak_dir"
      fetch "maven keycloak" maven -f third_party/maven/keycloak/pom.xml dependency:unpack -Dkeycloak.dir="$keycloak_dir"
      echo "$keycloak_hash" >"$keycloak_dir/.stamp"
    fi
    echo "$keycloak_java" >"$keycloak_dir/java-home"
    # Keycloak's build-time options, fixed once here (tests/harness/keycloak.py starts it
    # with `start --optimized`; `start-dev` rebuilds on every start, ~15 s on 2 cores). An
    # in-memory database: each start is a fresh server that leaves nothing in the shared install.
    local keycloak_build=(--db=dev-mem --health-enabled=false --metrics-enabled=false)
    keycloak_built=$(echo "$keycloak_hash $keycloak_java ${keycloak_build[*]}" | sha256sum | cut -c1-16)
    if [ "$(cat "$keycloak_dir/.built" 2>/dev/null)" != "$keycloak_built" ]; then
      echo "setup: building Keycloak (${keycloak_build[*]})"
      JAVA_HOME=$keycloak_java "$(ls -d "$keycloak_dir"/keycloak-*/ | tail -1)bin/kc.sh" build "${keycloak_build[@]}" \
        >"$keycloak_dir/build.log" 2>&1 || {
          echo "setup: kc.sh build failed; the end of $keycloak_dir/build.log:" >&2
          tail -n 40 "$keycloak_dir/build.log" | sed 's/^/  | /' >&2
          exit 1
        }
      echo "$keycloak_built" >"$keycloak_dir/.built"
    fi
  fi

  local npm_stamp=$GAPWATCH_HOME/npm/.stamp npm_hash
  npm_hash=$(sha256sum third_party/npm/package.json | cut -c1-16)
  if [ "$(cat "$npm_stamp" 2>/dev/null)" != "$npm_hash" ]; then
    echo "setup: installing the browser tests' JavaScript (axe-core) with npm"
    rm -rf "$GAPWATCH_HOME/npm"
    mkdir -p "$GAPWATCH_HOME/npm"
    cp third_party/npm/package.json "$GAPWATCH_HOME/npm/"
    fetch "npm install axe-core" npm install --prefix "$GAPWATCH_HOME/npm" --no-audit --no-fund
    echo "$npm_hash" >"$npm_stamp"
  fi

  local test_stamp=$VENV/.gapwatch-test-stamp
  if [ "$(cat "$test_stamp" 2>/dev/null)" != "$venv_hash" ]; then
    echo "setup: installing the test tools (the project's test extra) into $VENV"
    fetch "pip install the test extra" "$VENV/bin/pip" install -e ./guard -e ".[test]"
    echo "$venv_hash" >"$test_stamp"
  fi

  # The Go clients of the pickup tests (tests/clients/go: sarama, kafka-go, franz-go,
  # confluent-kafka-go) in one program, built with cgo (confluent-kafka-go links the
  # librdkafka its module ships); its modules are fetched here, never when tests run.
  local go_sources=tests/clients/go go_binary=$GAPWATCH_HOME/bin/gapwatch-go-consumer go_needed go_have go_hash
  go_needed=$(awk '$1 == "go" {print $2}' "$go_sources/go.mod")
  go_have=$(go env GOVERSION | sed 's/^go//')
  if [ "$(printf '%s\n%s\n' "$go_needed" "$go_have" | sort -V | head -1)" != "$go_needed" ]; then
    echo "setup: the Go clients (tests/clients/go/go.mod) need Go $go_needed or newer; $(command -v go) is $go_have" >&2
    exit 1
  fi
  go_hash=$( (go env GOVERSION; cat "$go_sources"/go.mod "$go_sources"/go.sum "$go_sources"/*.go) | sha256sum |
    cut -c1-16)
  if [ "$(cat "$go_binary.stamp" 2>/dev/null)" != "$go_hash" ]; then
    echo "setup: building the Go clients (downloading their modules on the first build)"
    mkdir -p "$GAPWATCH_HOME/bin"
    rm -f "$go_binary" "$go_binary.stamp"
    (cd "$go_sources" && fetch "go mod download" env GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
      go mod download)
    (cd "$go_sources" && CGO_ENABLED=1 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
      go build -o "$go_binary" .)
    echo "$go_hash" >"$go_binary.stamp"
  fi
}

case "$part" in
  stack) setup_stack ;;
  tests) setup_tests ;;
esac
