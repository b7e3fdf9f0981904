// SPDX-License-Identifier: MIT
#include "tests/support/test_util.h"

#include <ftw.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>

#include "common/hash.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "transport/core/memory_stream.h"

namespace vramflow::testing {
namespace {
int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/vramflow-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() { ::nftw(path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string UsePrivateDevShm() {
  if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("making the mounts private: ") + std::strerror(errno);
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m") != 0)
    return std::string("mounting a tmpfs on /dev/shm: ") + std::strerror(errno);
  return "";
}

void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> ModelBytes(DataKind kind, size_t size, uint64_t seed) {
  std::vector<uint8_t> out(size);
  GenerateModelData(kind, seed, 0, out);
  return out;
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

std::vector<uint8_t> TextBytes(size_t n) {
  std::vector<uint8_t> out;
  std::mt19937_64 rng(5);
  const char* words[] = {"tensor ", "weight ", "gradient ", "moment ", "layer ", "bias ", "0.0125 ", "-3e-4 "};
  while (out.size() < n) {
    const char* w = words[rng() % 8];
    out.insert(out.end(), w, w + std::strlen(w));
  }
  out.resize(n);
  return out;
}

std::vector<uint8_t> PackToMemory(const std::vector<TestObject>& objects, const EncoderOptions& encoder_options,
                                  uint32_t chunk_size, bool interleave) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = chunk_size;
  header.producer = "vramflow tests";
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(encoder_options);
  auto check = [](const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  };
  check(writer.Start());
  std::vector<uint32_t> ids;
  std::vector<uint64_t> offsets(objects.size(), 0);
  auto add_chunk = [&](size_t i) {
    const TestObject& o = objects[i];
    size_t n = std::min<uint64_t>(chunk_size, o.bytes.size() - offsets[i]);
    EncodedChunk chunk;
    check(encoder.Encode(std::span<const uint8_t>(o.bytes.data() + offsets[i], n), &chunk));
    check(writer.AddChunk(ids[i], offsets[i], n, chunk));
    offsets[i] += n;
  };
  if (interleave) {
    for (const TestObject& o : objects) {
      Result<uint32_t> id = writer.BeginObject(ObjectMetadata{o.name, {}}, o.bytes.size());
      check(id.status());
      ids.push_back(*id);
    }
    bool more = true;
    while (more) {
      more = false;
      for (size_t i = 0; i < objects.size(); ++i)
        if (offsets[i] < objects[i].bytes.size()) {
          add_chunk(i);
          more = true;
        }
    }
    for (uint32_t id : ids) check(writer.EndObject(id));
  } else {
    for (size_t i = 0; i < objects.size(); ++i) {
      Result<uint32_t> id = writer.BeginObject(ObjectMetadata{objects[i].name, {}}, objects[i].bytes.size());
      check(id.status());
      ids.push_back(*id);
      while (offsets[i] < objects[i].bytes.size()) add_chunk(i);
      check(writer.EndObject(ids[i]));
    }
  }
  check(writer.Finish());
  return sink.bytes();
}

namespace {
class CollectVisitor final : public StreamVisitor {
 public:
  Status OnObjectBegin(const ObjectState& o) override {
    by_id[o.id] = objects.size();
    objects.push_back(TestObject{o.metadata.name, {}});
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    std::vector<uint8_t>& b = objects[by_id[e.header.object_id]].bytes;
    if (b.size() < e.header.offset + e.header.raw_size) b.resize(e.header.offset + e.header.raw_size);
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kData))
      std::copy(e.data.begin(), e.data.end(), b.begin() + static_cast<ptrdiff_t>(e.header.offset));
    if (e.dedup) {
      const std::vector<uint8_t>& src = objects[by_id.at(e.dedup->source_object_id)].bytes;
      auto from = src.begin() + static_cast<ptrdiff_t>(e.dedup->source_offset);
      std::copy(from, from + static_cast<ptrdiff_t>(e.header.raw_size),
                b.begin() + static_cast<ptrdiff_t>(e.header.offset));
    }
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& o) override {
    objects[by_id[o.id]].bytes.resize(o.size);
    return Status::Ok();
  }
  std::vector<TestObject> objects;
  std::map<uint32_t, size_t> by_id;
};
}  // namespace

Status UnpackFromMemory(const std::vector<uint8_t>& stream, std::vector<TestObject>* objects) {
  MemorySource source(stream);
  CollectVisitor visitor;
  Status s = ReadStream(source, visitor);
  *objects = std::move(visitor.objects);
  return s;
}

int BreakLastDigestOfEachBlock(std::vector<uint8_t>* stream, uint32_t object_id) {
  int blocks = 0;
  for (uint64_t at = kStreamHeaderSize; at + kFrameHeaderSize <= stream->size();) {
    FrameHeader h;
    if (!DecodeFrameHeader(stream->data() + at, &h).ok()) return -1;
    if (h.kind == static_cast<uint8_t>(FrameKind::kDigestBlock) && (object_id == 0 || h.object_id == object_id)) {
      ++blocks;
      uint8_t* payload = stream->data() + at + kFrameHeaderSize;
      payload[h.payload_size - 1] ^= 1;
      h.raw_hash = Hash64(payload, h.payload_size);
      EncodeFrameHeader(h, stream->data() + at);
    }
    if (h.kind == static_cast<uint8_t>(FrameKind::kStreamEnd)) break;
    at += kFrameHeaderSize + h.payload_size;
  }
  return blocks;
}

int RunCommand(const std::string& command_line, std::string* output) {
  std::string cmd = command_line + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  output->clear();
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string VramflowBinary() { return VRAMFLOW_BINARY; }

}  // namespace vramflow::testing
