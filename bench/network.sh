#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Network benchmark: the pipeline dumping straight into the network, and
# `vramflow send` moving a stored stream, beside socat on the same bytes.
# Prints a table and writes bench/results/network.json.
#
#   bench/network.sh
#   SIZE=512M       VRAM per simulated GPU (2 GPUs; default 512M -> 1 GiB raw)
#   RATE=1gbit      link rate between the two network namespaces (tc tbf)
#   DELAY=1ms       one-way delay added with netem where the kernel has it
#                   (0 for none); most of these VMs lack sch_netem
#   REPEAT=3        runs per case; the fastest counts
#   VRAMFLOW=PATH   binary to measure (default build/vramflow)
#
# Targets:
#   loopback TCP, no throttle: pack --to tcp >= 90% of the pipeline's
#     throughput to /dev/null (raw bytes / wall seconds); pack -o FILE (tmpfs)
#     and pack -o - | cat are printed beside it for context
#   1 Gbit/s link between two namespaces (veth + tbf, made here when root):
#     transfer time <= 1.1 x stored bytes / link rate, against sending the
#     raw bytes with socat
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/veth_link.sh
size="${SIZE:-512M}"
rate="${RATE:-1gbit}"
delay="${DELAY:-1ms}"
repeat="${REPEAT:-3}"
bin="${VRAMFLOW:-build/vramflow}"
[ -x "$bin" ] || ./scripts/build.sh >/dev/null
bin=$(realpath "$bin")
for tool in socat ss timeout /usr/bin/time python3 realpath; do
  command -v "$tool" >/dev/null || { echo "network: $tool is missing" >&2; exit 1; }
done
mkdir -p bench/results
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-network-XXXXXX")
ns_a="vf-bench-a-$$"
ns_b="vf-bench-b-$$"
netns_made=0
live_recv=""   # pid of the receiver running in the background, if any

cleanup() {
  local rc=$?
  if [ -n "$live_recv" ]; then kill "$live_recv" 2>/dev/null || true; wait "$live_recv" 2>/dev/null || true; fi
  if [ "$netns_made" = 1 ]; then
    ip netns del "$ns_a" 2>/dev/null || true   # takes the veth pair with it
    ip netns del "$ns_b" 2>/dev/null || true
    ip link del "vfa$$" 2>/dev/null || true    # a veth pair left here by a failed setup
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "network: $*" >&2; exit 1; }

# show_logs NAME: what both ends of a failed case printed.
show_logs() {
  local f
  for f in "$work/$1".*.log; do
    [ -e "$f" ] || continue
    echo "--- ${f##*/}" >&2
    tail -n 20 "$f" >&2
  done
}

# A fresh port per transfer (no TIME_WAIT or lingering listener surprises),
# skipping ports something on this host already listens on.
port=$((47000 + RANDOM % 1000))
next_port() {
  port=$((port + 1))
  while ss -Hltn "sport = :$port" | grep -q .; do port=$((port + 1)); done
}

# wait_listen PID CMD...: polls CMD (a listing that prints something once the
# receiver listens) for up to 10 s; fails if PID exits first.
wait_listen() {
  local pid=$1 i; shift
  for i in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || return 1
    "$@" 2>/dev/null | grep -q . && return 0
    sleep 0.05
  done
  return 1
}

now() { date +%s.%N; }
# writer_of LOG: how busy pack's ordered writer was ("writer busy N%" in its
# summary), or - for commands that do not say.
writer_of() { sed -n 's/.*(writer busy \([0-9]*\)%).*/\1/p' "$1" | tail -n 1 | grep . || echo -; }
# cpu_of FILE: user + system CPU seconds from /usr/bin/time -f "%U %S".
cpu_of() { tail -n 1 "$1" | awk '{ printf "%.2f", $1 + $2 }'; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# solo NAME RUN CMD...: times CMD alone (wall seconds into $work/times).
solo() {
  local name=$1 run=$2 t0 t1 rc=0; shift 2
  t0=$(now)
  timeout 300 /usr/bin/time -f "%U %S" -o "$work/send.cpu" "$@" >"$work/$name.send.log" 2>&1 || rc=$?
  t1=$(now)
  [ "$rc" = 0 ] || { show_logs "$name"; die "$name (run $run) failed with status $rc: $*"; }
  echo "$name $run $(elapsed "$t0" "$t1") $(cpu_of "$work/send.cpu") 0 $(writer_of "$work/$name.send.log")" >>"$work/times"
}

# xfer NAME RUN: starts the receiver recv_cmd in the background, waits until
# listen_cmd shows it listening, then times send_cmd from its start until
# BOTH ends have exited (a plain socat sender is done once its last bytes
# are in the kernel's buffers; the receiver's exit marks the end). Either
# end failing fails the script.
xfer() {
  local name=$1 run=$2 t0 t1 rc=0 rrc=0
  timeout 300 /usr/bin/time -f "%U %S" -o "$work/recv.cpu" "${recv_cmd[@]}" >"$work/$name.recv.log" 2>&1 &
  live_recv=$!
  if ! wait_listen "$live_recv" "${listen_cmd[@]}"; then
    show_logs "$name"; die "$name (run $run): the receiver did not start listening: ${recv_cmd[*]}"
  fi
  t0=$(now)
  timeout 300 /usr/bin/time -f "%U %S" -o "$work/send.cpu" "${send_cmd[@]}" >"$work/$name.send.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    kill "$live_recv" 2>/dev/null || true
    show_logs "$name"; die "$name (run $run): the sender failed with status $rc: ${send_cmd[*]}"
  fi
  wait "$live_recv" || rrc=$?
  t1=$(now)
  live_recv=""
  [ "$rrc" = 0 ] || { show_logs "$name"; die "$name (run $run): the receiver failed with status $rrc: ${recv_cmd[*]}"; }
  echo "$name $run $(elapsed "$t0" "$t1") $(cpu_of "$work/send.cpu") $(cpu_of "$work/recv.cpu") $(writer_of "$work/$name.send.log")" >>"$work/times"
}

# tcp_case NAME RUN NS_RECV NS_SEND HOST RECV... -- SEND...: one transfer
# over tcp://HOST:PORT (a fresh port); the strings @ADDR@ and @PORT@ in the
# commands become the address and port. NS_* empty: this namespace.
tcp_case() {
  local name=$1 run=$2 nsr=$3 nss=$4 host=$5 a; shift 5
  next_port
  local pr=() ps=()
  [ -n "$nsr" ] && pr=(ip netns exec "$nsr")
  [ -n "$nss" ] && ps=(ip netns exec "$nss")
  recv_cmd=("${pr[@]}"); send_cmd=("${ps[@]}")
  while [ "$1" != -- ]; do a=${1//@ADDR@/tcp:\/\/$host:$port}; recv_cmd+=("${a//@PORT@/$port}"); shift; done
  shift
  for a in "$@"; do a=${a//@ADDR@/tcp:\/\/$host:$port}; send_cmd+=("${a//@PORT@/$port}"); done
  listen_cmd=("${pr[@]}" ss -Hltn "sport = :$port")
  xfer "$name" "$run"
}

cp /proc/loadavg "$work/loadavg"   # how busy the machine was before we started

echo "== raw VRAM bytes of the demo (2 simulated GPUs x $size), packed once to know the stored bytes"
timeout 600 "$bin" bench pipeline --gpus 2 --size-per-gpu "$size" --no-scaling --repeat 1 \
  --export-raw "$work/raw.bin" >"$work/export.log" 2>&1 || { cat "$work/export.log" >&2; die "exporting the raw bytes failed"; }
timeout 300 "$bin" pack -q "$work/raw.bin" -o "$work/stream.vfs" || die "pack raw.bin -o stream.vfs failed"
raw=$(stat -c %s "$work/raw.bin")
stored=$(stat -c %s "$work/stream.vfs")
echo "raw $(numfmt --to=iec "$raw"), stored $(numfmt --to=iec "$stored") ($(awk -v r="$raw" -v s="$stored" 'BEGIN { printf "ratio %.3f", r / s }'))"
timeout 60 "$bin" keygen -o "$work/key" >/dev/null 2>&1 || die "keygen failed"
key="$work/key"
: >"$work/times"

echo "== sanity: pack --to tcp into a stored stream, verified"
tcp_case check 1 "" "" 127.0.0.1 "$bin" recv --listen @ADDR@ -o "$work/check.vfs" -q --insecure -- \
  "$bin" pack -q "$work/raw.bin" --to @ADDR@ --insecure
timeout 300 "$bin" verify "$work/check.vfs" >"$work/verify.log" 2>&1 || { cat "$work/verify.log" >&2; die "the stream received over TCP does not verify"; }
check_bytes=$(stat -c %s "$work/check.vfs")
[ "$check_bytes" = "$stored" ] || echo "note: the stream received over TCP has $check_bytes bytes, the stored one $stored"
rm -f "$work/check.vfs"
sed -i '/^check /d' "$work/times"

echo "== loopback, no throttle (best of $repeat)"
for run in $(seq "$repeat"); do
  solo pipe_null "$run" "$bin" pack "$work/raw.bin" -o /dev/null
  # Context: the same stream written somewhere real on this machine.
  solo pipe_file "$run" "$bin" pack -f "$work/raw.bin" -o "$work/out.vfs"
  solo pipe_pipe "$run" sh -c '"$1" pack "$2" -o - | cat >/dev/null' sh "$bin" "$work/raw.bin"
  rm -f "$work/out.vfs"
  tcp_case pack_tcp "$run" "" "" 127.0.0.1 "$bin" recv --listen @ADDR@ -o /dev/null -q --insecure -- \
    "$bin" pack "$work/raw.bin" --to @ADDR@ --insecure
  tcp_case pack_tcp_key "$run" "" "" 127.0.0.1 "$bin" recv --listen @ADDR@ -o /dev/null -q --key-file "$key" -- \
    "$bin" pack "$work/raw.bin" --to @ADDR@ --key-file "$key"
  sock="$work/vf-$run.sock"
  recv_cmd=("$bin" recv --listen "unix:$sock" -o /dev/null -q)
  send_cmd=("$bin" pack "$work/raw.bin" --to "unix:$sock")
  listen_cmd=(ss -Hlx src "$sock")
  xfer pack_unix "$run"
  tcp_case send_tcp "$run" "" "" 127.0.0.1 "$bin" recv --listen @ADDR@ -o /dev/null -q --insecure -- \
    "$bin" send -q "$work/stream.vfs" @ADDR@ --insecure
  tcp_case send_tcp_key "$run" "" "" 127.0.0.1 "$bin" recv --listen @ADDR@ -o /dev/null -q --key-file "$key" -- \
    "$bin" send -q "$work/stream.vfs" @ADDR@ --key-file "$key"
  tcp_case socat_stream "$run" "" "" 127.0.0.1 socat -u TCP-LISTEN:@PORT@,bind=127.0.0.1,reuseaddr OPEN:/dev/null -- \
    socat -u "FILE:$work/stream.vfs" TCP:127.0.0.1:@PORT@
done

# ---- the link between two namespaces
link_status="ok"
netem="not tried"
if [ "$(id -u)" != 0 ]; then
  link_status="skipped: not root (namespaces, veth and tc need root)"
elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  link_status="skipped: ip or tc (iproute2) is missing"
else
  netns_made=1
  va="vfa$$"; vb="vfb$$"   # interface names: at most 15 characters
  if ! make_veth_link "$ns_a" "$ns_b" "$va" "$vb" 10.99.0 "$rate" 2>"$work/netns.err"; then
    link_status="skipped: setting up the veth link failed: $(head -n 1 "$work/netns.err")"
  fi
fi

if [ "$link_status" = ok ]; then
  if [ "$delay" = 0 ]; then
    netem="not used (DELAY=0)"
  elif ip netns exec "$ns_a" tc qdisc add dev "$va" parent 1:1 handle 10: netem delay "$delay" 2>"$work/netem.err" &&
       ip netns exec "$ns_b" tc qdisc add dev "$vb" parent 1:1 handle 10: netem delay "$delay" 2>>"$work/netem.err"; then
    netem="$delay each way"
  else
    netem="unavailable ($(head -n 1 "$work/netem.err")): no delay added"
    ip netns exec "$ns_a" tc qdisc del dev "$va" parent 1:1 2>/dev/null || true
  fi
  rate_bits=$(ip netns exec "$ns_a" tc -j qdisc show dev "$va" | python3 -c \
    'import json,sys; print(next(q["options"]["rate"] for q in json.load(sys.stdin) if q["kind"] == "tbf") * 8)')
  echo "== link: veth $ns_a -> $ns_b, tbf $rate ($((rate_bits / 1000000)) Mbit/s) both ways, netem: $netem (best of $repeat)"
  for run in $(seq "$repeat"); do
    tcp_case link_pack "$run" "$ns_b" "$ns_a" 10.99.0.2 "$bin" recv --listen @ADDR@ -o /dev/null -q --insecure -- \
      "$bin" pack -q "$work/raw.bin" --to @ADDR@ --insecure
    tcp_case link_send "$run" "$ns_b" "$ns_a" 10.99.0.2 "$bin" recv --listen @ADDR@ -o /dev/null -q --insecure -- \
      "$bin" send -q "$work/stream.vfs" @ADDR@ --insecure
    tcp_case link_socat_raw "$run" "$ns_b" "$ns_a" 10.99.0.2 socat -u TCP-LISTEN:@PORT@,bind=10.99.0.2,reuseaddr OPEN:/dev/null -- \
      socat -u "FILE:$work/raw.bin" TCP:10.99.0.2:@PORT@
    tcp_case link_socat_stream "$run" "$ns_b" "$ns_a" 10.99.0.2 socat -u TCP-LISTEN:@PORT@,bind=10.99.0.2,reuseaddr OPEN:/dev/null -- \
      socat -u "FILE:$work/stream.vfs" TCP:10.99.0.2:@PORT@
  done
else
  rate_bits=0
  echo "== link: $link_status"
fi

python3 - "$work" "$raw" "$stored" "$repeat" "$size" "$rate" "$rate_bits" "$link_status" "$netem" "$bin" <<'PY'
import json, os, sys
work, raw, stored, repeat, size, rate, rate_bits, link_status, netem, binary = sys.argv[1:]
raw, stored, repeat, rate_bits = int(raw), int(stored), int(repeat), int(rate_bits)
runs, cpus, writers = {}, {}, {}
for line in open(f"{work}/times"):
    name, _, secs, send_cpu, recv_cpu, writer = line.split()
    runs.setdefault(name, []).append(float(secs))
    cpus.setdefault(name, []).append(float(send_cpu) + float(recv_cpu))
    writers.setdefault(name, []).append(None if writer == "-" else int(writer))
best = {k: min(v) for k, v in runs.items()}
cpu = {k: cpus[k][runs[k].index(best[k])] for k in runs}  # both ends, the fastest run
writer = {k: writers[k][runs[k].index(best[k])] for k in runs}  # pack's writer busy %, the fastest run
cores = os.cpu_count()
load = [float(x) for x in open(f"{work}/loadavg").read().split()[:3]]
gbps = lambda n, s: n / s / 1e9

pipe = best["pipe_null"]
print(f"\nloopback, no throttle: {raw/2**20:.1f} MiB raw -> {stored/2**20:.1f} MiB stored"
      f" (ratio {raw/stored:.3f}), best of {repeat}")
print(f"{'case':40} {'seconds':>8} {'raw GB/s':>9} {'vs pipeline':>12} {'CPU s':>6} {'writer':>7}")
loop = {}
for key, label in [("pipe_null", "pack -> /dev/null (the pipeline)"),
                   ("pack_tcp", "pack --to tcp://127.0.0.1, --insecure"),
                   ("pack_tcp_key", "pack --to tcp://127.0.0.1, TLS (key)"),
                   ("pack_unix", "pack --to unix:PATH"),
                   ("pipe_file", "pack -o FILE (on the work tmpfs)"),
                   ("pipe_pipe", "pack -o - | cat >/dev/null")]:
    s = best[key]
    loop[key] = {"seconds": s, "runs": runs[key], "raw_gbps": gbps(raw, s), "vs_pipeline": pipe / s,
                 "cpu_seconds": cpu[key], "writer_busy_percent": writer[key]}
    w = f"{writer[key]}%" if writer[key] is not None else "-"
    print(f"{label:40} {s:8.3f} {gbps(raw, s):9.3f} {pipe / s:11.1%} {cpu[key]:6.2f} {w:>7}")
print(f"\n{'transport only (a stored stream)':40} {'seconds':>8} {'GB/s':>9} {'vs socat':>12} {'CPU s':>6}")
sock = best["socat_stream"]
for key, label in [("send_tcp", "send stream.vfs tcp://127.0.0.1, --insecure"),
                   ("send_tcp_key", "send stream.vfs tcp://127.0.0.1, TLS (key)"),
                   ("socat_stream", "socat stream.vfs -> TCP -> /dev/null")]:
    s = best[key]
    loop[key] = {"seconds": s, "runs": runs[key], "stored_gbps": gbps(stored, s), "vs_socat": sock / s,
                 "cpu_seconds": cpu[key]}
    print(f"{label:40} {s:8.3f} {gbps(stored, s):9.3f} {sock / s:11.1%} {cpu[key]:6.2f}")
print(f"(CPU s: user + system seconds of sender and receiver together; this machine has {cores} cores,"
      f" so no case can take less than CPU s / {cores} wall seconds)")
print("(/dev/null takes the stream without copying it; the last two pack rows show what writing the same"
      " stream to a file or a pipe costs)")
print("(writer: how much of the time pack's one ordered writer stage was busy; near 100%, the destination"
      " or the copy into it sets the pace, not the codecs)")
if load[0] > cores / 2:
    print(f"warning: load average {load[0]:.2f} before the run: other work may share the CPUs, so timings may be noisy")

targets = {
    "loopback_tcp_vs_pipeline": loop["pack_tcp"]["vs_pipeline"],
    "loopback_tcp_pass": loop["pack_tcp"]["vs_pipeline"] >= 0.9,
    "loopback_tcp_key_vs_pipeline": loop["pack_tcp_key"]["vs_pipeline"],
    "loopback_tcp_key_pass": loop["pack_tcp_key"]["vs_pipeline"] >= 0.9,
    "loopback_unix_vs_pipeline": loop["pack_unix"]["vs_pipeline"],
    "loopback_unix_pass": loop["pack_unix"]["vs_pipeline"] >= 0.9,
}

link = None
if link_status == "ok":
    ideal = stored * 8 / rate_bits
    raw_ideal = raw * 8 / rate_bits
    link = {"rate": rate, "rate_bits_per_s": rate_bits, "netem": netem,
            "stored_bytes": stored, "raw_bytes": raw,
            "ideal_seconds": ideal, "raw_ideal_seconds": raw_ideal}
    print(f"\nlink: veth between two namespaces, tbf {rate_bits/1e6:.0f} Mbit/s both ways, netem: {netem}; best of {repeat}")
    print(f"ideal = stored bytes x 8 / nominal rate = {ideal:.3f} s (raw bytes: {raw_ideal:.3f} s)")
    print(f"{'case':40} {'seconds':>8} {'x ideal':>8} {'goodput':>14} {'raw bytes/s':>12} {'CPU s':>6}")
    for key, label, nbytes in [("link_pack", "pack raw.bin --to tcp (pipeline)", stored),
                               ("link_send", "send stream.vfs", stored),
                               ("link_socat_stream", "socat stream.vfs", stored),
                               ("link_socat_raw", "socat raw.bin (uncompressed)", raw)]:
        s = best[key]
        link[key] = {"seconds": s, "runs": runs[key], "x_ideal": s / ideal,
                     "goodput_mbit_s": nbytes * 8 / s / 1e6, "raw_mb_s": raw / s / 1e6, "cpu_seconds": cpu[key]}
        print(f"{label:40} {s:8.3f} {s / ideal:8.3f} {nbytes*8/s/1e6:8.0f} Mbit/s {raw/s/1e6:7.0f} MB/s {cpu[key]:6.2f}")
    raw_goodput = raw * 8 / best["link_socat_raw"]
    link["raw_socat_goodput_fraction_of_rate"] = raw_goodput / rate_bits
    link["speedup_pack_vs_raw_socat"] = best["link_socat_raw"] / best["link_pack"]
    link["speedup_send_vs_raw_socat"] = best["link_socat_raw"] / best["link_send"]
    print(f"socat's goodput on the raw bytes: {raw_goodput/1e6:.0f} Mbit/s = {raw_goodput/rate_bits:.1%}"
          f" of the nominal rate (tbf counts headers; the payload ceiling is ~95%)")
    print(f"speed-up over sending the raw bytes with socat: pack --to {link['speedup_pack_vs_raw_socat']:.2f}x,"
          f" send {link['speedup_send_vs_raw_socat']:.2f}x")
    targets.update({
        "link_pack_x_ideal": link["link_pack"]["x_ideal"],
        "link_pack_pass": link["link_pack"]["x_ideal"] <= 1.1,
        "link_send_x_ideal": link["link_send"]["x_ideal"],
        "link_send_pass": link["link_send"]["x_ideal"] <= 1.1,
    })
else:
    print(f"\nlink: {link_status}")

print("\ntargets:")
print(f"  loopback TCP >= 90% of the pipeline      {targets['loopback_tcp_vs_pipeline']:6.1%}"
      f"  {'pass' if targets['loopback_tcp_pass'] else 'FAIL'}"
      f"   (key {targets['loopback_tcp_key_vs_pipeline']:.1%}, unix {targets['loopback_unix_vs_pipeline']:.1%})")
if link:
    print(f"  link: pack --to <= 1.1 x ideal          {targets['link_pack_x_ideal']:6.3f}"
          f"  {'pass' if targets['link_pack_pass'] else 'FAIL'}")
    print(f"  link: send <= 1.1 x ideal               {targets['link_send_x_ideal']:6.3f}"
          f"  {'pass' if targets['link_send_pass'] else 'FAIL'}")
else:
    print(f"  link: {link_status}")
result = {"vramflow": binary, "size_per_gpu": size, "gpus": 2, "raw_bytes": raw, "stored_bytes": stored,
          "repeat": repeat, "cores": cores, "loadavg_before": load, "loopback": loop, "link": link, "link_status": link_status, "targets": targets}
json.dump(result, open("bench/results/network.json", "w"), indent=2)
print("results: bench/results/network.json")
PY
