#!/usr/bin/env bash
# A throwaway single-node Ceph RADOS Gateway (S3) for the `servers` tests.
#
#   bash scripts/services/rgw.sh start   # install if needed, create the cluster, start it
#   bash scripts/services/rgw.sh env     # print the export lines for the tests
#   bash scripts/services/rgw.sh stop    # stop by pid files, remove the state folder
#
# One ceph-mon, one memstore ceph-osd and radosgw, all on 127.0.0.1, no auth (see
# /work/shared/notes/local-aws-stand-ins.md). Everything lives under
# ${DGCL_STATE_DIR:-<repo>/.ci/state}/rgw; nothing is kept across a stop.
# Settings: DGCL_RGW_PORT (7480), DGCL_RGW_MON_PORT (6789), DGCL_TEST_BUCKET (dgcl-test).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="${DGCL_STATE_DIR:-$REPO/.ci/state}/rgw"
PORT="${DGCL_RGW_PORT:-7480}"
MON_PORT="${DGCL_RGW_MON_PORT:-6789}"
BUCKET="${DGCL_TEST_BUCKET:-dgcl-test}"
REGION="us-east-1"
# Fixed, throwaway test keys (the server only listens on 127.0.0.1).
ACCESS_KEY="DGCLTESTACCESSKEY000"
SECRET_KEY="dgclTestSecretKey0000000000000000000000"
ENDPOINT="http://127.0.0.1:${PORT}"
CONF="$STATE/ceph.conf"
RUN="$STATE/run"
LOGS="$STATE/log"
RGW_NAME="client.rgw.dgcl"

log() { echo "rgw.sh: $*" >&2; }
die() {
  log "error: $*"
  if [[ ${STARTING:-0} == 1 && -d $LOGS ]]; then
    # keep the logs for a post-mortem, stop whatever this start launched
    rm -rf "$STATE.failed-logs" && cp -r "$LOGS" "$STATE.failed-logs" 2>/dev/null || true
    log "logs kept in $STATE.failed-logs; stopping what was started"
    STARTING=0 do_stop || true
  fi
  exit 1
}

print_env() {
  cat <<EOF
export AWS_ENDPOINT_URL_S3='${ENDPOINT}'
export AWS_ACCESS_KEY_ID='${ACCESS_KEY}'
export AWS_SECRET_ACCESS_KEY='${SECRET_KEY}'
export AWS_REGION='${REGION}'
export DGCL_TEST_BUCKET='${BUCKET}'
EOF
}

# Runs `ceph` against our cluster, never hanging for long.
cephc() { timeout 30 ceph -c "$CONF" --connect-timeout 20 "$@"; }

install_packages() {
  local missing=0 b
  for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph uuidgen; do
    command -v "$b" >/dev/null 2>&1 || missing=1
  done
  [[ $missing == 0 ]] && return 0
  [[ $(id -u) == 0 ]] || die "ceph packages are missing and installing them needs root"
  log "installing radosgw ceph-mon ceph-osd uuid-runtime (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q </dev/null >&2
  apt-get install -y -q radosgw ceph-mon ceph-osd uuid-runtime </dev/null >&2
  for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph uuidgen; do
    command -v "$b" >/dev/null 2>&1 || die "'$b' still missing after apt-get install"
  done
}

pid_alive() { # pid file; alive only if that pid is still one of our daemons (runs with our conf)
  [[ -s $1 ]] || return 1
  local pid
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  [[ ! -r /proc/$pid/cmdline ]] || tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CONF"
}

s3_answers() { # any HTTP answer from the gateway counts
  curl -s -o /dev/null -m 3 "$ENDPOINT/" 2>/dev/null ||
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

write_conf() {
  local fsid=$1
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = v1:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
keyring = $STATE/keyring
run dir = $RUN
pid file = $RUN/\$name.pid
admin socket = $RUN/\$cluster-\$name.asok
log file = $LOGS/\$name.log
mon cluster log file = $LOGS/cluster.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
# commit mon changes (pool creation, osd boot) quickly: start-up is a chain of them
paxos propose interval = 0.1
paxos min wait = 0.01
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 8589934592
osd max object name len = 460
osd max object namespace len = 64
osd check max object name len on startup = false
# The OSD's own crush/class updates at start race its first monmap ("wrong fsid"): place it
# in the crush map from this script instead.
osd crush update on start = false
osd class update on start = false
mon data = $STATE/mon/\$cluster-\$id
osd data = $STATE/osd/\$cluster-\$id

[$RGW_NAME]
rgw frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw data = $STATE/rgw
rgw dynamic resharding = false
rgw enable usage log = false
EOF
}

start_osd() { # retries the start-up race that ends in "wrong fsid"
  local try
  for try in 1 2 3 4 5; do
    ceph-osd -c "$CONF" -i 0 >>"$LOGS/osd.start.log" 2>&1 || true
    local i
    for i in $(seq 1 20); do
      if cephc osd dump 2>/dev/null | grep -q '^osd\.0 up'; then return 0; fi
      pid_alive "$RUN/osd.0.pid" || break
      sleep 0.5
    done
    if pid_alive "$RUN/osd.0.pid"; then
      # running but not yet reported up: give it more time
      for i in $(seq 1 60); do
        cephc osd dump 2>/dev/null | grep -q '^osd\.0 up' && return 0
        sleep 0.5
      done
      return 1
    fi
    log "ceph-osd exited at start (try $try): $(tail -n 3 "$LOGS/osd.start.log" "$LOGS/osd.0.log" 2>/dev/null | grep -iE 'fsid|error' | tail -n 1)"
    sleep 1
  done
  return 1
}

do_stop() {
  local f pid i
  if [[ -d $RUN ]]; then
    # radosgw first, then the osd, the mon last
    for f in "$RUN/$RGW_NAME.pid" "$RUN/osd.0.pid" "$RUN/mon.a.pid"; do
      pid_alive "$f" || continue
      pid=$(cat "$f")
      if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  fi
  rm -rf "$STATE"
}

do_start() {
  local t0=$SECONDS
  install_packages
  if [[ -d $STATE ]]; then
    if pid_alive "$RUN/$RGW_NAME.pid" && pid_alive "$RUN/osd.0.pid" && pid_alive "$RUN/mon.a.pid" && s3_answers; then
      log "already running at $ENDPOINT (state $STATE)"
      eval "$(print_env)"
      node --no-warnings "$REPO/scripts/services/make-bucket.mjs" >&2
      return 0
    fi
    log "found a stale state folder; cleaning it up"
    do_stop
  fi
  if s3_answers; then die "port $PORT is already taken by something else (set DGCL_RGW_PORT)"; fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$MON_PORT") 2>/dev/null; then
    die "port $MON_PORT is already taken (set DGCL_RGW_MON_PORT)"
  fi

  mkdir -p "$STATE" "$RUN" "$LOGS" "$STATE/mon" "$STATE/osd/ceph-0" "$STATE/rgw"
  rm -rf "$STATE.failed-logs"
  STARTING=1
  local fsid osd_uuid
  fsid=$(uuidgen)
  osd_uuid=$(uuidgen)
  write_conf "$fsid"
  : >"$STATE/keyring"

  # monitor
  monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$MON_PORT]" "$STATE/monmap" >>"$LOGS/setup.log" 2>&1 ||
    die "monmaptool failed: $(tail -n 5 "$LOGS/setup.log")"
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$STATE/monmap" >>"$LOGS/setup.log" 2>&1 ||
    die "ceph-mon --mkfs failed: $(tail -n 5 "$LOGS/setup.log")"
  ceph-mon -c "$CONF" -i a >>"$LOGS/setup.log" 2>&1 || die "ceph-mon did not start: $(tail -n 5 "$LOGS/setup.log")"
  local i
  for i in $(seq 1 60); do cephc mon stat >/dev/null 2>&1 && break; sleep 0.5; done
  cephc mon stat >/dev/null 2>&1 || die "ceph-mon does not answer (see $LOGS/mon.a.log)"

  # object storage daemon (memstore)
  local id="" rc
  for i in 1 2 3 4 5; do
    rc=0
    id=$(cephc osd new "$osd_uuid" 2>"$LOGS/osd-new.err") || rc=$?
    [[ $rc == 0 ]] && break
    log "ceph osd new failed (try $i, exit $rc): $(tail -n 2 "$LOGS/osd-new.err")"
    sleep 1
  done
  [[ $rc == 0 ]] || die "ceph osd new failed (exit $rc): $(tail -n 5 "$LOGS/osd-new.err")"
  [[ $id == 0 ]] || die "expected osd id 0, got '$id'"
  cephc osd crush add osd.0 1.0 root=default >>"$LOGS/setup.log" 2>&1 ||
    die "ceph osd crush add failed: $(tail -n 5 "$LOGS/setup.log")"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$LOGS/setup.log" 2>&1 ||
    die "ceph-osd --mkfs failed: $(tail -n 5 "$LOGS/setup.log")"
  start_osd || die "ceph-osd did not come up (see $LOGS/osd.0.log)"

  # gateway
  radosgw -c "$CONF" -n "$RGW_NAME" >>"$LOGS/setup.log" 2>&1 || die "radosgw did not start: $(tail -n 5 "$LOGS/setup.log")"
  for i in $(seq 1 120); do
    s3_answers && break
    pid_alive "$RUN/$RGW_NAME.pid" || [[ $i -lt 10 ]] || die "radosgw exited (see $LOGS/$RGW_NAME.log)"
    sleep 0.5
  done
  s3_answers || die "radosgw does not answer on $ENDPOINT (see $LOGS/$RGW_NAME.log)"

  # user and bucket
  if ! timeout 60 radosgw-admin -c "$CONF" -n "$RGW_NAME" user info --uid=dgcl-test >/dev/null 2>&1; then
    timeout 60 radosgw-admin -c "$CONF" -n "$RGW_NAME" user create --uid=dgcl-test --display-name="dgcl test" \
      --access-key="$ACCESS_KEY" --secret="$SECRET_KEY" >>"$LOGS/setup.log" 2>&1 ||
      die "radosgw-admin user create failed: $(tail -n 5 "$LOGS/setup.log")"
  fi
  eval "$(print_env)"
  node --no-warnings "$REPO/scripts/services/make-bucket.mjs" >&2 || die "could not create bucket $BUCKET"
  STARTING=0
  log "started at $ENDPOINT in $((SECONDS - t0)) s (state $STATE)"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
