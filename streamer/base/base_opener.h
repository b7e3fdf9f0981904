// SPDX-License-Identifier: MIT
// The one base opener: every base vramflow opens, whoever opens it (pack and
// the other commands, the plugin through plugin/vram_base.h, a receiver's
// base store and a sender's candidates through base_store.h and
// net_base_choice.h), opens with BaseOpenOptionsFor: each stream of its chain
// read by ranges through the opener's transports (a file, or s3:// with its
// S3 settings), the chain's indexes within the opener's memory budget,
// counted from each SEEK_INDEX before any record is read, so that a chain
// too large for it is refused unread.
//
// On it, the command line's bases:
// - a dump's (--base LOCATION, repeatable): every location a stored stream,
//   a file or s3://; the first is the base, any more are links of its chain,
//   taken by stream id before the locations the BASE frames record
//   (BaseOpenOptions::more_locations);
// - a reader's (unpack, verify, flatten, streamer serve/extract): from
//   --base, or, without one, from the location the stream's BASE frame
//   records (relative to the directory of the stream read); a stream from
//   the network is another matter: ReaderBaseOpener.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "transport/open_uri.h"

namespace vramflow {

// The base open options every opener starts from: each location opened by
// ranges through `transport`; `max_index_bytes`, the opener's memory budget
// (-m; the plugin's KFD_MAX_BUFFER_SIZE), bounds the chain's indexes.
// Callers add only what is theirs: more_locations, locate, or a narrower
// `open` around this one (a receiver's store opens its own files only).
BaseOpenOptions BaseOpenOptionsFor(const TransportOptions& transport, uint64_t max_index_bytes);

// BaseOpenOptionsFor, with `locations` past the first as more_locations.
BaseOpenOptions CliBaseOpenOptions(const TransportOptions& transport, const std::vector<std::string>& locations,
                                   uint64_t max_index_bytes);

// A dump's base: opens locations[0] (which must be given; a path made
// absolute, as the BASE frame records it), its indexes within
// `max_index_bytes` (as above).
Result<std::shared_ptr<const BaseStream>> OpenCliBase(const std::vector<std::string>& locations,
                                                      const TransportOptions& transport, uint64_t max_index_bytes);

// The value of --base: a file or s3://BUCKET/KEY (read by ranges); a pipe,
// stdin, fd:N or a network address is refused, saying why.
Status CheckBaseLocation(const std::string& location);

// Where a dump's BASE frame says its base is: a file base by its path from
// the output's directory when the output is a file too (so that the two can
// move together; readers take relative locations from there,
// streamer/format/base_location.h), else by its absolute path; a URI as given.
std::string RecordedBaseLocation(const std::string& base, const std::string& output);

// A local path as an absolute one (what a BASE frame records, so that the
// base is found from anywhere); URIs as they are.
std::string AbsoluteBaseLocation(const std::string& location);

// The open_base of a command that reads the stored stream `input`: its base
// from `bases` (--base, as for a dump) or the location its BASE frame
// records, its indexes within `max_index_bytes`.
OpenBaseFn BaseOpenerFor(const std::vector<std::string>& bases, const std::string& input,
                         const TransportOptions& transport, uint64_t max_index_bytes);

// The open_base of a command that reads `input` (unpack, verify, streamer
// serve/extract). From the network (--listen) a base comes only from what
// the command offered its sender: its `base_store` (--base-store DIR) or its
// `bases` (--base), none without either (OfferStore, streamer/base/base_store.h,
// which also sets transport->net.base_offer); never from a location the
// sender wrote into its BASE frame, which names the sender's machine. Else
// BaseOpenerFor(bases, input). `command` names the receiver's stderr lines
// (what its sender is not told). --base-store without --listen, and with
// --base, is kInvalidArgument. `max_index_bytes` as for BaseOpenerFor, from
// a store as from --base.
Result<OpenBaseFn> ReaderBaseOpener(const std::string& input, const std::vector<std::string>& bases,
                                    const std::string& base_store, TransportOptions* transport,
                                    const std::string& command, uint64_t max_index_bytes);

}  // namespace vramflow
