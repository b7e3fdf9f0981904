// SPDX-License-Identifier: MIT
// How the CLI opens the base of an incremental stream it reads (unpack,
// verify, flatten): from --base (repeatable: the first is the direct base,
// any more are links of its chain, matched by stream id), or, without one,
// from the location the stream's BASE frame records (relative to the
// directory of the stream read). Every base opens through the same
// transports as any input (files, s3:// with the S3 flags). A stream from
// the network is another matter: ReaderBaseOpener.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "streamer/format/base_stream.h"
#include "transport/open_uri.h"

namespace vramflow {

using OpenBaseFunction = std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)>;

// `max_index_bytes`: the most the indexes of the base chain may take, the
// reader's budget (-m): counted from each stream's SEEK_INDEX before its
// records are read, so that a chain too large for it is refused unread.
OpenBaseFunction BaseOpenerFor(const std::vector<std::string>& bases, const std::string& input,
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
Result<OpenBaseFunction> ReaderBaseOpener(const std::string& input, const std::vector<std::string>& bases,
                                          const std::string& base_store, TransportOptions* transport,
                                          const std::string& command, uint64_t max_index_bytes);

}  // namespace vramflow
