#!/usr/bin/env bash
# Local real services without Docker: PostgreSQL, Redis and a single-node
# Kafka in KRaft mode, all on loopback, data and logs under .gapwatch/.
#
#   scripts/services.sh start [postgres|redis|kafka]   (idempotent)
#   scripts/services.sh stop  [postgres|redis|kafka]
#   scripts/services.sh status
#
# Needs the binaries and jars that scripts/setup.sh installs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

RUN=$GAPWATCH_HOME/run
LOGS=$GAPWATCH_HOME/logs
mkdir -p "$RUN" "$LOGS"

die() { echo "services: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits until "$2" succeeds, up to $3 seconds; names the service and its log.
wait_for() {
  local name=$1 check=$2 seconds=$3 log=$4
  for _ in $(seq 1 $((seconds * 4))); do
    if eval "$check" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  echo "services: $name did not answer within ${seconds}s; last lines of $log:" >&2
  tail -n 30 "$log" >&2 || true
  exit 1
}

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] || die "PostgreSQL is not installed (run scripts/setup.sh)"
  echo "$dir"
}

# initdb and postgres refuse to run as root: run them as the postgres user then.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
  local bin data=$GAPWATCH_HOME/postgres log=$LOGS/postgres.log sock=$RUN/pg
  bin=$(pg_bin)
  mkdir -p "$sock"; touch "$log"
  if [ "$(id -u)" = 0 ]; then chown postgres "$sock" "$log"; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres "$data"
    as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >>"$log" 2>&1 \
      || { tail -n 20 "$log" >&2; die "PostgreSQL initdb failed (log: $log)"; }
  fi
  if ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$data" -l "$log" -w -t 30 start \
      -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories=$sock -c fsync=off -c shared_buffers=128MB" \
      >/dev/null || { tail -n 20 "$log" >&2; die "PostgreSQL did not start (log: $log)"; }
  fi
  wait_for PostgreSQL "$bin/pg_isready -h 127.0.0.1 -p $PG_PORT" 30 "$log"
  # Project role and database, created once. CREATEDB lets the tests make theirs.
  local psql="$bin/psql -h 127.0.0.1 -p $PG_PORT -U postgres -v ON_ERROR_STOP=1 -qtA"
  if [ "$($psql -c "select 1 from pg_roles where rolname='gapwatch'")" != 1 ]; then
    $psql -c "create role gapwatch login createdb password 'gapwatch'"
  fi
  if [ "$($psql -c "select 1 from pg_database where datname='gapwatch'")" != 1 ]; then
    $psql -c "create database gapwatch owner gapwatch"
  fi
}

stop_postgres() {
  local bin data=$GAPWATCH_HOME/postgres
  bin=$(pg_bin)
  if [ -f "$data/postmaster.pid" ]; then
    as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

start_redis() {
  local log=$LOGS/redis.log pid=$RUN/redis.pid
  command -v redis-server >/dev/null || die "redis-server is not installed (run scripts/setup.sh)"
  if ! pid_alive "$pid"; then
    mkdir -p "$GAPWATCH_HOME/redis"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes \
      --dir "$GAPWATCH_HOME/redis" --logfile "$log" --pidfile "$pid" \
      --save "" --appendonly no >/dev/null
  fi
  wait_for Redis "redis-cli -h 127.0.0.1 -p $REDIS_PORT ping | grep -q PONG" 20 "$log"
}

stop_redis() {
  local pid=$RUN/redis.pid
  if pid_alive "$pid"; then
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$(cat "$pid")" || true
  fi
  rm -f "$pid"
}

# The local broker compiles with C1 only and collects with the serial GC, as
# the tests' own brokers do: a development broker is not throughput-bound, and
# it starts on half the CPU (4-5 s against 8-9). Over a whole test run it uses
# about as much CPU a second either way (bench/RESULTS.md, thirteenth session).
kafka_java() {
  local libs=$GAPWATCH_HOME/lib/kafka
  [ -d "$libs" ] || die "Kafka jars are missing in $libs (run scripts/setup.sh)"
  java -Xms128m -Xmx"${KAFKA_HEAP:-512m}" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$GAPWATCH_HOME/kafka/log4j2.properties" \
    -cp "$libs/*" "$@"
}

write_kafka_config() {
  local dir=$GAPWATCH_HOME/kafka
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# A streams group (KIP-1071) whose application died is Empty after 10 s, not 45 s
# (a reset waits for Empty); heartbeats every 2 s to fit.
group.streams.min.session.timeout.ms=10000
group.streams.session.timeout.ms=10000
group.streams.min.heartbeat.interval.ms=1000
group.streams.heartbeat.interval.ms=2000
auto.create.topics.enable=false
# Tests shrink retention on purpose; let the cleaner act quickly.
log.retention.check.interval.ms=2000
log.segment.delete.delay.ms=1000
PROPS
  cat >"$dir/log4j2.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $LOGS/kafka.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
PROPS
}

start_kafka() {
  local dir=$GAPWATCH_HOME/kafka pid=$RUN/kafka.pid log=$LOGS/kafka.out
  if ! pid_alive "$pid"; then
    write_kafka_config
    if [ ! -f "$dir/data/meta.properties" ]; then
      local cluster_id
      cluster_id=$(kafka_java kafka.tools.StorageTool random-uuid)
      kafka_java kafka.tools.StorageTool format --standalone -t "$cluster_id" \
        -c "$dir/server.properties" >>"$log" 2>&1 \
        || { tail -n 20 "$log" >&2; die "Kafka storage format failed (log: $log)"; }
    fi
    setsid nohup bash -c "$(declare -f kafka_java); GAPWATCH_HOME='$GAPWATCH_HOME' KAFKA_HEAP='$KAFKA_HEAP' \
      kafka_java kafka.Kafka '$dir/server.properties'" >>"$log" 2>&1 </dev/null &
    echo $! >"$pid"
  fi
  wait_for Kafka "pid_alive $pid && port_open $KAFKA_PORT" 60 "$log"
  # The port opens before the broker serves metadata: ask for it.
  if [ -x "$VENV/bin/python" ]; then
    wait_for Kafka "$VENV/bin/python $GAPWATCH_ROOT/scripts/kafka_ready.py $KAFKA_BOOTSTRAP_SERVERS" 60 "$LOGS/kafka.log"
  fi
}

stop_kafka() {
  local pid=$RUN/kafka.pid
  if pid_alive "$pid"; then
    kill -- -"$(cat "$pid")" 2>/dev/null || kill "$(cat "$pid")" 2>/dev/null || true
    for _ in $(seq 1 120); do pid_alive "$pid" || break; sleep 0.25; done
    pid_alive "$pid" && kill -9 -- -"$(cat "$pid")" 2>/dev/null || true
  fi
  rm -f "$pid"
}

status() {
  local bin; bin=$(pg_bin)
  printf 'postgres  %s\n' "$("$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" >/dev/null 2>&1 && echo up || echo down)"
  printf 'redis     %s\n' "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && echo up || echo down)"
  printf 'kafka     %s\n' "$(pid_alive "$RUN/kafka.pid" && port_open "$KAFKA_PORT" && echo up || echo down)"
}

action=${1:-status}
shift || true
services=("$@")
[ ${#services[@]} -gt 0 ] || services=(postgres redis kafka)
case $action in
  start) for s in "${services[@]}"; do "start_$s"; done ;;
  stop)
    for ((i=${#services[@]}-1; i>=0; i--)); do "stop_${services[$i]}"; done ;;
  status) status ;;
  *) die "usage: $0 start|stop|status [postgres|redis|kafka]" ;;
esac
