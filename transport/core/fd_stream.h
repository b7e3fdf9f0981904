// SPDX-License-Identifier: MIT
// Sinks and sources over file descriptors: regular files, stdin/stdout, pipes.
//
// A file sink writes to a temporary name beside the target and renames it on
// Commit(), so an interrupted write never leaves a complete-looking file. It
// keeps only a few MiB of what it wrote in the page cache
// (transport/core/writeback_window.h).
#pragma once

#include <memory>
#include <string>

#include "common/cleanup_registry.h"
#include "common/unique_fd.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct FileSinkOptions {
  bool overwrite = false;  // replace an existing file at the target path
  bool fsync = false;      // fsync the file and its directory on Commit()
  // Where the temporary file is registered, to be removed if the process is
  // interrupted (common/cleanup_registry.h); nullptr: not registered.
  CleanupRegistry* cleanup = nullptr;
  // A regular file: more than 1 writes lent bytes (WriteBorrowed, a dump's
  // payloads) on that many threads of the sink's own, each at its place
  // (transport/core/parallel_writes.h), and copies the rest; so the one
  // thread that writes the stream does not copy every payload into the
  // page cache. 0 or 1: written on the caller's thread.
  unsigned writer_threads = 0;
};

// The marker in a temporary file's name: PATH + kTempMarker + owner tag +
// "-" + random hex (common/owner_tag.h).
inline constexpr char kTempMarker[] = ".vf-tmp-";

// Opens `path` for writing through a temporary file in the same directory,
// named after this process (kTempMarker), after removing the temporary files
// there of writers that died (SIGKILL) without removing their own.
// An existing character device or FIFO (/dev/null, a named pipe) is written
// directly.
Result<std::unique_ptr<ByteSink>> OpenFileSink(const std::string& path, const FileSinkOptions& options);

// Writes to an fd that it does not own (stdout, an inherited pipe). A pipe
// is enlarged to 1 MiB where the system allows.
// Commit() only flushes nothing-buffered state; the fd stays open.
std::unique_ptr<ByteSink> BorrowFdSink(int fd, std::string description);

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);
// Reads from an fd that it does not own (stdin, an inherited pipe).
std::unique_ptr<ByteSource> BorrowFdSource(int fd, std::string description);

// "-" means stdout/stdin; anything else is a path.
Result<std::unique_ptr<ByteSink>> OpenSinkSpec(const std::string& spec, const FileSinkOptions& options);
Result<std::unique_ptr<ByteSource>> OpenSourceSpec(const std::string& spec);

}  // namespace vramflow
