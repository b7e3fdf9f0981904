// SPDX-License-Identifier: MIT
// Two network namespaces joined by a veth pair, for tests that need a real
// link between two hosts: one that can be slowed down (tc tbf) and cut (link
// down), which loopback cannot do. Needs root and `ip netns`.
#pragma once

#include <unistd.h>

#include <string>

#include "tests/support/test_util.h"

namespace vramflow::testing {

inline int Sh(const std::string& command, std::string* output = nullptr) {
  std::string ignored;
  return testing::RunCommand(command, output ? output : &ignored);
}

// Two namespaces, A (10.98.N.1) and B (10.98.N.2), one veth pair between
// them; removed on destruction.
class NamespacePair {
 public:
  NamespacePair() {
    tag_ = std::to_string(::getpid() % 100000) + "-" + std::to_string(counter_++);
    a_ = "vfa-" + tag_;
    b_ = "vfb-" + tag_;
    subnet_ = std::to_string(1 + (::getpid() + counter_) % 250);
  }
  ~NamespacePair() {
    Sh("ip netns del " + a_ + " 2>/dev/null");
    Sh("ip netns del " + b_ + " 2>/dev/null");
  }

  // Returns an empty string when ready, else why the test must be skipped.
  std::string Setup() {
    if (::geteuid() != 0) return "needs root to create network namespaces";
    std::string out;
    if (Sh("ip netns add " + a_, &out) != 0) return "ip netns unavailable: " + out;
    if (Sh("ip netns add " + b_, &out) != 0) return "ip netns unavailable: " + out;
    std::string script = "set -e; ip link add va type veth peer name vb netns " + b_ + " 2>&1 || exit 1;" +
                         // the peer was created in our namespace as `va`; move it to A
                         "ip link set va netns " + a_ + ";" + "ip -n " + a_ + " addr add 10.98." + subnet_ +
                         ".1/24 dev va;" + "ip -n " + b_ + " addr add 10.98." + subnet_ + ".2/24 dev vb;" + "ip -n " +
                         a_ + " link set lo up; ip -n " + a_ + " link set va up;" + "ip -n " + b_ +
                         " link set lo up; ip -n " + b_ + " link set vb up";
    if (Sh(script, &out) != 0) return "cannot make a veth pair between namespaces: " + out;
    return "";
  }
  std::string InA(const std::string& command) const { return "ip netns exec " + a_ + " " + command; }
  std::string InB(const std::string& command) const { return "ip netns exec " + b_ + " " + command; }
  std::string AddressOfB() const { return "10.98." + subnet_ + ".2"; }
  // Rate-limits A's side of the link (A -> B traffic).
  bool Limit(const std::string& rate) const {
    return Sh("ip netns exec " + a_ + " tc qdisc add dev va root tbf rate " + rate + " burst 32kb latency 400ms") == 0;
  }
  void CutLink() const { Sh("ip -n " + a_ + " link set va down"); }

 private:
  static inline int counter_ = 0;
  std::string tag_, a_, b_, subnet_;
};

}  // namespace vramflow::testing
