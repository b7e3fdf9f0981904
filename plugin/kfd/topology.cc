// SPDX-License-Identifier: MIT
#include "plugin/kfd/topology.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

#include "common/unique_fd.h"
#include "common/units.h"

namespace vramflow {
namespace {

// sysfs attributes are at most one page; a fixture file may be larger, and
// nothing in a topology file legitimately is.
constexpr size_t kMaxFileBytes = 64 * 1024;

// Reads a whole small file. Returns 0 or the errno of the failing call, so the
// caller can tell "hidden by the cgroup" (EPERM) from a real failure.
int ReadSmallFile(const std::string& path, std::string* text) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  text->clear();
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    text->append(buf, static_cast<size_t>(n));
    if (text->size() > kMaxFileBytes) return EFBIG;
  }
}

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\n";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

// A plain unsigned decimal, as the kernel prints every topology value.
std::optional<uint64_t> ParseDecimal(std::string_view s) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 10);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// One "key value" file (properties), keyed for lookup, remembering lines.
class PropertyFile {
 public:
  // `rel` is the path under `root`, used in every message.
  Status Load(const std::string& root, const std::string& rel) {
    rel_ = rel;
    std::string text;
    int err = ReadSmallFile(root + "/" + rel, &text);
    if (err != 0) return Status::FromErrno(rel, err);
    int line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string_view line = Trim(std::string_view(text).substr(pos, eol - pos));
      pos = eol + 1;
      ++line_no;
      if (line.empty()) continue;
      size_t space = line.find_first_of(" \t");
      std::string key(line.substr(0, space));
      std::string value(space == std::string_view::npos ? std::string_view() : Trim(line.substr(space)));
      auto [it, inserted] = entries_.emplace(key, Entry{std::move(value), line_no});
      if (!inserted) {
        return Status::Corruption(Where(line_no) + ": '" + key + "' repeats line " + std::to_string(it->second.line));
      }
    }
    return Status::Ok();
  }

  // Stores the value of `key` into *out if present (absent keys leave *out).
  Status Get(const std::string& key, uint64_t* out) const { return GetBounded(key, out, ~uint64_t{0}); }
  Status Get(const std::string& key, uint32_t* out) const {
    uint64_t value = *out;
    VF_RETURN_IF_ERROR(GetBounded(key, &value, std::numeric_limits<uint32_t>::max()));
    *out = static_cast<uint32_t>(value);
    return Status::Ok();
  }

 private:
  struct Entry {
    std::string value;
    int line;
  };

  std::string Where(int line) const { return rel_ + " line " + std::to_string(line); }

  Status GetBounded(const std::string& key, uint64_t* out, uint64_t max) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) return Status::Ok();
    const Entry& e = it->second;
    std::optional<uint64_t> value = ParseDecimal(e.value);
    std::string quoted = "'" + key + (e.value.empty() ? "" : " " + e.value) + "'";
    bool digits = !e.value.empty() && e.value.find_first_not_of("0123456789") == std::string::npos;
    if (!value && !digits) return Status::Corruption(Where(e.line) + ": " + quoted + " is not a number");
    if (!value || *value > max) {
      return Status::Corruption(Where(e.line) + ": " + quoted + " does not fit in " + (value ? "32" : "64") + " bits");
    }
    *out = *value;
    return Status::Ok();
  }

  std::string rel_;
  std::map<std::string, Entry> entries_;
};

// The numbered entries of a directory (nodes/, mem_banks/, io_links/), in
// numeric order. A missing directory has none; other names are not ours.
Result<std::vector<uint32_t>> ListNumbered(const std::string& root, const std::string& rel) {
  std::vector<uint32_t> ids;
  std::error_code ec;
  std::filesystem::directory_iterator it(root + "/" + rel, ec);
  if (ec == std::errc::no_such_file_or_directory) return ids;
  if (ec) return Status::IoError(rel + ": " + ec.message());
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::optional<uint64_t> id = ParseDecimal(it->path().filename().string());
    if (id && *id <= std::numeric_limits<uint32_t>::max()) ids.push_back(static_cast<uint32_t>(*id));
  }
  if (ec) return Status::IoError(rel + ": " + ec.message());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The `properties` keys that fill KfdNode's 32-bit fields, by the kernel's
// names (which are also the proto's).
constexpr KfdNodeProperty kNodeKeys[] = {
    {"cpu_cores_count", &KfdNode::cpu_cores_count},
    {"simd_count", &KfdNode::simd_count},
    {"mem_banks_count", &KfdNode::mem_banks_count},
    {"caches_count", &KfdNode::caches_count},
    {"io_links_count", &KfdNode::io_links_count},
    {"max_waves_per_simd", &KfdNode::max_waves_per_simd},
    {"lds_size_in_kb", &KfdNode::lds_size_in_kb},
    {"gds_size_in_kb", &KfdNode::gds_size_in_kb},
    {"num_gws", &KfdNode::num_gws},
    {"wave_front_size", &KfdNode::wave_front_size},
    {"array_count", &KfdNode::array_count},
    {"simd_arrays_per_engine", &KfdNode::simd_arrays_per_engine},
    {"cu_per_simd_array", &KfdNode::cu_per_simd_array},
    {"simd_per_cu", &KfdNode::simd_per_cu},
    {"max_slots_scratch_cu", &KfdNode::max_slots_scratch_cu},
    {"vendor_id", &KfdNode::vendor_id},
    {"device_id", &KfdNode::device_id},
    {"domain", &KfdNode::domain},
    {"drm_render_minor", &KfdNode::drm_render_minor},
    {"num_sdma_engines", &KfdNode::num_sdma_engines},
    {"num_sdma_xgmi_engines", &KfdNode::num_sdma_xgmi_engines},
    {"num_sdma_queues_per_engine", &KfdNode::num_sdma_queues_per_engine},
    {"num_cp_queues", &KfdNode::num_cp_queues},
    {"fw_version", &KfdNode::fw_version},
    {"capability", &KfdNode::capability},
    {"sdma_fw_version", &KfdNode::sdma_fw_version},
};

Status ParseNodeProperties(const std::string& root, const std::string& dir, KfdNode* node) {
  PropertyFile props;
  VF_RETURN_IF_ERROR(props.Load(root, dir + "/properties"));
  for (const KfdNodeProperty& k : kNodeKeys) VF_RETURN_IF_ERROR(props.Get(k.key, &(node->*k.field)));
  return props.Get("hive_id", &node->hive_id);
}

// VRAM is the FB_PUBLIC and FB_PRIVATE banks together. The kernel publishes
// one such bank per GPU today; summing also covers a split one.
Status ParseMemBanks(const std::string& root, const std::string& dir, KfdNode* node) {
  VF_ASSIGN_OR_RETURN(std::vector<uint32_t> banks, ListNumbered(root, dir + "/mem_banks"));
  for (uint32_t bank : banks) {
    PropertyFile props;
    VF_RETURN_IF_ERROR(props.Load(root, dir + "/mem_banks/" + std::to_string(bank) + "/properties"));
    uint32_t heap_type = kHeapTypeSystem;
    uint64_t size = 0;
    VF_RETURN_IF_ERROR(props.Get("heap_type", &heap_type));
    VF_RETURN_IF_ERROR(props.Get("size_in_bytes", &size));
    if (heap_type != kHeapTypeFbPublic && heap_type != kHeapTypeFbPrivate) continue;
    if (heap_type == kHeapTypeFbPublic) node->vram_public = true;
    node->vram_size += size;
  }
  return Status::Ok();
}

Status ParseIoLinks(const std::string& root, const std::string& dir, KfdNode* node) {
  VF_ASSIGN_OR_RETURN(std::vector<uint32_t> links, ListNumbered(root, dir + "/io_links"));
  for (uint32_t index : links) {
    PropertyFile props;
    VF_RETURN_IF_ERROR(props.Load(root, dir + "/io_links/" + std::to_string(index) + "/properties"));
    IoLink link;
    link.node_from = node->node_id;
    VF_RETURN_IF_ERROR(props.Get("type", &link.type));
    VF_RETURN_IF_ERROR(props.Get("node_from", &link.node_from));
    VF_RETURN_IF_ERROR(props.Get("node_to", &link.node_to_id));
    VF_RETURN_IF_ERROR(props.Get("weight", &link.weight));
    VF_RETURN_IF_ERROR(props.Get("flags", &link.flags));
    node->iolinks.push_back(link);
  }
  return Status::Ok();
}

// Parses nodes/<id>; sets *hidden (and nothing else) for a node whose gpu_id
// this process may not read.
Status ParseNode(const std::string& root, uint32_t id, KfdNode* node, bool* hidden) {
  const std::string dir = "nodes/" + std::to_string(id);
  std::string text;
  int err = ReadSmallFile(root + "/" + dir + "/gpu_id", &text);
  *hidden = err == ENOENT || err == EPERM || err == EACCES;
  if (*hidden) return Status::Ok();
  if (err != 0) return Status::FromErrno(dir + "/gpu_id", err);
  std::optional<uint64_t> gpu_id = ParseDecimal(Trim(text));
  if (!gpu_id || *gpu_id > std::numeric_limits<uint32_t>::max()) {
    return Status::Corruption(dir + "/gpu_id: '" + std::string(Trim(text)) + "' is not a 32-bit number");
  }
  node->node_id = id;
  node->gpu_id = static_cast<uint32_t>(*gpu_id);
  VF_RETURN_IF_ERROR(ParseNodeProperties(root, dir, node));
  VF_RETURN_IF_ERROR(ParseMemBanks(root, dir, node));
  return ParseIoLinks(root, dir, node);
}

}  // namespace

std::vector<const KfdNode*> Topology::gpus() const {
  std::vector<const KfdNode*> out;
  for (const KfdNode& n : nodes) {
    if (n.is_gpu()) out.push_back(&n);
  }
  return out;
}

std::vector<const KfdNode*> Topology::cpus() const {
  std::vector<const KfdNode*> out;
  for (const KfdNode& n : nodes) {
    if (!n.is_gpu()) out.push_back(&n);
  }
  return out;
}

const KfdNode* Topology::FindGpu(uint32_t gpu_id) const {
  if (gpu_id == 0) return nullptr;
  for (const KfdNode& n : nodes) {
    if (n.gpu_id == gpu_id) return &n;
  }
  return nullptr;
}

const KfdNode* Topology::FindNode(uint32_t node_id) const {
  for (const KfdNode& n : nodes) {
    if (n.node_id == node_id) return &n;
  }
  return nullptr;
}

std::optional<uint32_t> Topology::NumaNode(const KfdNode& node) const {
  if (!node.is_gpu()) return node.node_id;
  const IoLink* best = nullptr;
  for (const IoLink& link : node.iolinks) {
    const KfdNode* to = FindNode(link.node_to_id);
    if (to == nullptr || to->is_gpu()) continue;
    if (best == nullptr || link.weight < best->weight ||
        (link.weight == best->weight && link.node_to_id < best->node_to_id)) {
      best = &link;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->node_to_id;
}

std::span<const KfdNodeProperty> KfdNodeProperties() { return kNodeKeys; }

Result<Topology> ParseTopology(const std::string& root) {
  const std::string context = "KFD topology at " + root;
  std::error_code ec;
  if (!std::filesystem::is_directory(root + "/nodes", ec)) {
    return Status::NotSupported(context + ": no nodes/ directory (is amdkfd loaded?)");
  }
  Result<std::vector<uint32_t>> ids = ListNumbered(root, "nodes");
  if (!ids.ok()) return ids.status().WithContext(context);
  Topology topology;
  for (uint32_t id : *ids) {
    KfdNode node;
    bool hidden = false;
    Status s = ParseNode(root, id, &node, &hidden);
    if (!s.ok()) return s.WithContext(context);
    if (!hidden) topology.nodes.push_back(std::move(node));
  }
  return topology;
}

std::string DescribeNode(const KfdNode& node) {
  if (!node.is_gpu()) return "CPU node " + std::to_string(node.node_id);
  return "GPU " + Hex(node.gpu_id) + " (node " + std::to_string(node.node_id) + ")";
}

}  // namespace vramflow
