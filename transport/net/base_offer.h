// SPDX-License-Identifier: MIT
// What a receiver tells a sender that asks before sending (docs/NETWORK.md,
// "Bases"): the streams it holds that a new stream may be built on
// (FORMAT.md 4.9, by stream id, 4.12), and whether it stores what it
// receives, so that the sender writes the stream with its index (and
// DIGEST_BLOCKs) and the stored stream can be the next one's base.
#pragma once

#include <cstddef>
#include <vector>

#include "common/sha256.h"

namespace vramflow {

// Most stream ids one offer carries (32 bytes each: 2 KiB). A receiver
// offers its newest streams up to this; a sender refuses a longer offer.
inline constexpr size_t kMaxOfferedBases = 64;

struct BaseOffer {
  bool stores = false;            // the receiver keeps the stream as it arrives (recv)
  std::vector<Sha256Digest> ids;  // stream ids it can resolve references from, newest first
  bool Holds(const Sha256Digest& id) const {
    for (const Sha256Digest& held : ids)
      if (held == id) return true;
    return false;
  }
  bool operator==(const BaseOffer&) const = default;
};

}  // namespace vramflow
