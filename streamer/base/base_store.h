// SPDX-License-Identifier: MIT
// A receiver's base store (`recv`, and `unpack`, `verify`, `streamer
// serve/extract` and `demo` with --listen, given --base-store DIR; `recv
// --output-dir DIR` uses DIR unless told otherwise): the earlier streams in
// a directory that a sender may build its stream on (docs/NETWORK.md,
// "Bases"), and, on the sender, the candidates of `--base-store` to pick a
// base from. A store is offered to every sender its receiver authenticates
// (one key, one CA, one user): one store per tenant.
//
// DIR may also be s3://BUCKET/PREFIX: the objects under PREFIX, of which S3
// lists the first 1000 (one ListObjectsV2 page), by LastModified.
//
// Scanning is bounded: of the regular files in DIR (dot files and
// temporaries skipped) only the kMaxStoreStreams newest by modification
// time are looked at; of each, only what finding its stream id takes: its
// two ends, its SEEK_INDEX and INDEX_BLOCK frames (streamer/format/seek_index.h,
// ReadSeekIndex, at most kMaxStoreIndexBytes of index), from which the id
// is hashed. Files that are not streams, or streams without an
// index (written to a pipe), are skipped. Nothing is cached: the scan runs
// again when the store may have changed (recv, after each stored stream), so
// it cannot go stale.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "transport/net/base_offer.h"
#include "transport/open_uri.h"

namespace vramflow {

// At most this many files are read per scan (and offered: kMaxOfferedBases).
inline constexpr size_t kMaxStoreStreams = kMaxOfferedBases;
// Largest index a store's stream may have (per stream): larger ones are skipped.
inline constexpr uint64_t kMaxStoreIndexBytes = 64ull << 20;

struct StoredBase {
  std::string location;  // the file's path, or s3://BUCKET/KEY
  Sha256Digest id;       // its stream id (FORMAT.md 4.12)
};

struct BaseStore {
  std::string dir;
  std::vector<StoredBase> streams;  // newest first, each id once
  size_t files_read = 0;            // files looked at (at most kMaxStoreStreams)
  size_t skipped = 0;               // of those, not usable as a base (why: in `notes`)
  uint64_t bytes_read = 0;          // what the scan read
  std::vector<std::string> notes;   // one line per skipped file

  const StoredBase* Find(const Sha256Digest& id) const;
  // The offer a receiver makes with this store.
  BaseOffer Offer(bool stores) const;
};

// The stream id of the stored stream at `location` (a file or s3://), read
// through `transport` from its index only, which must fit `max_index_bytes`
// (and kMaxStoreIndexBytes); adds the bytes read to `*bytes_read` if given.
Result<Sha256Digest> StoredStreamId(const std::string& location, const TransportOptions& transport,
                                    uint64_t max_index_bytes, uint64_t* bytes_read = nullptr);

// Scans `dir` (an existing directory, or s3://BUCKET/PREFIX) as described
// above, reading through `transport` (its S3 settings). A stream whose index
// does not fit `max_index_bytes` either (the command's budget, -m: it could
// not be opened as a base within it) is skipped, unread.
Result<BaseStore> ScanBaseStore(const std::string& dir, const TransportOptions& transport,
                                size_t max_streams = kMaxStoreStreams, uint64_t max_index_bytes = kMaxStoreIndexBytes);

// Where a receiver writes what its sender is not told (docs/NETWORK.md,
// "What a sender learns"): which file a base was offered from, why it does
// not open. The receiver's stderr or log; may be empty (nothing kept).
using ReceiverLog = std::function<void(const std::string&)>;

// The open_base of a receiver restoring or checking a stream that arrived
// with `offered` made to its sender (NetStream::offered): a stream built on
// a base not offered fails ("never offered"); an offered one is opened from
// the store, its chain's links looked up in the store only, and checked to
// be that stream (OpenBaseStream with the BASE frame: a stored file that
// changed since the scan fails as "wrong base"). Nothing is written before
// the base is open: the restore or store fails first.
//
// The error names the base by the id the sender's own stream gave, and
// nothing of the store (its directory, its files, their ids and sizes): it
// is what the sender is told. The details go to `log`.
//
// Of the store, only the streams of the base's chain are read, their
// indexes within `max_index_bytes`, the receiver's memory budget (-m):
// counted before any record is read, so a chain too large for it is refused
// ("cannot open it"; the log says the size and the budget) unread.
OpenBaseFn StoreBaseOpener(std::shared_ptr<const BaseStore> store, const BaseOffer& offered,
                           const TransportOptions& transport, ReceiverLog log, uint64_t max_index_bytes);

// The streams at `locations` (files or s3://, as --base gives them) as a
// store: each one's id read from its index (within `max_index_bytes`, as
// for ScanBaseStore). A location that is not an indexed stream, or whose
// index does not fit, fails, naming it.
Result<BaseStore> BaseStoreOf(const std::vector<std::string>& locations, const TransportOptions& transport,
                              uint64_t max_index_bytes);

// A receiver of one stream (`unpack`, `verify`, `streamer serve/extract`
// with --listen, `demo --listen`, `recv -o`): its store is `dir` scanned, or
// the streams `bases` names (BaseStoreOf), or none when both are empty
// (both given: kInvalidArgument). Makes the store's offer the receiver's
// (transport->net.base_offer, with `stores`) and returns the open_base that
// resolves the arriving stream's base from it, and from nothing else, its
// indexes within `max_index_bytes` (StoreBaseOpener).
Result<OpenBaseFn> OfferStore(const std::string& dir, const std::vector<std::string>& bases, bool stores,
                              TransportOptions* transport, ReceiverLog log, uint64_t max_index_bytes);

// A ReceiverLog writing "vramflow COMMAND: LINE" to stderr.
ReceiverLog StderrLog(const std::string& command);

}  // namespace vramflow
