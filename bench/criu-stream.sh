#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CRIU --stream benchmark (issue 20): one real process holding model-like
# memory (a Python process with fp32 weights and Adam moments read from
# `vramflow gen` files) dumped and restored by the real CRIU through
#   - plain images on disk (criu dump -D, no streamer: the reference),
#   - the real criu-image-streamer piped to `zstd -1 -T0`,
#   - the real criu-image-streamer piped to `lz4`,
#   - `vramflow streamer capture -o FILE` / `serve -i FILE`,
# then live migration between two network namespaces joined by a veth with a
# rate limit: the real streamer + zstd -1 -T0 + socat OPENSSL (a throwaway
# certificate, verified) against `vramflow streamer capture -o tcp://` /
# `serve --listen tcp://` with a key (TLS 1.3). Every restored process is
# checked: alive, and its memory's SHA-256 as before the dump.
# Prints one table; writes bench/results/criu-stream.json. Never in CI.
#
#   bench/criu-stream.sh            (as root)
#   SIZE=1G          the process's memory (fp32 half, adam-m and adam-v a quarter each)
#   RATE=1gbit       link rate between the namespaces (tc tbf both ways)
#   LINK=1           0: skip the live-migration part
#   VRAMFLOW=PATH    binary to measure (default build/vramflow)
#   CAPTURE_ARGS=..  more options for `vramflow streamer capture` (codec, -j, -m)
#   SERVE_ARGS=..    more options for `vramflow streamer serve` (-m MAX_MEMORY, --spill-dir)
#   CRIU_PREFIX=DIR  real CRIU and criu-image-streamer (default build-criu, else /work/main/build-criu)
#   WORK=DIR         where images go (default a directory in /dev/shm: disk speed stays out)
#
# Columns: image bytes (what the streamer's consumer stored), dump s (criu
# dump start until the image is complete), restore s (the serve side's start,
# which for criu-image-streamer includes reading the whole image before it
# lets CRIU connect, until `criu restore -d` returns), streamer peak RSS
# (/usr/bin/time %M of the streamer process alone: compressors and CRIU not
# counted), streamer CPU s (user + system, capture + serve). CRIU, the
# compressors and the streamers share the machine's CPUs (stated).
# vramflow rows whose subcommands this build does not have yet say so.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/veth_link.sh
size="${SIZE:-1G}"
rate="${RATE:-1gbit}"
link="${LINK:-1}"
bin="${VRAMFLOW:-build/vramflow}"
prefix="${CRIU_PREFIX:-}"
if [ -z "$prefix" ]; then
  prefix=build-criu
  [ -x "$prefix/sbin/criu" ] || prefix=/work/main/build-criu
fi
criu="$prefix/sbin/criu"
streamer="$prefix/bin/criu-image-streamer"
[ "$(id -u)" = 0 ] || { echo "criu-stream: CRIU dumps need root" >&2; exit 1; }
for tool in "$criu" "$streamer" "$bin"; do [ -x "$tool" ] || { echo "criu-stream: $tool is missing" >&2; exit 1; }; done
for tool in zstd lz4 socat openssl python3 ss ip tc /usr/bin/time numfmt; do
  command -v "$tool" >/dev/null || { echo "criu-stream: $tool is missing" >&2; exit 1; }
done
bin=$(realpath "$bin")
bytes=$(numfmt --from=iec "$size")
mkdir -p bench/results
work="${WORK:-}"
[ -n "$work" ] || work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-criu-stream-XXXXXX")
mkdir -p "$work"
ns_a="vf-cs-a-$$"
ns_b="vf-cs-b-$$"
netns_made=0
app=""
bg=()   # background pipelines to stop on exit

cleanup() {
  local rc=$? p
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$app" ] && kill -9 "$app" 2>/dev/null || true
  if [ "$netns_made" = 1 ]; then
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
    ip link del "vca$$" 2>/dev/null || true
  fi
  [ -n "${WORK:-}" ] || rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "criu-stream: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# rss_cpu FILE: "peak-RSS-KiB cpu-seconds" from /usr/bin/time -f "%M %U %S"; "- -" without it.
rss_cpu() { [ -s "$1" ] && tail -n 1 "$1" | awk '{ printf "%d %.2f\n", $1, $2 + $3 }' || echo "- -"; }

# wait_for PATH PID [SECONDS]: until PATH exists (a socket); fails if PID exits first.
wait_for() {
  local path=$1 pid=$2 limit=${3:-600} i
  for i in $(seq $((limit * 20))); do
    [ -e "$path" ] && return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 1; }
    sleep 0.05
  done
  return 1
}
wait_gone() {
  local i
  for i in $(seq 600); do [ -d "/proc/$1" ] || return 0; sleep 0.05; done
  die "process $1 is still there after its dump"
}

# ---- the process
echo "== data: $(numfmt --to=iec "$bytes") of model-like memory (vramflow gen: fp32 weights, adam-m, adam-v)"
half=$((bytes / 2 / 4096 * 4096))
quarter=$((bytes / 4 / 4096 * 4096))
"$bin" gen -k fp32 -s "$half" --seed 11 -o "$work/weights.bin" -f >/dev/null
"$bin" gen -k adam-m -s "$quarter" --seed 12 -o "$work/adam-m.bin" -f >/dev/null
"$bin" gen -k adam-v -s "$quarter" --seed 13 -o "$work/adam-v.bin" -f >/dev/null
cat >"$work/app.py" <<'EOF'
import hashlib, os, signal, sys, time
os.closerange(3, 1 << 20)  # fds inherited from the shell (CRIU refuses external pipes)
buffers = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        b = bytearray(os.path.getsize(path))
        f.readinto(b)
        buffers.append(b)
def digest():
    h = hashlib.sha256()
    for b in buffers:
        h.update(b)
    return h.hexdigest()
signal.signal(signal.SIGUSR1, lambda *_: print("check", digest(), flush=True))
print("ready", digest(), flush=True)
while True:
    time.sleep(3600)
EOF
# CRIU wants the process in its own session, stdin /dev/null, output to a
# file and no other fds (../shared/criu/README.md).
applog="$work/app.log"
: >"$applog"
setsid python3 "$work/app.py" "$work/weights.bin" "$work/adam-m.bin" "$work/adam-v.bin" </dev/null >"$applog" 2>&1 &
app=$!
disown "$app"   # CRIU kills it at each dump: no job notices
for i in $(seq 1200); do grep -q '^ready ' "$applog" && break; kill -0 "$app" || die "the process died: $(cat "$applog")"; sleep 0.05; done
expected=$(sed -n 's/^ready //p' "$applog")
[ -n "$expected" ] || die "the process did not get ready"
rm -f "$work/weights.bin" "$work/adam-m.bin" "$work/adam-v.bin"   # tmpfs: give the memory back
rss_app=$(awk '/VmRSS/ { print $2 }' "/proc/$app/status")
echo "process $app: RSS $(numfmt --to=iec $((rss_app * 1024))), memory sha256 ${expected:0:16}..."

# check_restored NAME: the restored process runs and its memory hashes as before.
check_restored() {
  local before i
  [ -d "/proc/$app" ] || die "$1: the restored process $app is not running"
  before=$(grep -c '^check ' "$applog" || true)
  kill -USR1 "$app"
  for i in $(seq 1200); do [ "$(grep -c '^check ' "$applog" || true)" -gt "$before" ] && break; sleep 0.05; done
  [ "$(grep '^check ' "$applog" | tail -n 1)" = "check $expected" ] || die "$1: the restored memory differs (or no answer)"
}

# Results: NAME BYTES DUMP RESTORE RSS_CAPTURE RSS_SERVE CPU_CAPTURE CPU_SERVE NOTE
: >"$work/results"
record() { echo "$*" >>"$work/results"; }

# ---- images on disk (reference)
d="$work/files.d"; mkdir -p "$d"
t0=$(now)
"$criu" dump -D "$d" -t "$app" -o dump.log -v1 || die "files: dump failed: $(tail -n 5 "$d/dump.log")"
t1=$(now)
wait_gone "$app"
img_bytes=$(du -sb --exclude='*.log' --exclude='stats-*' "$d" | cut -f1)
t2=$(now)
"$criu" restore -D "$d" -d -o restore.log -v1 || die "files: restore failed: $(tail -n 5 "$d/restore.log")"
t3=$(now)
check_restored files
record files "$img_bytes" "$(elapsed "$t0" "$t1")" "$(elapsed "$t2" "$t3")" - - - - "criu -D, images on tmpfs"
raw_bytes=$img_bytes
rm -rf "$d"

# stream_case NAME IMAGE CAPTURE SERVE NOTE: CAPTURE and SERVE are shell
# pipelines that write/read IMAGE; @DIR@ is the images directory and @T@
# the prefix that measures the streamer (/usr/bin/time into a file).
stream_case() {
  local name=$1 image=$2 capture=$3 serve=$4 note=$5 d="$work/$1.d" cap srv t0 t1 t2 t3 rc=0
  mkdir -p "$d"
  local tcap="/usr/bin/time -f '%M %U %S' -o $work/$name.cap.time" tsrv="/usr/bin/time -f '%M %U %S' -o $work/$name.srv.time"
  capture=${capture//@DIR@/$d}; capture=${capture//@T@/$tcap}
  serve=${serve//@DIR@/$d}; serve=${serve//@T@/$tsrv}
  sh -c "$capture" >"$work/$name.cap.log" 2>&1 & cap=$!; bg+=("$cap")
  wait_for "$d/streamer-capture.sock" "$cap" 30 || die "$name: capture did not start: $(cat "$work/$name.cap.log")"
  t0=$(now)
  "$criu" dump -D "$d" --stream -t "$app" -o dump.log -v1 || rc=$?
  wait "$cap" || die "$name: capture failed: $(cat "$work/$name.cap.log")"
  t1=$(now)
  [ "$rc" = 0 ] || die "$name: criu dump failed ($rc): $(tail -n 5 "$d/dump.log")"
  wait_gone "$app"
  t2=$(now)
  sh -c "$serve" >"$work/$name.srv.log" 2>&1 & srv=$!; bg+=("$srv")
  wait_for "$d/streamer-serve.sock" "$srv" || die "$name: serve did not start: $(cat "$work/$name.srv.log")"
  "$criu" restore -D "$d" --stream -d -o restore.log -v1 || die "$name: criu restore failed: $(tail -n 5 "$d/restore.log")"
  t3=$(now)
  wait "$srv" || die "$name: serve failed: $(cat "$work/$name.srv.log")"
  check_restored "$name"
  read -r rc_ cc_ < <(rss_cpu "$work/$name.cap.time")
  read -r rs_ cs_ < <(rss_cpu "$work/$name.srv.time")
  record "$name" "$(stat -c %s "$image")" "$(elapsed "$t0" "$t1")" "$(elapsed "$t2" "$t3")" "$rc_" "$rs_" "$cc_" "$cs_" "$note"
  rm -rf "$d" "$image"
}

echo "== local dumps and restores ($(nproc) CPUs shared by CRIU, the streamer and the compressor)"
stream_case streamer_zstd "$work/img.zst" \
  "@T@ $streamer -D @DIR@ capture | zstd -1 -T0 -q -c > $work/img.zst" \
  "zstd -d -q -c $work/img.zst | @T@ $streamer -D @DIR@ serve" "criu-image-streamer | zstd -1 -T0"
stream_case streamer_lz4 "$work/img.lz4" \
  "@T@ $streamer -D @DIR@ capture | lz4 -q -c > $work/img.lz4" \
  "lz4 -d -q -c $work/img.lz4 | @T@ $streamer -D @DIR@ serve" "criu-image-streamer | lz4"

# Has this build `vramflow streamer capture`? (It waits for CRIU when it has.)
probe="$work/probe.d"
timeout 3 "$bin" streamer -D "$probe" capture -o "$work/probe.vfs" >"$work/probe.log" 2>&1 || true
ours=1
grep -q "not built yet\|not supported" "$work/probe.log" && ours=0
rm -rf "$probe" "$work/probe.vfs"
if [ "$ours" = 1 ]; then
  stream_case vramflow "$work/img.vfs" \
    "@T@ $bin streamer -D @DIR@ capture -o $work/img.vfs ${CAPTURE_ARGS:-}" \
    "@T@ $bin streamer -D @DIR@ serve -i $work/img.vfs ${SERVE_ARGS:-}" "vramflow streamer (-o FILE / -i FILE)"
else
  record vramflow - - - - - - - "not run: $(head -n 1 "$work/probe.log")"
fi

# ---- live migration over a rate-limited veth between two namespaces
link_status=ok
if [ "$link" != 1 ]; then
  link_status="skipped (LINK=$link)"
else
  netns_made=1
  va="vca$$"; vb="vcb$$"
  if ! make_veth_link "$ns_a" "$ns_b" "$va" "$vb" 10.98.0 "$rate" 2>"$work/netns.err"; then
    link_status="skipped: setting up the veth link failed: $(head -n 1 "$work/netns.err")"
  fi
fi

# migrate NAME SERVE CAPTURE NOTE: SERVE runs in namespace B (the
# destination) and CAPTURE in A; CRIU itself runs here (unix sockets by path
# reach across network namespaces). Time: criu dump start until `criu
# restore -d` returns; the restore starts once serve lets CRIU connect and
# the dumped process is gone (one host: the pid must be free).
migrate() {
  local name=$1 serve=$2 capture=$3 note=$4 src="$work/$1.src" dst="$work/$1.dst" cap srv t0 t1 rc=0 i
  mkdir -p "$src" "$dst"
  serve=${serve//@DIR@/$dst}; capture=${capture//@DIR@/$src}
  ip netns exec "$ns_b" sh -c "$serve" >"$work/$name.srv.log" 2>&1 & srv=$!; bg+=("$srv")
  for i in $(seq 200); do ip netns exec "$ns_b" ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
  ip netns exec "$ns_a" sh -c "$capture" >"$work/$name.cap.log" 2>&1 & cap=$!; bg+=("$cap")
  wait_for "$src/streamer-capture.sock" "$cap" 30 || die "$name: capture did not start: $(cat "$work/$name.cap.log")"
  t0=$(now)
  "$criu" dump -D "$src" --stream -t "$app" -o dump.log -v1 || rc=$?
  [ "$rc" = 0 ] || die "$name: criu dump failed ($rc): $(tail -n 5 "$src/dump.log")"
  wait_gone "$app"
  wait_for "$dst/streamer-serve.sock" "$srv" || die "$name: serve did not start: $(cat "$work/$name.srv.log")"
  "$criu" restore -D "$dst" --stream -d -o restore.log -v1 || die "$name: criu restore failed: $(tail -n 5 "$dst/restore.log")"
  t1=$(now)
  wait "$cap" || die "$name: capture failed: $(cat "$work/$name.cap.log")"
  wait "$srv" || die "$name: serve failed: $(cat "$work/$name.srv.log")"
  check_restored "$name"
  record "link_$name" - "$(elapsed "$t0" "$t1")" - - - - - "$note"
  rm -rf "$src" "$dst"
}

if [ "$link_status" = ok ]; then
  echo "== live migration: veth $ns_a -> $ns_b, tbf $rate both ways"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/tls.key" \
    -out "$work/tls.crt" -days 1 -subj /CN=vf-bench -addext subjectAltName=IP:10.98.0.2 >/dev/null 2>&1 ||
    die "openssl could not make a certificate"
  port=$((46000 + RANDOM % 1000))
  migrate streamer_zstd_socat \
    "socat -u OPENSSL-LISTEN:$port,bind=10.98.0.2,reuseaddr,cert=$work/tls.crt,key=$work/tls.key,verify=0 STDOUT | zstd -d -q -c | $streamer -D @DIR@ serve" \
    "$streamer -D @DIR@ capture | zstd -1 -T0 -q -c | socat -u STDIN OPENSSL:10.98.0.2:$port,cafile=$work/tls.crt" \
    "criu-image-streamer | zstd -1 -T0 | socat OPENSSL (TLS, verified certificate)"
  if [ "$ours" = 1 ]; then
    "$bin" keygen -o "$work/key" >/dev/null 2>&1
    port=$((port + 1))
    migrate vramflow \
      "$bin streamer -D @DIR@ serve --listen tcp://10.98.0.2:$port --key-file $work/key ${SERVE_ARGS:-}" \
      "$bin streamer -D @DIR@ capture -o tcp://10.98.0.2:$port --key-file $work/key ${CAPTURE_ARGS:-}" \
      "vramflow streamer capture -o tcp:// / serve --listen (TLS 1.3, key)"
  else
    record link_vramflow - - - - - - - "not run: $(head -n 1 "$work/probe.log")"
  fi
else
  record link - - - - - - - "$link_status"
fi

# ---- the table
python3 - "$work/results" "$raw_bytes" "$(nproc)" "$size" "$rate" "$(uname -r)" <<'EOF'
import json, sys
path, raw, cpus, size, rate, kernel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
def num(v, conv=float):
    return None if v == "-" else conv(v)
rows = []
for line in open(path):
    p = line.rstrip("\n").split(" ", 8)
    rows.append({"case": p[0], "image_bytes": num(p[1], int), "dump_s": num(p[2]), "restore_s": num(p[3]),
                 "capture_rss_kib": num(p[4], int), "serve_rss_kib": num(p[5], int),
                 "capture_cpu_s": num(p[6]), "serve_cpu_s": num(p[7]), "note": p[8]})
def f(v, fmt):
    return "-" if v is None else fmt.format(v)
print(f"\nCRIU --stream, {size} process memory ({raw / 2**20:.0f} MiB of CRIU images), {cpus} CPUs, kernel {kernel}")
print(f"{'case':26} {'image MiB':>9} {'ratio':>6} {'dump s':>7} {'restore s':>9} {'cap RSS MiB':>11} {'srv RSS MiB':>11} {'cap CPU s':>9} {'srv CPU s':>9}  note")
for r in rows:
    if r["case"].startswith("link"):
        continue
    ratio = raw / r["image_bytes"] if r["image_bytes"] else None
    print(f"{r['case']:26} {f(r['image_bytes'] and r['image_bytes'] / 2**20, '{:9.1f}'):>9} {f(ratio, '{:6.3f}'):>6} "
          f"{f(r['dump_s'], '{:7.2f}'):>7} {f(r['restore_s'], '{:9.2f}'):>9} "
          f"{f(r['capture_rss_kib'] and r['capture_rss_kib'] / 1024, '{:11.1f}'):>11} "
          f"{f(r['serve_rss_kib'] and r['serve_rss_kib'] / 1024, '{:11.1f}'):>11} "
          f"{f(r['capture_cpu_s'], '{:9.2f}'):>9} {f(r['serve_cpu_s'], '{:9.2f}'):>9}  {r['note']}")
links = [r for r in rows if r["case"].startswith("link")]
if links:
    print(f"\nlive migration over a {rate} veth between two network namespaces: criu dump start -> restored process running")
    for r in links:
        print(f"{r['case']:26} {f(r['dump_s'], '{:7.2f} s'):>9}  {r['note']}")
json.dump({"size": size, "cpus": cpus, "kernel": kernel, "rate": rate, "criu_image_bytes": raw, "rows": rows},
          open("bench/results/criu-stream.json", "w"), indent=1)
EOF
