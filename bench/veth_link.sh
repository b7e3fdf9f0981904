# SPDX-License-Identifier: MIT
# Sourced by the benchmarks that need a real link between two hosts
# (network.sh, criu-stream.sh): two network namespaces joined by a veth pair,
# rate-limited both ways with tc tbf.
#
#   make_veth_link NS_A NS_B VETH_A VETH_B SUBNET RATE
#
# Makes NS_A (SUBNET.1) and NS_B (SUBNET.2) and the link between them, e.g.
# SUBNET=10.99.0, RATE=1gbit. Returns non-zero on the first step that fails,
# with its message on stderr; the caller removes the namespaces either way.
make_veth_link() {
  local ns_a=$1 ns_b=$2 va=$3 vb=$4 subnet=$5 rate=$6
  ip netns add "$ns_a" &&
    ip netns add "$ns_b" &&
    ip link add "$va" type veth peer name "$vb" &&
    ip link set "$va" netns "$ns_a" && ip link set "$vb" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$subnet.1/24" dev "$va" && ip -n "$ns_b" addr add "$subnet.2/24" dev "$vb" &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set "$va" up && ip -n "$ns_b" link set "$vb" up &&
    ip netns exec "$ns_a" tc qdisc add dev "$va" root handle 1: tbf rate "$rate" burst 512kb latency 100ms &&
    ip netns exec "$ns_b" tc qdisc add dev "$vb" root handle 1: tbf rate "$rate" burst 512kb latency 100ms
}
