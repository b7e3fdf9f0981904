#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A throwaway single-node Ceph RADOS Gateway (S3) on loopback, for the tests.
#   scripts/rgw.sh start DIR [PORT]  mon + osd + rgw, everything under DIR (bluestore on a sparse file,
#                                     logs in DIR/log); S3 user with fixed test keys and a test bucket;
#                                     prints `export ...` lines (also kept in DIR/env). Idempotent.
#   scripts/rgw.sh stop DIR           kills the daemons (pid files), removes DIR. Idempotent.
#   scripts/rgw.sh fixture DIR        what the CTest fixture runs: start, or, when RGW cannot start,
#                                     write DIR/env with VRAMFLOW_TEST_S3_SKIP=reason and succeed
#                                     (unless VRAMFLOW_RGW_REQUIRED=1, which makes it fail).
# Start gives up with the log tail after VRAMFLOW_RGW_TIMEOUT seconds (default 60). No mgr, no
# systemd, no cephadm; see docs/S3.md and /work/shared/context/s3-servers.md for the recipe.
set -euo pipefail

readonly ACCESS_KEY=VRAMFLOWTESTACCESS01                      # 20 characters, as AWS's
readonly SECRET_KEY=vramflowTestSecretKey0000000000000000000  # 40 characters, as AWS's
readonly BUCKET=vramflow-test
readonly REGION=us-east-1
readonly POOLS=(.rgw.root default.rgw.log default.rgw.control default.rgw.meta
                default.rgw.buckets.index default.rgw.buckets.non-ec default.rgw.buckets.data)
readonly BINARIES=(ceph ceph-authtool monmaptool ceph-mon ceph-osd radosgw radosgw-admin curl)

usage() { echo "usage: $0 start DIR [PORT] | stop DIR | fixture DIR" >&2; exit 2; }
log() { echo "rgw: $*" >&2; }
py() { if [ -x /usr/bin/python3 ]; then /usr/bin/python3 "$@"; else python3 "$@"; fi; }
free_port() {
  py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
left() {  # seconds left before the start deadline (at least 1)
  local l=$((deadline - SECONDS)); [ "$l" -ge 1 ] || l=1; echo "$l"
}
cephc() { timeout "$(left)" ceph -c "$D/ceph.conf" --connect-timeout 10 "$@"; }
answers() { curl -s -o /dev/null -m 2 "http://127.0.0.1:$1/"; }

# Pids of the daemons of the cluster in $D: from the pid files, plus any process started with
# $D/ceph.conf that has not written one yet (a daemon still starting up).
cluster_pids() {
  local f pid p
  for f in "$D"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null) || continue
    [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$D/ceph.conf" &&
      echo "$pid"
  done
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/exe" 2>/dev/null)" in */ceph-mon|*/ceph-osd|*/radosgw) ;; *) continue ;; esac
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-c $D/ceph.conf" && echo "${p#/proc/}"
  done
  true
}

kill_cluster() {
  local pids i
  pids=$(cluster_pids | sort -u)
  [ -n "$pids" ] || return 0
  # SIGKILL: the cluster is thrown away, and SIGTERM costs ~2 s per daemon.
  kill -KILL $pids 2>/dev/null || true
  for i in $(seq 50); do
    pids=$(for p in $pids; do [ ! -d "/proc/$p" ] || echo "$p"; done)
    [ -z "$pids" ] && return 0
    sleep 0.1
  done
  log "daemons still alive after SIGKILL: $pids"
}

do_stop() {
  kill_cluster
  rm -rf "$D"
}

fail() {  # fail MESSAGE LOG_NAME...: message, tail of the named logs, daemons stopped, DIR kept
  local name msg=$1
  [ "$SECONDS" -lt "$deadline" ] || msg="$msg (gave up after $timeout_s s)"
  log "start failed: $msg"
  shift
  for name in "$@"; do
    if [ -s "$D/log/$name" ]; then
      echo "---- tail of $D/log/$name" >&2
      tail -n 25 "$D/log/$name" >&2
    fi
  done
  kill_cluster
  echo "$msg" >"$D/failed" 2>/dev/null || true
  exit 1
}

exports() {
  cat <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$1
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION
export AWS_DEFAULT_REGION=$REGION
export VRAMFLOW_TEST_S3_BUCKET=$BUCKET
EOF
}

write_conf() {
  cat >"$D/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$monport
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
keyring = $D/keyring
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
mon cluster log file = $D/log/cluster.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
paxos propose interval = 0.01
paxos min wait = 0.001
osd objectstore = bluestore
osd data = $D/osd.\$id
bluestore block create = true
bluestore block size = 10737418240
bluestore fsck on mount = false
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 1073741824
[mon.a]
mon data = $D/mon.a
[client.rgw.a]
# tcp_nodelay: without it a small reply on a reused connection waits for the client's delayed ACK
# (40 ms per ranged GET; docs/S3.md, "Ceph RGW: set tcp_nodelay=1").
rgw frontends = beast endpoint=127.0.0.1:$port tcp_nodelay=1
rgw data = $D/rgw.a
rgw multipart min part size = 1024
# Server-side encryption for the SSE tests, on this loopback endpoint only: SSE-C without TLS, and SSE-KMS
# with RGW's "testing" key backend, whose keys are these (never for a real deployment).
rgw crypt require ssl = false
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = vramflow-test-kms-1=$(printf 'vramflow-test-kms-key-0123456789' | base64)
EOF
}

# Signed S3 request with curl's SigV4 (curl >= 7.75): s3_request METHOD PATH -> HTTP status.
s3_request() {
  local verb=(-X "$1")
  [ "$1" != HEAD ] || verb=(-I)  # -X HEAD would wait for a body that never comes
  curl -s -o /dev/null -w '%{http_code}' -m 10 "${verb[@]}" \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
    "http://127.0.0.1:$port$2" || true
}

missing_binaries() {
  local b
  for b in "${BINARIES[@]}"; do command -v "$b" >/dev/null || echo -n "$b "; done
}

do_start() {
  local missing
  missing=$(missing_binaries)
  if [ -n "$missing" ]; then
    log "not installed: $missing(scripts/setup.sh installs radosgw ceph-mon ceph-osd curl)"
    exit 3
  fi

  # Already running: print the exports again.
  if [ -s "$D/env" ] && [ -s "$D/port" ] && answers "$(cat "$D/port")" &&
     [ -n "$(cluster_pids)" ]; then
    log "already running in $D"
    grep '^export ' "$D/env"
    return 0
  fi
  [ -e "$D" ] && { log "removing the stale cluster in $D"; do_stop; }

  t0=$SECONDS
  mkdir -p "$D/run" "$D/log" "$D/mon.a" "$D/osd.0" "$D/rgw.a"
  fsid=$(cat /proc/sys/kernel/random/uuid)
  monport=$(free_port)
  port=${port_arg:-$(free_port)}
  answers "$port" && fail "port $port already answers HTTP"
  echo "$port" >"$D/port"
  write_conf

  # Keys: mon., client.admin, client.rgw.a in one keyring.
  ceph-authtool --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$D/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$D/keyring" --gen-key -n client.rgw.a --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null

  # Monitor.
  monmaptool --create --addv a "[v1:127.0.0.1:$monport]" --fsid "$fsid" "$D/monmap" >/dev/null
  timeout "$(left)" ceph-mon -c "$D/ceph.conf" -i a --mkfs --monmap "$D/monmap" --keyring "$D/keyring" \
    >>"$D/log/setup.log" 2>&1 || fail "ceph-mon --mkfs" setup.log mon.a.log
  timeout "$(left)" ceph-mon -c "$D/ceph.conf" -i a >>"$D/log/setup.log" 2>&1 ||
    fail "ceph-mon did not start" setup.log mon.a.log
  cephc auth import -i "$D/keyring" >>"$D/log/setup.log" 2>&1 ||
    fail "monitor on 127.0.0.1:$monport does not answer" setup.log mon.a.log
  log "mon up after $((SECONDS - t0)) s"

  # OSD on bluestore, in a sparse file DIR/osd.0/block.
  local key uuid id
  key=$(ceph-authtool --gen-print-key)
  uuid=$(cat /proc/sys/kernel/random/uuid)
  printf '{"cephx_secret": "%s"}\n' "$key" >"$D/osd.0/new.json"
  id=$(cephc osd new "$uuid" -i "$D/osd.0/new.json" 2>>"$D/log/setup.log") ||
    fail "ceph osd new" setup.log mon.a.log
  [ "$id" = 0 ] || fail "ceph osd new gave id '$id', not 0" setup.log
  ceph-authtool "$D/keyring" -n osd.0 --add-key "$key" >/dev/null
  timeout "$(left)" ceph-osd -c "$D/ceph.conf" -i 0 --mkfs --key "$key" --osd-uuid "$uuid" \
    >>"$D/log/setup.log" 2>&1 || fail "ceph-osd --mkfs" setup.log osd.0.log
  timeout "$(left)" ceph-osd -c "$D/ceph.conf" -i 0 >>"$D/log/setup.log" 2>&1 ||
    fail "ceph-osd did not start" setup.log osd.0.log
  until cephc osd stat -f json 2>>"$D/log/setup.log" | grep -q '"num_up_osds":1'; do
    [ "$SECONDS" -lt "$deadline" ] || fail "osd.0 not up after ${timeout_s} s" osd.0.log mon.a.log
    sleep 0.3
  done
  log "osd up after $((SECONDS - t0)) s"

  # The RGW pools, made now: RGW would make them lazily and stall the first bucket and upload.
  # One ceph process reads all the commands from stdin (each ceph start costs ~0.3 s).
  local p
  for p in "${POOLS[@]}"; do
    echo "osd pool create $p 8 8"
    echo "osd pool application enable $p rgw"
  done | cephc >>"$D/log/setup.log" 2>&1 || fail "creating the RGW pools" setup.log mon.a.log
  log "pools made after $((SECONDS - t0)) s"

  # The gateway, its user and the test bucket.
  timeout "$(left)" radosgw -c "$D/ceph.conf" -n client.rgw.a >>"$D/log/setup.log" 2>&1 ||
    fail "radosgw did not start" setup.log client.rgw.a.log
  until answers "$port"; do
    [ "$SECONDS" -lt "$deadline" ] ||
      fail "RGW not answering on 127.0.0.1:$port after ${timeout_s} s" client.rgw.a.log osd.0.log
    [ -n "$(cluster_pids)" ] || fail "the daemons exited" client.rgw.a.log osd.0.log mon.a.log
    sleep 0.2
  done
  timeout "$(left)" radosgw-admin -c "$D/ceph.conf" user create --uid=tester --display-name=tester \
    --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >>"$D/log/setup.log" 2>&1 ||
    fail "radosgw-admin user create" setup.log
  local code
  code=$(s3_request PUT "/$BUCKET")
  [ "$code" = 200 ] || fail "PUT bucket $BUCKET: HTTP $code" client.rgw.a.log
  code=$(s3_request HEAD "/$BUCKET")
  [ "$code" = 200 ] || fail "HEAD bucket $BUCKET: HTTP $code" client.rgw.a.log
  log "RGW ready on 127.0.0.1:$port after $((SECONDS - t0)) s (bucket $BUCKET; logs in $D/log)"

  exports "$port" >"$D/env"
  cat "$D/env"
}

cmd=${1:-}
[ $# -ge 2 ] || usage
D=$(realpath -m "$2")
port_arg=${3:-}
timeout_s=${VRAMFLOW_RGW_TIMEOUT:-60}
deadline=$((SECONDS + timeout_s))
case "$cmd" in
  start) do_start ;;
  stop) do_stop; log "stopped $D" ;;
  fixture)
    # A fresh cluster (no objects or uploads left from an interrupted run). Always leaves DIR/env:
    # the exports, or VRAMFLOW_TEST_S3_SKIP with the reason. Start runs as its own process so
    # that its `set -e` and `exit` stay in force.
    rm -rf "$D.skipped" "$D.log"
    do_stop
    rc=0
    "$0" start "$D" >/dev/null || rc=$?
    if [ "$rc" -eq 0 ]; then
      cat "$D/env"
      exit 0
    fi
    missing=$(missing_binaries)
    if [ -n "$missing" ]; then
      reason="Ceph RGW not installed (no ${missing% }; scripts/setup.sh installs radosgw ceph-mon ceph-osd)"
    else
      reason="RGW did not start: $(cat "$D/failed" 2>/dev/null || echo "exit status $rc") (logs: $D.log/)"
      cp -r "$D/log" "$D.log" 2>/dev/null || true
    fi
    mkdir -p "$D"
    echo "export VRAMFLOW_TEST_S3_SKIP='${reason//\'/}'" >"$D/env"
    echo "$reason" >"$D.skipped"
    log "S3 tests will skip: $reason"
    if [ "${VRAMFLOW_RGW_REQUIRED:-0}" = 1 ]; then
      log "VRAMFLOW_RGW_REQUIRED=1: failing"
      exit 1
    fi
    exit 0 ;;
  *) usage ;;
esac
