// SPDX-License-Identifier: MIT
// ByteSink and ByteSource: where chunk streams are written to and read from.
//
// Every stream consumer and producer in vramflow talks to these two small
// interfaces, never to the OS directly, so a file, a pipe, a socket or an
// object store is one more implementation. Neither is thread-safe: one user
// at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"

namespace vramflow {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Writes all of `data` or fails.
  virtual Status Write(std::span<const uint8_t> data) = 0;
  // Makes everything written so far durable and visible under the sink's
  // final name. A sink destroyed without a successful Commit() leaves nothing
  // that looks complete (files: the temporary is removed).
  virtual Status Commit() = 0;
  // Human-readable name for messages ("file 'x.vfs'", "stdout").
  virtual std::string Describe() const = 0;
  // True when the bytes end up where a reader can later read them at any
  // offset (a regular file, an object in a store), so that a writer should
  // end its stream with a seek index. False for pipes, sockets, devices.
  virtual bool Seekable() const { return false; }
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to data.size() bytes; returns 0 only at end of input.
  virtual Result<size_t> Read(std::span<uint8_t> data) = 0;
  virtual std::string Describe() const = 0;
  // Tells the producer how consuming the stream ended: OK once everything was
  // read and stored (or restored), else the consumer's error. A network
  // source reports it to the sender, whose Commit() waits for it; other
  // sources have nobody to tell.
  virtual Status Finish(const Status& outcome) { return Status::Ok(); }
};

// Reads exactly data.size() bytes unless the input ends first; returns how
// many were read (less than requested only at end of input).
Result<size_t> ReadFully(ByteSource& source, std::span<uint8_t> data);

}  // namespace vramflow
