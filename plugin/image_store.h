// SPDX-License-Identifier: MIT
// ImageStore: where the plugin's image files are written and read by name.
//
// CRIU gives the plugin an images directory, or, with --stream, a
// connection to criu-image-streamer that hands out one pipe per image file.
// VRAM streams may go elsewhere (VRAMFLOW_TARGET: a directory or any
// transport URI). The dump and restore code sees only this interface.
//
// Not thread-safe; sinks and sources it returns are independent.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "common/status.h"
#include "transport/core/byte_stream.h"
#include "transport/open_uri.h"

namespace vramflow {

class ImageStore {
 public:
  virtual ~ImageStore() = default;
  // A new image; nothing is visible under `name` until the sink commits,
  // which replaces an image of that name (an earlier dump's, as CRIU
  // replaces its own images) where the store can.
  virtual Result<std::unique_ptr<ByteSink>> Create(const std::string& name) = 0;
  // An existing image, or nullptr when there is no image of that name.
  virtual Result<std::unique_ptr<ByteSource>> Open(const std::string& name) = 0;
  virtual std::string Describe() const = 0;
  // Where image `name` is stored, as VRAMFLOW_BASE would name it (a path or
  // an s3:// URI); empty where it has no such location (a pipe, a receiver).
  virtual std::string Location(const std::string& /*name*/) const { return ""; }
};

// Files in `dir` (written through a temporary name, renamed on commit over
// any file of that name: options.overwrite is always set).
std::unique_ptr<ImageStore> DirectoryStore(std::string dir, FileSinkOptions options = {});

// CRIU's image streamer (criu/img-streamer.c): `open(name, flags)` is CRIU's
// img_streamer_open, which returns our end of a pipe per file, or -ENOENT
// on restore when the streamer has no such file. `dump` picks the flags
// (CRIU's O_DUMP or O_RSTR). A file can be read once, front to back.
using StreamerOpenFn = int (*)(char* filename, int flags);
std::unique_ptr<ImageStore> CriuStreamerStore(StreamerOpenFn open, bool dump);

// VRAMFLOW_TARGET. A URI containing "{name}" is used with the image's name
// put in its place; a path without it is a directory. A network address
// without it carries every image's stream on dump, one session after
// another, and one stream on restore. Any other URI (s3://, fd:N) carries
// exactly one stream. A second name where only one fits is an error that
// says how to name several. Network streams are named after their image
// (NetOptions::name), and a named stream received for another image is
// refused. Files and s3:// objects of an earlier dump are replaced.
Result<std::unique_ptr<ImageStore>> TargetStore(const std::string& target, const TransportOptions& options);

// Where image `name` is under a pattern of VRAMFLOW_TARGET's form, for what
// is opened by location (VRAMFLOW_BASE): "{name}" in it replaced by the
// name; a path without it is a directory holding the image; any other URI
// without it (s3://bucket/key) names one stream, returned as it is.
Result<std::string> ImageLocation(const std::string& pattern, const std::string& name);
// Whether ImageLocation gives every name the same location (a URI naming
// one stream), so that only one image can be found there.
bool NamesOneImage(const std::string& pattern);

}  // namespace vramflow
