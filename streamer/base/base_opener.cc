// SPDX-License-Identifier: MIT
#include "streamer/base/base_opener.h"

#include <filesystem>

#include "common/printable.h"
#include "streamer/base/base_store.h"
#include "streamer/format/base_location.h"
#include "transport/core/uri.h"

namespace vramflow {

BaseOpenOptions BaseOpenOptionsFor(const TransportOptions& transport, uint64_t max_index_bytes) {
  BaseOpenOptions options;
  options.max_index_bytes = max_index_bytes;
  options.open = [transport](const std::string& location) -> Result<std::shared_ptr<RandomAccessSource>> {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> source, OpenRandomAccess(location, transport));
    return std::shared_ptr<RandomAccessSource>(std::move(source));
  };
  return options;
}

BaseOpenOptions CliBaseOpenOptions(const TransportOptions& transport, const std::vector<std::string>& locations,
                                   uint64_t max_index_bytes) {
  BaseOpenOptions options = BaseOpenOptionsFor(transport, max_index_bytes);
  if (locations.size() > 1) options.more_locations.assign(locations.begin() + 1, locations.end());
  return options;
}

Result<std::shared_ptr<const BaseStream>> OpenCliBase(const std::vector<std::string>& locations,
                                                      const TransportOptions& transport, uint64_t max_index_bytes) {
  if (locations.empty()) return Status::Internal("OpenCliBase without a location");
  const std::string location = AbsoluteBaseLocation(locations[0]);
  Result<std::shared_ptr<const BaseStream>> base =
      OpenBaseStream(location, CliBaseOpenOptions(transport, locations, max_index_bytes));
  if (!base.ok()) return base.status().WithContext("--base " + locations[0]);
  return base;
}

Status CheckBaseLocation(const std::string& location) {
  Result<Endpoint> endpoint = ParseEndpoint(location);
  if (!endpoint.ok()) return endpoint.status().WithContext("--base " + location);
  if (endpoint->kind == Endpoint::Kind::kPath || endpoint->kind == Endpoint::Kind::kS3) return Status::Ok();
  return Status::InvalidArgument("--base " + location +
                                 ": a base is a stored stream read by ranges, a file or "
                                 "s3://BUCKET/KEY; not a pipe, stdin, fd:N or a network address");
}

std::string RecordedBaseLocation(const std::string& base, const std::string& output) {
  Result<Endpoint> b = ParseEndpoint(base);
  if (!b.ok() || b->kind != Endpoint::Kind::kPath) return base;
  const std::filesystem::path absolute = std::filesystem::absolute(b->path).lexically_normal();
  Result<Endpoint> o = ParseEndpoint(output);
  if (!o.ok() || o->kind != Endpoint::Kind::kPath) return absolute.string();
  const std::filesystem::path from = std::filesystem::absolute(o->path).lexically_normal().parent_path();
  const std::filesystem::path relative = absolute.lexically_relative(from);
  return relative.empty() ? absolute.string() : relative.string();
}

std::string AbsoluteBaseLocation(const std::string& location) {
  Result<Endpoint> endpoint = ParseEndpoint(location);
  if (!endpoint.ok() || endpoint->kind != Endpoint::Kind::kPath) return location;
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(endpoint->path, ec);
  return ec ? location : absolute.lexically_normal().string();
}

OpenBaseFn BaseOpenerFor(const std::vector<std::string>& bases, const std::string& input,
                         const TransportOptions& transport, uint64_t max_index_bytes) {
  return [bases, input, transport,
          max_index_bytes](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
    const BaseOpenOptions options = CliBaseOpenOptions(transport, bases, max_index_bytes);
    const std::string needs = "this stream is incremental: it needs its base " + HexDigest(d.base_id) + " (" +
                              (d.location.empty() ? std::string("no location recorded") : Printable(d.location)) + ")";
    if (!bases.empty()) return OpenBaseStream(bases.front(), options, &d);
    if (d.location.empty()) return Status::NotFound(needs + "; give it with --base");
    const std::string location = ResolveBaseLocation(d.location, input);
    Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(location, options, &d);
    if (!base.ok() &&
        (base.status().code() == Status::Code::kIoError || base.status().code() == Status::Code::kNotFound))
      return Status::NotFound(needs + ", which cannot be opened at " + Printable(location) + " (" +
                              base.status().ToString() + "); give it with --base");
    return base;
  };
}

Result<OpenBaseFn> ReaderBaseOpener(const std::string& input, const std::vector<std::string>& bases,
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
