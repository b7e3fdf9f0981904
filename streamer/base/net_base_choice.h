// SPDX-License-Identifier: MIT
// The sender's half of base negotiation (docs/NETWORK.md, "Bases"): opens a
// network destination asking its receiver which stored streams it holds,
// and picks from the sender's candidates (`--base URI`, repeatable, in the
// order given; then `--base-store DIR`'s streams, newest first) the first one
// the receiver holds, for the dump to be built on (PipelineOptions::base).
// When it holds none, the stream is a full one, and the note says so.
//
// A candidate costs what finding its stream id costs (its index, read by
// ranges; base_store.h); at most kMaxStoreStreams candidates are read. Only
// the chosen one is opened as a base.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/base/base_store.h"
#include "streamer/format/base_stream.h"
#include "transport/core/byte_stream.h"
#include "transport/net/base_offer.h"
#include "transport/open_uri.h"

namespace vramflow {

struct BaseCandidates {
  std::vector<std::string> locations;  // --base URIs (files, s3://), preferred first
  std::string store;                   // --base-store DIR, or empty
  bool empty() const { return locations.empty() && store.empty(); }
};

struct NetSinkWithBase {
  std::unique_ptr<ByteSink> sink;
  std::shared_ptr<const BaseStream> base;  // null: a full stream
  BaseOffer offer;                         // what the receiver said
  std::string note;                        // one line for the user: which base, or why none
};

// `uri` must be a network destination (tcp://, unix:). The sink is open
// (the receiver waits for the stream) when this returns OK. The chosen
// base's chain must fit `max_index_bytes`, the sender's budget (-m), as
// OpenCandidateBase says.
Result<NetSinkWithBase> OpenNetSinkWithBase(const std::string& uri, const TransportOptions& transport,
                                            const BaseCandidates& candidates, uint64_t max_index_bytes);

// Opens candidates[chosen] as a base, read through `transport`, the other
// candidates serving as its chain's links by stream id
// (BaseOpenOptions::locate: only the links it needs are read). The chain's
// indexes must fit `max_index_bytes` (counted before any record is read).
Result<std::shared_ptr<const BaseStream>> OpenCandidateBase(const std::vector<StoredBase>& candidates, size_t chosen,
                                                            const TransportOptions& transport,
                                                            uint64_t max_index_bytes);

}  // namespace vramflow
