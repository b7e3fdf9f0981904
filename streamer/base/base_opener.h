// SPDX-License-Identifier: MIT
// Opening the base of an incremental dump from the command line (--base
// LOCATION, repeatable): every location is a stored stream, a file or
// s3://, read by ranges through the command's transport options. (Readers
// open theirs with BaseOpenerFor, streamer/base/base_open.h.)
//
// The first location is the base; more are links of its chain (a base's own
// base), taken by stream id before the locations the BASE frames record
// (BaseOpenOptions::more_locations).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "transport/open_uri.h"

namespace vramflow {

// Base open options reading through `transport`, with `locations` past the
// first as more_locations. `max_index_bytes`: the command's memory budget
// (-m), which the chain's indexes must fit: counted from each SEEK_INDEX
// before any record is read, so a chain too large is refused unread.
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

}  // namespace vramflow
