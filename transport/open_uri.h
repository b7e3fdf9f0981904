// SPDX-License-Identifier: MIT
// Opens the sink or source a URI names (see uri.h): the one entry point the
// CLI and the plugin use, so every command accepts every transport.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "transport/core/byte_stream.h"
#include "transport/core/fd_stream.h"
#include "transport/core/random_access.h"
#include "transport/net/net_options.h"
#include "transport/s3/s3_options.h"

namespace vramflow {

struct TransportOptions {
  FileSinkOptions file;  // paths
  // PATH, -, fd:N: when not 0, the sink writes on a thread of its own
  // (background_sink.h) through two buffers of this many bytes each.
  uint64_t background_write_buffer = 0;
  NetOptions net;  // tcp:// and unix:
  S3Options s3;    // s3://
  // Receiving: how long to wait for a sender to connect (negative: forever).
  std::chrono::milliseconds accept_timeout{-1};
  // Receiving: called with the address once the receiver listens there
  // (with the real port after port 0), before it waits for a sender.
  std::function<void(const std::string& uri)> on_listening;
};

// PATH, -, fd:N: as fd_stream.h. tcp:// and unix:: a network sender
// connected to a receiver there. s3://: a multipart upload (s3_sink.h).
Result<std::unique_ptr<ByteSink>> OpenSink(const std::string& uri, const TransportOptions& options);
// PATH, -, fd:N: as fd_stream.h. tcp:// and unix:: listens there and returns
// the first sender's stream. s3://: parallel ranged GETs (s3_source.h).
Result<std::unique_ptr<ByteSource>> OpenSource(const std::string& uri, const TransportOptions& options);

// A stored stream read at any offset (a seek index, restoring some objects
// only): a regular file (pread) or s3:// (ranged GETs). Anything else (-,
// fd:N, a FIFO or device path, tcp://, unix:) is NotSupported, saying so:
// such streams can only be read in order, with OpenSource().
Result<std::unique_ptr<RandomAccessSource>> OpenRandomAccess(const std::string& uri, const TransportOptions& options);

}  // namespace vramflow
