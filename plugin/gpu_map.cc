// SPDX-License-Identifier: MIT
#include "plugin/gpu_map.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "common/units.h"

namespace vramflow {
namespace {

// Properties that must be equal on both sides (upstream's device match).
struct EqualField {
  const char* name;
  uint32_t KfdNode::*field;
};
constexpr EqualField kEqualFields[] = {
    {"simd_count", &KfdNode::simd_count},
    {"mem_banks_count", &KfdNode::mem_banks_count},
    {"io_links_count", &KfdNode::io_links_count},
    {"max_waves_per_simd", &KfdNode::max_waves_per_simd},
    {"lds_size_in_kb", &KfdNode::lds_size_in_kb},
    {"wave_front_size", &KfdNode::wave_front_size},
    {"array_count", &KfdNode::array_count},
    {"simd_arrays_per_engine", &KfdNode::simd_arrays_per_engine},
    {"cu_per_simd_array", &KfdNode::cu_per_simd_array},
    {"simd_per_cu", &KfdNode::simd_per_cu},
    {"max_slots_scratch_cu", &KfdNode::max_slots_scratch_cu},
    {"vendor_id", &KfdNode::vendor_id},
    {"device_id", &KfdNode::device_id},
    {"num_sdma_engines", &KfdNode::num_sdma_engines},
    {"num_sdma_xgmi_engines", &KfdNode::num_sdma_xgmi_engines},
    {"num_sdma_queues_per_engine", &KfdNode::num_sdma_queues_per_engine},
    {"num_cp_queues", &KfdNode::num_cp_queues},
};

// Switchable "the destination has at least as much" properties.
struct AtMostField {
  const char* name;
  uint32_t KfdNode::*field;
  bool MapChecks::*enabled;
  const char* variable;
};
constexpr AtMostField kAtMostFields[] = {
    {"fw_version", &KfdNode::fw_version, &MapChecks::fw_version, "KFD_FW_VER_CHECK"},
    {"sdma_fw_version", &KfdNode::sdma_fw_version, &MapChecks::sdma_fw_version, "KFD_SDMA_FW_VER_CHECK"},
    {"caches_count", &KfdNode::caches_count, &MapChecks::caches_count, "KFD_CACHES_COUNT_CHECK"},
    {"num_gws", &KfdNode::num_gws, &MapChecks::num_gws, "KFD_NUM_GWS_CHECK"},
};

// Bounds the backtracking. Real machines have at most a few dozen GPUs and
// the search tries interchangeable GPUs once, so it finishes in far fewer
// steps; the bound only turns a pathological input into an error, not a hang.
constexpr uint64_t kMaxSearchSteps = 5'000'000;

// What one GPU-to-GPU link means to the rules: absent, XGMI, or anything else.
enum class Link : uint8_t { kNone, kOther, kXgmi };

// Whether a destination link `have` can stand in for a source link `need`.
bool LinkKept(Link need, Link have) {
  if (need == Link::kNone) return true;
  if (have == Link::kNone) return false;
  return need != Link::kXgmi || have == Link::kXgmi;
}

// One topology's GPUs, with what the rules look at precomputed by index.
struct Side {
  std::vector<const KfdNode*> gpus;
  std::vector<uint64_t> hive_ids;             // distinct nonzero hive_ids
  std::vector<int> hive;                      // per GPU: index into hive_ids, -1 for none
  std::vector<std::optional<uint32_t>> numa;  // per GPU
  std::vector<std::vector<Link>> link;        // [from][to]
  size_t xgmi_links = 0, other_links = 0;
};

Side BuildSide(const Topology& t) {
  Side side;
  side.gpus = t.gpus();
  const size_t n = side.gpus.size();
  side.link.assign(n, std::vector<Link>(n, Link::kNone));
  for (size_t i = 0; i < n; ++i) {
    const KfdNode& g = *side.gpus[i];
    int hive = -1;
    if (g.hive_id != 0) {
      auto it = std::find(side.hive_ids.begin(), side.hive_ids.end(), g.hive_id);
      hive = static_cast<int>(it - side.hive_ids.begin());
      if (it == side.hive_ids.end()) side.hive_ids.push_back(g.hive_id);
    }
    side.hive.push_back(hive);
    side.numa.push_back(t.NumaNode(g));
    for (const IoLink& l : g.iolinks) {
      for (size_t j = 0; j < n; ++j) {
        if (j == i || side.gpus[j]->node_id != l.node_to_id) continue;
        Link kind = l.type == kIoLinkTypeXgmi ? Link::kXgmi : Link::kOther;
        if (side.link[i][j] != Link::kXgmi) side.link[i][j] = kind;
      }
    }
  }
  for (const auto& row : side.link) {
    for (Link l : row) {
      side.xgmi_links += l == Link::kXgmi;
      side.other_links += l == Link::kOther;
    }
  }
  return side;
}

std::string GpuIds(const Side& side, const std::vector<size_t>& which) {
  std::string out;
  for (size_t i : which) out += (out.empty() ? "" : ", ") + Hex(side.gpus[i]->gpu_id);
  return "{" + out + "}";
}

// "hive 0x77 {0x1111, 0x2222}; no hive {0x3333}".
std::string DescribeHives(const Side& side) {
  std::string out;
  for (int h = -1; h < static_cast<int>(side.hive_ids.size()); ++h) {
    std::vector<size_t> members;
    for (size_t i = 0; i < side.gpus.size(); ++i) {
      if (side.hive[i] == h) members.push_back(i);
    }
    if (members.empty()) continue;
    if (!out.empty()) out += "; ";
    out += (h < 0 ? std::string("no hive ") : "hive " + Hex(side.hive_ids[h]) + " ") + GpuIds(side, members);
  }
  return out;
}

// "NUMA node 0 {0x1111}; NUMA node 1 {0x2222}; unknown {0x3333}".
std::string DescribeNuma(const Side& side) {
  std::map<std::optional<uint32_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < side.gpus.size(); ++i) groups[side.numa[i]].push_back(i);
  std::string out;
  for (const auto& [numa, members] : groups) {
    if (!out.empty()) out += "; ";
    out += (numa ? "NUMA node " + std::to_string(*numa) : std::string("unknown")) + " " + GpuIds(side, members);
  }
  return out;
}

struct Rules {
  bool hives = true;
  bool links = true;
  bool numa = true;
};

// Backtracking over source GPUs in a fixed order. Destination GPUs that a
// swap cannot tell apart (same fits, hive, NUMA node and links to every other
// GPU) form a class, and each level tries one GPU per class: if one fails, so
// would its twin.
class Search {
 public:
  enum class Outcome { kFound, kNone, kGaveUp };

  Search(const Side& src, const Side& dst, const std::vector<std::vector<bool>>& fits, Rules rules)
      : src_(src), dst_(dst), fits_(fits), rules_(rules) {
    Order();
    Classify();
    assigned_.assign(src.gpus.size(), -1);
    used_.assign(dst.gpus.size(), false);
    hive_to_.assign(src.hive_ids.size(), -1);
    hive_count_.assign(src.hive_ids.size(), 0);
    hive_from_.assign(dst.hive_ids.size(), -1);
  }

  Outcome Run() {
    if (Step(0)) return Outcome::kFound;
    return gave_up_ ? Outcome::kGaveUp : Outcome::kNone;
  }
  // Destination index per source index, after kFound.
  const std::vector<int>& assigned() const { return assigned_; }

 private:
  // Hive members first, biggest hive first; within a group, the GPU with the
  // fewest candidates first, so dead ends show early.
  void Order() {
    const size_t n = src_.gpus.size();
    std::vector<size_t> hive_size(src_.hive_ids.size(), 0);
    std::vector<size_t> candidates(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (src_.hive[s] >= 0) ++hive_size[src_.hive[s]];
      candidates[s] = static_cast<size_t>(std::count(fits_[s].begin(), fits_[s].end(), true));
    }
    auto key = [&](size_t s) {
      int h = rules_.hives ? src_.hive[s] : -1;
      // Non-hive GPUs sort after every hive; hives by size, then by index.
      return std::make_tuple(h < 0, h < 0 ? 0 : n - hive_size[h], h, candidates[s], s);
    };
    for (size_t s = 0; s < n; ++s) order_.push_back(s);
    std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  }

  bool Interchangeable(size_t a, size_t b) const {
    for (size_t s = 0; s < src_.gpus.size(); ++s) {
      if (fits_[s][a] != fits_[s][b]) return false;
    }
    if (rules_.hives && dst_.hive[a] != dst_.hive[b]) return false;
    if (rules_.numa && dst_.numa[a] != dst_.numa[b]) return false;
    if (!rules_.links) return true;
    if (dst_.link[a][b] != dst_.link[b][a]) return false;
    for (size_t x = 0; x < dst_.gpus.size(); ++x) {
      if (x == a || x == b) continue;
      if (dst_.link[a][x] != dst_.link[b][x] || dst_.link[x][a] != dst_.link[x][b]) return false;
    }
    return true;
  }

  void Classify() {
    const size_t n = dst_.gpus.size();
    class_.assign(n, -1);
    for (size_t d = 0; d < n; ++d) {
      for (size_t e = 0; e < d && class_[d] < 0; ++e) {
        if (Interchangeable(e, d)) class_[d] = class_[e];
      }
      if (class_[d] < 0) class_[d] = classes_++;
    }
  }

  bool Allowed(size_t s, size_t d) const {
    if (rules_.hives && src_.hive[s] >= 0) {
      int sh = src_.hive[s], dh = dst_.hive[d];
      if (dh < 0) return false;
      if (hive_to_[sh] >= 0 ? hive_to_[sh] != dh : hive_from_[dh] >= 0) return false;
    }
    if (rules_.numa && src_.numa[s]) {
      if (!dst_.numa[d]) return false;
      auto it = numa_to_.find(*src_.numa[s]);
      if (it != numa_to_.end()) {
        if (it->second.first != *dst_.numa[d]) return false;
      } else if (numa_from_.count(*dst_.numa[d])) {
        return false;  // that NUMA node here already stands for another one
      }
    }
    if (rules_.links) {
      for (size_t t : placed_) {
        size_t e = static_cast<size_t>(assigned_[t]);
        if (!LinkKept(src_.link[s][t], dst_.link[d][e]) || !LinkKept(src_.link[t][s], dst_.link[e][d])) return false;
      }
    }
    return true;
  }

  void Place(size_t s, size_t d) {
    assigned_[s] = static_cast<int>(d);
    used_[d] = true;
    placed_.push_back(s);
    if (int sh = src_.hive[s]; rules_.hives && sh >= 0 && hive_count_[sh]++ == 0) {
      hive_to_[sh] = dst_.hive[d];
      hive_from_[dst_.hive[d]] = sh;
    }
    if (rules_.numa && src_.numa[s]) {
      auto [it, inserted] = numa_to_.try_emplace(*src_.numa[s], *dst_.numa[d], 0);
      if (inserted) numa_from_[*dst_.numa[d]] = *src_.numa[s];
      ++it->second.second;
    }
  }

  void Unplace(size_t s, size_t d) {
    if (rules_.numa && src_.numa[s]) {
      auto it = numa_to_.find(*src_.numa[s]);
      if (--it->second.second == 0) {
        numa_from_.erase(it->second.first);
        numa_to_.erase(it);
      }
    }
    if (int sh = src_.hive[s]; rules_.hives && sh >= 0 && --hive_count_[sh] == 0) {
      hive_from_[hive_to_[sh]] = -1;
      hive_to_[sh] = -1;
    }
    placed_.pop_back();
    used_[d] = false;
    assigned_[s] = -1;
  }

  bool Step(size_t k) {
    if (k == order_.size()) return true;
    if (++steps_ > kMaxSearchSteps) {
      gave_up_ = true;
      return false;
    }
    const size_t s = order_[k];
    std::vector<bool> tried(static_cast<size_t>(classes_), false);
    for (size_t d = 0; d < dst_.gpus.size(); ++d) {
      if (used_[d] || !fits_[s][d] || tried[class_[d]]) continue;
      tried[class_[d]] = true;
      if (!Allowed(s, d)) continue;
      Place(s, d);
      if (Step(k + 1)) return true;
      Unplace(s, d);
      if (gave_up_) return false;
    }
    return false;
  }

  const Side& src_;
  const Side& dst_;
  const std::vector<std::vector<bool>>& fits_;
  const Rules rules_;
  std::vector<size_t> order_;
  std::vector<int> class_;
  int classes_ = 0;

  std::vector<int> assigned_;                             // source -> destination index, -1: not yet
  std::vector<bool> used_;                                // destination taken
  std::vector<size_t> placed_;                            // source GPUs placed, in order
  std::vector<int> hive_to_;                              // source hive -> destination hive, -1: open
  std::vector<int> hive_count_;                           // source hive -> members placed
  std::vector<int> hive_from_;                            // destination hive -> source hive, -1: free
  std::map<uint32_t, std::pair<uint32_t, int>> numa_to_;  // source NUMA -> (destination NUMA, GPUs placed)
  std::map<uint32_t, uint32_t> numa_from_;                // destination NUMA -> the source NUMA it stands for
  uint64_t steps_ = 0;
  bool gave_up_ = false;
};

Status NoMapping(const std::string& why) {
  return Status::InvalidArgument("cannot map the checkpointed GPUs onto this machine's: " + why);
}

// Each source GPU has some candidate; finds a group of source GPUs that
// together have fewer candidates than members (Hall's condition), if any.
std::optional<std::string> CompetingGroup(const Side& src, const Side& dst, const std::vector<std::vector<bool>>& fits,
                                          const MapChecks& checks) {
  const size_t n = src.gpus.size();
  std::vector<int> match_of_dst(n, -1);
  std::function<bool(size_t, std::vector<bool>&)> augment = [&](size_t s, std::vector<bool>& seen) {
    for (size_t d = 0; d < n; ++d) {
      if (!fits[s][d] || seen[d]) continue;
      seen[d] = true;
      if (match_of_dst[d] < 0 || augment(static_cast<size_t>(match_of_dst[d]), seen)) {
        match_of_dst[d] = static_cast<int>(s);
        return true;
      }
    }
    return false;
  };
  for (size_t s = 0; s < n; ++s) {
    std::vector<bool> seen(n, false);
    if (augment(s, seen)) continue;
    // `seen` now holds every destination reachable from s by alternating
    // paths; their matched sources plus s are the group competing for them.
    std::vector<size_t> group{s}, targets;
    for (size_t d = 0; d < n; ++d) {
      if (!seen[d]) continue;
      targets.push_back(d);
      group.push_back(static_cast<size_t>(match_of_dst[d]));
    }
    std::sort(group.begin(), group.end());
    std::string why = std::to_string(group.size()) + " checkpointed GPUs " + GpuIds(src, group) + " fit only " +
                      std::to_string(targets.size()) + " GPUs here " + GpuIds(dst, targets);
    for (size_t d = 0; d < n; ++d) {
      if (seen[d]) continue;
      std::vector<std::string> m = GpuMismatches(*src.gpus[s], *dst.gpus[d], checks);
      std::string joined;
      for (const std::string& x : m) joined += (joined.empty() ? "" : "; ") + x;
      why += "; e.g. " + DescribeNode(*dst.gpus[d]) + " cannot take " + DescribeNode(*src.gpus[s]) + ": " + joined;
      break;
    }
    return why;
  }
  return std::nullopt;
}

// The first source GPU that no destination GPU fits, with every reason.
std::optional<std::string> Unplaceable(const Side& src, const Side& dst, const std::vector<std::vector<bool>>& fits,
                                       const MapChecks& checks) {
  size_t first = src.gpus.size(), count = 0;
  for (size_t s = 0; s < src.gpus.size(); ++s) {
    if (std::find(fits[s].begin(), fits[s].end(), true) != fits[s].end()) continue;
    if (count++ == 0) first = s;
  }
  if (count == 0) return std::nullopt;
  std::string why = "no GPU here can take checkpointed " + DescribeNode(*src.gpus[first]) + ":";
  for (const KfdNode* d : dst.gpus) {
    std::string joined;
    for (const std::string& x : GpuMismatches(*src.gpus[first], *d, checks)) joined += (joined.empty() ? "" : "; ") + x;
    why += " [" + DescribeNode(*d) + ": " + joined + "]";
  }
  if (count > 1) why += " (and " + std::to_string(count - 1) + " more checkpointed GPUs fit no GPU here)";
  return why;
}

}  // namespace

std::vector<std::string> GpuMismatches(const KfdNode& source, const KfdNode& dest, const MapChecks& checks) {
  std::vector<std::string> out;
  for (const EqualField& f : kEqualFields) {
    if (source.*f.field == dest.*f.field) continue;
    out.push_back(std::string(f.name) + " " + std::to_string(source.*f.field) + " in the checkpoint, " +
                  std::to_string(dest.*f.field) + " here");
  }
  if (source.vram_public != dest.vram_public) {
    out.push_back(std::string("vram_public ") + (source.vram_public ? "yes" : "no") + " in the checkpoint, " +
                  (dest.vram_public ? "yes" : "no") + " here");
  }
  for (const AtMostField& f : kAtMostFields) {
    if (!(checks.*f.enabled) || source.*f.field <= dest.*f.field) continue;
    out.push_back(std::string(f.name) + " " + std::to_string(source.*f.field) + " in the checkpoint, only " +
                  std::to_string(dest.*f.field) + " here (" + f.variable + "=0 skips this check)");
  }
  if (checks.vram_size && source.vram_size > dest.vram_size) {
    out.push_back("vram_size " + std::to_string(source.vram_size) + " (" + FormatSize(source.vram_size) +
                  ") in the checkpoint, only " + std::to_string(dest.vram_size) + " (" + FormatSize(dest.vram_size) +
                  ") here (KFD_VRAM_SIZE_CHECK=0 skips this check)");
  }
  if (checks.capability && source.capability != dest.capability) {
    out.push_back("capability " + Hex(source.capability) + " in the checkpoint, " + Hex(dest.capability) +
                  " here (KFD_CAPABILITY_CHECK=0 skips this check)");
  }
  return out;
}

Result<GpuMap> MapGpus(const Topology& source, const Topology& dest, const MapChecks& checks) {
  const Side src = BuildSide(source), dst = BuildSide(dest);
  const size_t n = src.gpus.size();
  if (n != dst.gpus.size()) {
    std::vector<size_t> all_src(n), all_dst(dst.gpus.size());
    for (size_t i = 0; i < all_src.size(); ++i) all_src[i] = i;
    for (size_t i = 0; i < all_dst.size(); ++i) all_dst[i] = i;
    return NoMapping("the checkpoint has " + std::to_string(n) + " GPUs " + GpuIds(src, all_src) +
                     " but this machine has " + std::to_string(dst.gpus.size()) + " " + GpuIds(dst, all_dst));
  }
  if (src.hive_ids.size() > dst.hive_ids.size()) {
    return NoMapping("the checkpoint's GPUs form " + std::to_string(src.hive_ids.size()) + " XGMI hives (" +
                     DescribeHives(src) + ") but this machine's form " + std::to_string(dst.hive_ids.size()) +
                     (dst.hive_ids.empty() ? "" : " (" + DescribeHives(dst) + ")"));
  }
  std::vector<std::vector<bool>> fits(n, std::vector<bool>(n, false));
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) fits[s][d] = GpuMismatches(*src.gpus[s], *dst.gpus[d], checks).empty();
  }
  if (auto why = Unplaceable(src, dst, fits, checks)) return NoMapping(*why);
  if (auto why = CompetingGroup(src, dst, fits, checks)) return NoMapping(*why);

  Search search(src, dst, fits, Rules{true, true, checks.numa});
  Search::Outcome outcome = search.Run();
  if (outcome == Search::Outcome::kFound) {
    GpuMap map;
    for (size_t s = 0; s < n; ++s) map[src.gpus[s]->gpu_id] = dst.gpus[search.assigned()[s]]->gpu_id;
    return map;
  }
  if (outcome == Search::Outcome::kGaveUp) {
    return NoMapping("gave up after " + std::to_string(kMaxSearchSteps) + " search steps");
  }
  // Name the first rule that makes the problem unsolvable, adding one at a time.
  if (Search(src, dst, fits, Rules{true, false, false}).Run() != Search::Outcome::kFound) {
    return NoMapping("no assignment keeps each XGMI hive within one hive here (checkpoint: " + DescribeHives(src) +
                     "; here: " + DescribeHives(dst) + ")");
  }
  if (Search(src, dst, fits, Rules{true, true, false}).Run() != Search::Outcome::kFound) {
    return NoMapping(
        "no assignment keeps the links between GPUs (each link needs one here, XGMI where it was XGMI); the "
        "checkpoint has " +
        std::to_string(src.xgmi_links) + " XGMI and " + std::to_string(src.other_links) +
        " other GPU-to-GPU links, this machine " + std::to_string(dst.xgmi_links) + " XGMI and " +
        std::to_string(dst.other_links) + " other");
  }
  std::string hives;
  if (!src.hive_ids.empty()) {
    hives =
        ", while keeping XGMI hives whole (checkpoint: " + DescribeHives(src) + "; here: " + DescribeHives(dst) + ")";
  }
  return NoMapping(
      "no assignment keeps GPUs that share a NUMA node on one NUMA node, and GPUs on different NUMA nodes on "
      "different ones (checkpoint: " +
      DescribeNuma(src) + "; here: " + DescribeNuma(dst) + ")" + hives + "; KFD_NUMA_CHECK=0 skips this check");
}

}  // namespace vramflow
