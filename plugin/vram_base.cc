// SPDX-License-Identifier: MIT
#include "plugin/vram_base.h"

#include <sys/stat.h>

#include <filesystem>

#include "common/sha256.h"
#include "plugin/image_store.h"
#include "streamer/base/base_opener.h"
#include "streamer/pipeline_fit.h"
#include "transport/core/uri.h"

namespace vramflow {
namespace {

// The one base opener's options (streamer/base/base_opener.h) for the
// plugin: its transport, its chain's indexes within its memory budget
// (KFD_MAX_BUFFER_SIZE, or the machine's default).
BaseOpenOptions OpenOptions(const PluginOptions& options) {
  return BaseOpenOptionsFor(options.transport, WithMachineDefaults(options.pipeline).max_memory);
}

// `status` of opening a base, saying which setting bounds the index where
// it did not fit (the reader's message names the CLI's --max-memory).
Status WithBudgetNote(const Status& status) {
  if (status.code() != Status::Code::kNotSupported || status.message().find("--max-memory") == std::string::npos)
    return status;
  return Status::NotSupported(status.message() + "; for the plugin, its memory budget is KFD_MAX_BUFFER_SIZE");
}

}  // namespace

Status RefuseBaseAsTarget(const PluginOptions& options, const std::string& written, const std::string& stream_name) {
  if (options.base.empty() || written.empty()) return Status::Ok();
  VF_ASSIGN_OR_RETURN(std::string base, VramBaseLocation(options, stream_name));
  struct stat a, b;
  const bool same = base == written || (::stat(base.c_str(), &a) == 0 && ::stat(written.c_str(), &b) == 0 &&
                                        a.st_dev == b.st_dev && a.st_ino == b.st_ino);
  if (!same) return Status::Ok();
  return Status::InvalidArgument("VRAMFLOW_BASE=" + options.base + " names " + base + ", where this dump writes " +
                                 stream_name +
                                 ": the new stream would replace its own base. Dump an incremental "
                                 "checkpoint into another directory than its base");
}

Result<std::string> VramBaseLocation(const PluginOptions& options, const std::string& stream_name) {
  Result<std::string> location = ImageLocation(options.base, stream_name);
  if (!location.ok()) return location.status().WithContext("VRAMFLOW_BASE=" + options.base);
  // A path as an absolute one: the BASE frame records it, and a restore
  // without VRAMFLOW_BASE opens it from wherever CRIU runs.
  Result<Endpoint> endpoint = ParseEndpoint(*location);
  if (endpoint.ok() && endpoint->kind == Endpoint::Kind::kPath) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(endpoint->path, ec);
    if (!ec) return absolute.lexically_normal().string();
  }
  return location;
}

Result<std::shared_ptr<const BaseStream>> OpenVramBase(const PluginOptions& options, const std::string& stream_name) {
  VF_ASSIGN_OR_RETURN(std::string location, VramBaseLocation(options, stream_name));
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(location, OpenOptions(options));
  if (!base.ok())
    return WithBudgetNote(base.status())
        .WithContext("the base of " + stream_name + " (VRAMFLOW_BASE=" + options.base + "): " + location);
  return base;
}

OpenBaseFn VramBaseOpener(const PluginOptions& options, const std::string& stream_name) {
  return [options, stream_name](const BaseDescriptor& descriptor) -> Result<std::shared_ptr<const BaseStream>> {
    // From a network sender (a restore listening on VRAMFLOW_TARGET), the
    // BASE frame's location is the sender's word: never opened here.
    Result<std::string> source = ImageLocation(options.target, stream_name);
    Result<Endpoint> sender = ParseEndpoint(source.ok() ? *source : options.target);
    if (options.base.empty() && sender.ok() && sender->is_network())
      return Status::InvalidArgument(stream_name + " is built on base " + HexDigest(descriptor.base_id) +
                                     ", which this receiver never offered its sender: a restore from the network "
                                     "reads its base only from VRAMFLOW_BASE, never where a sender's stream says");
    std::string location = descriptor.location;
    std::string from = "where its BASE frame says (VRAMFLOW_BASE is not set)";
    if (!options.base.empty()) {
      VF_ASSIGN_OR_RETURN(location, VramBaseLocation(options, stream_name));
      from = "VRAMFLOW_BASE=" + options.base;
    }
    if (location.empty())
      return Status::InvalidArgument(stream_name +
                                     " is an incremental stream whose BASE frame names no location: set "
                                     "VRAMFLOW_BASE to the checkpoint it was built on");
    Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(location, OpenOptions(options), &descriptor);
    if (!base.ok())
      return WithBudgetNote(base.status()).WithContext("the base of " + stream_name + " (" + from + "): " + location);
    return base;
  };
}

}  // namespace vramflow
