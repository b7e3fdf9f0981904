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
#include <optional>
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

  // Writes `data` as Write() does, except that a sink with a thread of its
  // own may go on reading it after returning instead of copying it: the
  // caller keeps the bytes unchanged until Released() is true for the
  // returned ticket. Tickets grow call by call and are released in order; 0
  // means nothing was lent. Other sinks write (or copy) at once and lend
  // nothing.
  virtual Result<uint64_t> WriteBorrowed(std::span<const uint8_t> data) {
    VF_RETURN_IF_ERROR(Write(data));
    return uint64_t{0};
  }
  // Whether the sink is done with the bytes lent under `ticket` (and so with
  // every earlier ticket's).
  virtual bool Released(uint64_t ticket) { return true; }
  // Waits until Released(ticket).
  virtual void WaitReleased(uint64_t ticket) {}
  // Stops reading lent bytes, for a writer that gives up: bytes not yet
  // written are dropped, which fails the sink (its stream has a hole), and a
  // write of lent bytes in progress is waited for. Then every ticket is
  // released.
  virtual void DropBorrowed() {}
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to data.size() bytes; returns 0 only at end of input.
  virtual Result<size_t> Read(std::span<uint8_t> data) = 0;
  virtual std::string Describe() const = 0;
  // Reading in place, for a source whose input is mapped (a regular file,
  // transport/core/file_mapping.h): consumes the next `size` bytes and returns
  // them where they lie, without a copy; fewer than `size` only at the end
  // of input. They stay readable until DoneBefore passes them. std::nullopt
  // when the source only copies: nothing was consumed, use Read.
  virtual std::optional<std::span<const uint8_t>> ReadInPlace(size_t size) { return std::nullopt; }
  // The consumer will not read again any in-place byte before `in_place` (a
  // byte of a span ReadInPlace returned, or one past its end).
  virtual void DoneBefore(const uint8_t* in_place) {}
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
