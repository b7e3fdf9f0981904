#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Live migration with and without a base at the receiver (issue 21, item 4;
# docs/NETWORK.md, "Bases"): the second checkpoint of an inference-like
# process (static bf16 weights, a rewritten KV cache) sent with `pack --to`
# to a `recv` whose store holds the first checkpoint, against the same
# sent to a receiver that holds nothing. Prints bytes sent and wall time of
# each; writes bench/results/incremental_net.json. Not part of CI.
#
#   bench/incremental_net.sh
#   WEIGHTS=512M   static weights (bf16, model-like)
#   KV=64M         KV cache, rewritten between the checkpoints (random)
#   RATE=1gbit     link rate between two network namespaces (veth + tbf;
#                  needs root), else loopback without a limit
#   VRAMFLOW=PATH  binary to measure (default build/vramflow)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/veth_link.sh
weights="${WEIGHTS:-512M}"
kv="${KV:-64M}"
rate="${RATE:-1gbit}"
bin="${VRAMFLOW:-build/vramflow}"
[ -x "$bin" ] || ./scripts/build.sh >/dev/null
bin=$(realpath "$bin")
mkdir -p bench/results
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-incnet-XXXXXX")
ns_a="vf-inc-a-$$"
ns_b="vf-inc-b-$$"
netns_made=0
cleanup() {
  local rc=$?
  if [ "$netns_made" = 1 ]; then
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sender=() receiver=() host=127.0.0.1 link="loopback, no limit"
if [ "$(id -u)" = 0 ] && make_veth_link "$ns_a" "$ns_b" "vfia$$" "vfib$$" 10.98.0 "$rate" 2>"$work/netns.err"; then
  netns_made=1
  sender=(ip netns exec "$ns_a") receiver=(ip netns exec "$ns_b") host=10.98.0.2 link="veth, $rate"
else
  [ "$(id -u)" = 0 ] && { netns_made=1; echo "incremental_net: no veth link ($(cat "$work/netns.err")); loopback" >&2; }
fi

mkdir -p "$work/v1" "$work/v2" "$work/store" "$work/empty"
"$bin" gen -k bf16 -s "$weights" --seed 1 -o "$work/v1/weights"
cp "$work/v1/weights" "$work/v2/weights"
"$bin" gen -k random -s "$kv" --seed 2 -o "$work/v1/kv"
"$bin" gen -k random -s "$kv" --seed 3 -o "$work/v2/kv"
"$bin" pack -q "$work/v1/weights" "$work/v1/kv" -o "$work/ck1.vfs"
cp "$work/ck1.vfs" "$work/store/ck1.vfs"   # the destination holds the first checkpoint

port=7461
# run_case NAME STORE [pack args...]: one migration of v2; prints "bytes seconds".
run_case() {
  local name=$1 store=$2; shift 2
  "${receiver[@]}" "$bin" recv --listen "tcp://$host:$port" -o "$work/$name.vfs" --base-store "$store" \
    --insecure -q --accept-timeout 60 2>"$work/$name.recv.log" &
  local recv_pid=$!
  for _ in $(seq 200); do
    "${receiver[@]}" ss -ltn | grep -q ":$port " && break
    sleep 0.05
  done
  local start end
  start=$(date +%s.%N)
  "${sender[@]}" "$bin" pack -q --json "$work/v2/weights" "$work/v2/kv" --to "tcp://$host:$port" --insecure "$@" \
    >"$work/$name.json" 2>"$work/$name.pack.log"
  end=$(date +%s.%N)
  wait "$recv_pid"
  port=$((port + 1))
  python3 -c "import json,sys; j=json.load(open('$work/$name.json')); print(j['stream_bytes'], $end - $start)"
}

read -r full_bytes full_s < <(run_case full "$work/empty")
read -r inc_bytes inc_s < <(run_case incremental "$work/store" --base "$work/ck1.vfs")
kv_bytes=$(stat -c %s "$work/v2/kv")

printf '%-12s %14s %10s\n' case "bytes sent" seconds
printf '%-12s %14s %10.2f\n' full "$full_bytes" "$full_s"
printf '%-12s %14s %10.2f\n' "with base" "$inc_bytes" "$inc_s"
printf 'link: %s; changed bytes (the KV cache): %s; sent with a base / changed: %.3f; time full / with base: %.1fx\n' \
  "$link" "$kv_bytes" "$(python3 -c "print($inc_bytes / $kv_bytes)")" "$(python3 -c "print($full_s / $inc_s)")"
python3 - "$full_bytes" "$full_s" "$inc_bytes" "$inc_s" "$kv_bytes" "$link" "$weights" "$kv" >bench/results/incremental_net.json <<'EOF'
import json, sys
full_bytes, full_s, inc_bytes, inc_s, kv_bytes, link, weights, kv = sys.argv[1:]
print(json.dumps({"link": link, "weights": weights, "kv": kv, "changed_bytes": int(kv_bytes),
                  "full": {"bytes": int(full_bytes), "seconds": float(full_s)},
                  "with_base": {"bytes": int(inc_bytes), "seconds": float(inc_s)}}, indent=2))
EOF
