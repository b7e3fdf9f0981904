// SPDX-License-Identifier: MIT
#include "streamer/base/net_base_choice.h"

#include <algorithm>

#include "streamer/base/base_opener.h"
#include "streamer/base/base_store.h"

namespace vramflow {
namespace {

using Candidate = StoredBase;  // a candidate's location and stream id

Result<std::vector<Candidate>> ListCandidates(const BaseCandidates& candidates, const TransportOptions& transport,
                                              uint64_t max_index_bytes) {
  if (candidates.locations.size() > kMaxStoreStreams)
    return Status::InvalidArgument(std::to_string(candidates.locations.size()) + " --base candidates: at most " +
                                   std::to_string(kMaxStoreStreams));
  std::vector<Candidate> list;
  for (const std::string& location : candidates.locations) {
    Result<Sha256Digest> id = StoredStreamId(location, transport, max_index_bytes);
    if (!id.ok()) return id.status().WithContext("base candidate '" + location + "'");
    list.push_back(Candidate{location, *id});
  }
  if (!candidates.store.empty()) {
    VF_ASSIGN_OR_RETURN(
        BaseStore store,
        ScanBaseStore(candidates.store, transport, kMaxStoreStreams - candidates.locations.size(), max_index_bytes));
    for (const StoredBase& stored : store.streams) list.push_back(Candidate{stored.location, stored.id});
  }
  return list;
}

}  // namespace

Result<std::shared_ptr<const BaseStream>> OpenCandidateBase(const std::vector<StoredBase>& candidates, size_t chosen,
                                                            const TransportOptions& transport,
                                                            uint64_t max_index_bytes) {
  BaseOpenOptions options = BaseOpenOptionsFor(transport, max_index_bytes);
  options.locate = [&candidates](const StreamId& id) {
    for (const StoredBase& c : candidates)
      if (c.id == id) return c.location;
    return std::string();
  };
  const std::string& location = candidates[chosen].location;
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(location, options);
  if (!base.ok()) return base.status().WithContext("base '" + location + "'");
  return base;
}

Result<NetSinkWithBase> OpenNetSinkWithBase(const std::string& uri, const TransportOptions& transport,
                                            const BaseCandidates& candidates, uint64_t max_index_bytes) {
  VF_ASSIGN_OR_RETURN(std::vector<Candidate> list, ListCandidates(candidates, transport, max_index_bytes));
  NetSinkWithBase out;
  TransportOptions asking = transport;
  asking.net.ask_bases = true;
  asking.net.on_bases = [&out](const BaseOffer& offer) { out.offer = offer; };
  VF_ASSIGN_OR_RETURN(out.sink, OpenSink(uri, asking));
  const Candidate* chosen = nullptr;
  for (const Candidate& candidate : list) {
    if (out.offer.Holds(candidate.id)) {
      chosen = &candidate;
      break;
    }
  }
  if (!chosen) {
    if (!candidates.empty())
      out.note =
          "the receiver holds none of the " + std::to_string(list.size()) + " candidate bases: sending a full stream";
    return out;
  }
  Result<std::shared_ptr<const BaseStream>> base =
      OpenCandidateBase(list, static_cast<size_t>(chosen - list.data()), transport, max_index_bytes);
  if (!base.ok()) return base.status();
  if ((*base)->id() != chosen->id)
    return Status::InvalidArgument("base '" + chosen->location + "' changed while the receiver was asked about it");
  out.base = std::move(*base);
  out.note = "the receiver holds " + chosen->location + " (stream " + HexDigest(chosen->id).substr(0, 16) +
             "...): sending only what it lacks";
  return out;
}

}  // namespace vramflow
