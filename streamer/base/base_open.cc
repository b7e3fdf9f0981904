// SPDX-License-Identifier: MIT
#include "streamer/base/base_open.h"

#include "streamer/base/base_opener.h"
#include "streamer/base/base_store.h"

#include "common/printable.h"
#include "streamer/format/base_location.h"
#include "transport/core/uri.h"

namespace vramflow {

OpenBaseFunction BaseOpenerFor(const std::vector<std::string>& bases, const std::string& input,
                               const TransportOptions& transport, uint64_t max_index_bytes) {
  return [bases, input, transport,
          max_index_bytes](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
    BaseOpenOptions options = CliBaseOpenOptions(transport, {}, max_index_bytes);
    const std::string needs = "this stream is incremental: it needs its base " + HexDigest(d.base_id) + " (" +
                              (d.location.empty() ? std::string("no location recorded") : Printable(d.location)) + ")";
    if (!bases.empty()) {
      options.more_locations.assign(bases.begin() + 1, bases.end());
      return OpenBaseStream(bases.front(), options, &d);
    }
    if (d.location.empty()) return Status::NotFound(needs + "; give it with --base");
    const std::string location = ResolveBaseLocation(d.location, input);
    Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(location, options, &d);
    if (!base.ok() && (base.status().code() == Status::Code::kIoError || base.status().code() == Status::Code::kNotFound))
      return Status::NotFound(needs + ", which cannot be opened at " + Printable(location) + " (" +
                              base.status().ToString() + "); give it with --base");
    return base;
  };
}

Result<OpenBaseFunction> ReaderBaseOpener(const std::string& input, const std::vector<std::string>& bases,
                                          const std::string& base_store, TransportOptions* transport,
                                          const std::string& command, uint64_t max_index_bytes) {
  Result<Endpoint> from = ParseEndpoint(input);
  if (!(from.ok() && from->is_network())) {
    if (!base_store.empty())
      return Status::InvalidArgument("--base-store offers bases to a sender (--listen); " + Printable(input) +
                                     " is a stored stream");
    return BaseOpenerFor(bases, input, *transport, max_index_bytes);
  }
  return OfferStore(base_store, bases, /*stores=*/false, transport, StderrLog(command), max_index_bytes);
}

}  // namespace vramflow
