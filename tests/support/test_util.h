// SPDX-License-Identifier: MIT
// Helpers shared by the tests: temporary directories, files, streams in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "datagen/model_data.h"
#include "streamer/format/frame_format.h"

namespace vramflow::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Gives this process, and what it starts, a /dev/shm of its own: a new
// mount namespace with a tmpfs there. For tests that create the ROCm
// runtime's files (hsakmt_shared_mem, sem.hsakmt_semaphore), one per host:
// other tests' dumps running beside them (ctest -j) would record those
// files, and their restores recreate them after the test removed them.
// Needs root and a process with one thread. Returns "" or why it could not.
std::string UsePrivateDevShm();

std::vector<uint8_t> ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> ModelBytes(DataKind kind, size_t size, uint64_t seed = 1);
// Compressible text-like bytes (seeded), so every block codec shrinks them.
std::vector<uint8_t> TextBytes(size_t n);
// Incompressible bytes, the same for the same seed.
std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed);

struct TestObject {
  std::string name;
  std::vector<uint8_t> bytes;
};

// Writes `objects` as one stream with the given encoder and chunk size.
// With `interleave`, chunks of all objects alternate in the stream.
std::vector<uint8_t> PackToMemory(const std::vector<TestObject>& objects, const EncoderOptions& encoder,
                                  uint32_t chunk_size, bool interleave = false);

// Reads a stream fully (decoding) and returns the objects it holds, or the error.
Status UnpackFromMemory(const std::vector<uint8_t>& stream, std::vector<TestObject>* objects);

// Flips a bit of the last entry of each DIGEST_BLOCK in `stream` (of
// object `object_id` only, unless 0) and hashes the block again, so that only
// the chunk's bytes can tell; returns how many blocks it changed, or -1 if a
// frame header does not decode.
int BreakLastDigestOfEachBlock(std::vector<uint8_t>* stream, uint32_t object_id = 0);

// Runs a shell command line, capturing stdout+stderr; returns the exit status.
int RunCommand(const std::string& command_line, std::string* output);
// Path of the built vramflow binary.
std::string VramflowBinary();

}  // namespace vramflow::testing
