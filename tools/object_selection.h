// SPDX-License-Identifier: MIT
// Which objects of a stream a command restores: `--object NAME` and
// `--gpu N`, each repeatable; an object is selected when any of them matches.
//
// `--gpu N` matches the attribute "gpu" (simulated GPUs: "0", "1", ...) or
// "gpu-id" (the CRIU plugin: "0x..."), compared as text. Every name and GPU
// given must match at least one object, or the selection is an error that
// says what the stream holds: a typo never restores nothing silently.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"

namespace vramflow {

struct ObjectSelector {
  std::vector<std::string> names;
  std::vector<std::string> gpus;

  // No selection: every object.
  bool all() const { return names.empty() && gpus.empty(); }
  bool Matches(const ObjectMetadata& metadata) const;
  // "object 'a', GPU 1"
  std::string Describe() const;
  // Checks that each name and GPU matched one of `objects` (the whole
  // stream's); the error lists what is there. `source` names the stream.
  Status CheckEachMatched(const std::vector<ObjectMetadata>& objects, const std::string& source) const;
};

// What CheckEachMatched needs of an object: its name and its "gpu" and
// "gpu-id" attributes, so that a reader keeps no more of each object.
ObjectMetadata SelectionKey(const ObjectMetadata& metadata);

// The ids of the index's objects that `selector` matches (checked as above).
Result<std::set<uint32_t>> SelectObjects(const SeekIndex& index, const ObjectSelector& selector,
                                         const std::string& source);

}  // namespace vramflow
