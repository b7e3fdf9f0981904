#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A keyed receiver under a flood of connections that are reset at once
# (issue 18: "a flood of 100k connections closed with RST leaves a keyed
# receiver alive, under its memory budget, and still accepting the real
# sender"). Not part of CI: it takes a minute or so.
#
#   bench/recv_flood.sh
#   CONNECTIONS=100000  connections in the flood (SO_LINGER 0: RST, so the
#                       client never runs out of ports in TIME_WAIT)
#   FLOODERS=8          client processes making them
#   SIZE=64M            bytes each real sender sends
#   VRAMFLOW=PATH       binary to measure (default build/vramflow)
#
# `recv --output-dir --count 2` takes two keyed senders: one started while
# the flood runs, one after it. Prints the flood's rate, each sender's time,
# and recv's peak RSS (/usr/bin/time) beside its budget: 64 MiB of stream
# buffers plus the process itself. Exit status 0 only if recv stored both
# streams intact.
set -euo pipefail
cd "$(dirname "$0")/.."
connections="${CONNECTIONS:-100000}"
flooders="${FLOODERS:-8}"
size="${SIZE:-64M}"
bin="${VRAMFLOW:-build/vramflow}"
for tool in python3 /usr/bin/time cmp; do
  command -v "$tool" >/dev/null || { echo "recv_flood.sh: needs $tool" >&2; exit 1; }
done
bin=$(realpath "$bin")
tmp=$(mktemp -d)
recv_pid=""
cleanup() {
  [ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" keygen -o "$tmp/key" 2>/dev/null
# recv stores only valid vramflow streams: the senders send a packed file.
head -c "$(numfmt --from=iec "$size")" /dev/urandom >"$tmp/raw.bin"
"$bin" pack "$tmp/raw.bin" -o "$tmp/in.bin" -q
mkdir "$tmp/out"
/usr/bin/time -f '%M' -o "$tmp/rss" "$bin" recv --listen tcp://127.0.0.1:0 --output-dir "$tmp/out" --count 2 \
  --key-file "$tmp/key" 2>"$tmp/recv.log" &
recv_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/recv.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "recv did not start:"; cat "$tmp/recv.log"; exit 1; }

cat >"$tmp/flood.py" <<'EOF'
import multiprocessing, socket, struct, sys, time
port, n, workers = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def flood(count):
    rst = struct.pack("ii", 1, 0)
    done = 0
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, rst)
        try:
            s.connect(("127.0.0.1", port))
            done += 1
        except OSError:
            pass
        s.close()
    return done
start = time.time()
with multiprocessing.Pool(workers) as pool:
    done = sum(pool.map(flood, [n // workers + (i < n % workers) for i in range(workers)]))
seconds = time.time() - start
print(f"flood: {done} of {n} connections made and reset in {seconds:.1f} s ({done / seconds:.0f}/s, {workers} clients)")
EOF
python3 "$tmp/flood.py" "$port" "$connections" "$flooders" >"$tmp/flood.out" &
flood_pid=$!

send() {  # NAME: prints the seconds the send took
  local start end
  start=$(date +%s.%N)
  "$bin" send "$tmp/in.bin" "tcp://127.0.0.1:$port" --name "$1" --key-file "$tmp/key" -q
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
sleep 2  # the flood is under way
during=$(send during.bin)
flood_running=no
kill -0 "$flood_pid" 2>/dev/null && flood_running=yes
wait "$flood_pid"
after=$(send after.bin)
wait "$recv_pid"
status=$?
recv_pid=""

cat "$tmp/flood.out"
echo "sender during the flood: $size in $during s (flood still running when it finished: $flood_running)"
echo "sender after the flood:  $size in $after s"
echo "recv peak RSS: $(( $(cat "$tmp/rss") / 1024 )) MiB (stream buffers at most 64 MiB + the process)"
echo "recv exit status: $status"
cmp -s "$tmp/in.bin" "$tmp/out/during.bin" && cmp -s "$tmp/in.bin" "$tmp/out/after.bin" ||
  { echo "a stored stream differs"; exit 1; }
[ "$status" -eq 0 ]
