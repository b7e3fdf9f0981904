// SPDX-License-Identifier: MIT
#include "tools/object_selection.h"

#include <algorithm>

#include "common/printable.h"

namespace vramflow {
namespace {

bool OnGpu(const ObjectMetadata& metadata, const std::string& gpu) {
  for (const char* key : {"gpu", "gpu-id"})
    if (const std::string* value = metadata.Find(key); value && *value == gpu) return true;
  return false;
}

// "'a', 'b', ... (14 objects)" or the GPUs the stream's objects are on.
std::string ListNames(const std::vector<ObjectMetadata>& objects) {
  std::string out;
  for (size_t i = 0; i < objects.size() && i < 8; ++i) out += (i ? ", " : "") + Printable(objects[i].name);
  if (objects.size() > 8) out += ", ... (" + std::to_string(objects.size()) + " objects)";
  return out.empty() ? "no objects" : out;
}

std::string ListGpus(const std::vector<ObjectMetadata>& objects) {
  std::set<std::string> gpus;
  for (const ObjectMetadata& m : objects)
    for (const char* key : {"gpu", "gpu-id"})
      if (const std::string* value = m.Find(key)) gpus.insert(*value);
  if (gpus.empty()) return "no object has a \"gpu\" or \"gpu-id\" attribute";
  std::string out = "the objects are on GPU";
  for (const std::string& g : gpus) out += " " + g;
  return out;
}

}  // namespace

bool ObjectSelector::Matches(const ObjectMetadata& metadata) const {
  if (std::find(names.begin(), names.end(), metadata.name) != names.end()) return true;
  return std::any_of(gpus.begin(), gpus.end(), [&](const std::string& gpu) { return OnGpu(metadata, gpu); });
}

std::string ObjectSelector::Describe() const {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + ("object '" + n + "'");
  for (const std::string& g : gpus) out += (out.empty() ? "" : ", ") + ("GPU " + g);
  return out.empty() ? "every object" : out;
}

Status ObjectSelector::CheckEachMatched(const std::vector<ObjectMetadata>& objects, const std::string& source) const {
  for (const std::string& n : names)
    if (std::none_of(objects.begin(), objects.end(), [&](const ObjectMetadata& m) { return m.name == n; }))
      return Status::InvalidArgument(source + " has no object named '" + n + "' (it holds " + ListNames(objects) + ")");
  for (const std::string& g : gpus)
    if (std::none_of(objects.begin(), objects.end(), [&](const ObjectMetadata& m) { return OnGpu(m, g); }))
      return Status::InvalidArgument(source + " has no object on GPU " + g + " (" + ListGpus(objects) + ")");
  return Status::Ok();
}

ObjectMetadata SelectionKey(const ObjectMetadata& metadata) {
  ObjectMetadata key;
  key.name = metadata.name;
  for (const auto& [k, v] : metadata.attributes)
    if (k == "gpu" || k == "gpu-id") key.attributes.emplace_back(k, v);
  return key;
}

Result<std::set<uint32_t>> SelectObjects(const SeekIndex& index, const ObjectSelector& selector,
                                         const std::string& source) {
  std::vector<ObjectMetadata> all;
  std::set<uint32_t> ids;
  for (const SeekIndexObject& o : index.objects) {
    all.push_back(o.metadata);
    if (selector.all() || selector.Matches(o.metadata)) ids.insert(o.id);
  }
  VF_RETURN_IF_ERROR(selector.CheckEachMatched(all, source));
  return ids;
}

}  // namespace vramflow
