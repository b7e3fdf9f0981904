// SPDX-License-Identifier: MIT
// `vramflow pack --base`, `--base-refs-only` and `--digests` on files:
// an incremental stream holds only what changed, reports new, referenced
// and delta-coded bytes, and unpacks with its base to the exact files;
// bases that cannot serve are clear errors that leave no output.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/base/base_store.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "transport/core/file_random_access.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;
using ::vramflow::testing::WriteFileBytes;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;

CommandResult Sh(const std::string& dir, const std::string& line) {
  CommandResult r;
  r.code = RunCommand("( cd " + Q(dir) + " && VF=" + Q(VramflowBinary()) + "; " + line + " )", &r.output);
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

#define EXPECT_CODE(result, expected) EXPECT_EQ((result).code, (expected)) << (result).output
#define ASSERT_CODE(result, expected) ASSERT_EQ((result).code, (expected)) << (result).output

// Three model-like files packed as a base (with digests), then changed: 1 MiB
// of the fp32 master rewritten with random bytes, and 4 MiB of Adam's second
// moment replaced by other model-like data.
class IncrementalPack : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CODE(Sh(dir_.path(),
                   "mkdir v1 v2 && $VF gen -k bf16 -s 8M -o v1/weights.bin && "
                   "$VF gen -k adam-v -s 6M --seed 3 -o v1/optimizer.bin && "
                   "$VF gen -k fp32 -s 4M --seed 4 -o v1/master.bin && cp v1/* v2/"),
                0);
    ASSERT_CODE(Sh(dir_.path(), "$VF pack -q --digests v1/weights.bin v1/optimizer.bin v1/master.bin -o base.vfs"), 0);
    ASSERT_CODE(Sh(dir_.path(),
                   "$VF gen -k random -s 1M --seed 9 -o r.bin && "
                   "dd if=r.bin of=v2/master.bin bs=1M seek=2 conv=notrunc status=none && "
                   "$VF gen -k adam-v -s 4M --seed 8 -o a.bin && "
                   "dd if=a.bin of=v2/optimizer.bin bs=1M seek=1 conv=notrunc status=none"),
                0);
  }
  nlohmann::json PackJson(const std::string& flags, const std::string& out) {
    CommandResult r = Sh(dir_.path(), "$VF pack --json " + flags +
                                          " v2/weights.bin v2/optimizer.bin v2/master.bin -o " + out + " 2>/dev/null");
    EXPECT_CODE(r, 0);
    return nlohmann::json::parse(r.output, nullptr, false);
  }
  uint64_t Size(const std::string& name) { return fs::file_size(dir_.File(name)); }

  TempDir dir_;
};

//! Against its base: the unchanged 13 MiB are references, the changed 5 MiB
//! new (random bytes and a rewrite do not pay as deltas); the summary line
//! and --json say so, and the stream is a small fraction of a full one.
TEST_F(IncrementalPack, StoresOnlyWhatChangedAndReportsIt) {
  nlohmann::json j = PackJson("--base base.vfs", "inc.vfs");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["raw_bytes"], 18u << 20);
  EXPECT_EQ(j["base_ref_bytes"], 13u << 20);
  EXPECT_EQ(j["new_bytes"].get<uint64_t>() + j["base_delta_bytes"].get<uint64_t>(), 5u << 20);
  EXPECT_EQ(j["base_id"].get<std::string>().size(), 64u);
  EXPECT_LT(Size("inc.vfs") * 2, Size("base.vfs"));

  CommandResult r =
      Sh(dir_.path(), "$VF pack --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin -o inc2.vfs");
  ASSERT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "against base " + j["base_id"].get<std::string>().substr(0, 16) + ": ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "13.00 MiB referenced")) << r.output;
  // The same inputs and base: the same stream.
  EXPECT_EQ(ReadFileBytes(dir_.File("inc.vfs")), ReadFileBytes(dir_.File("inc2.vfs")));
}

//! Zero runs and dedup references are neither taken from the base nor new:
//! pack's summary line names them apart, and its --json `new_bytes` is
//! inspect's, the raw bytes the stream holds as DATA frames. (Pack counted
//! them as new: 3 MiB more than inspect.)
TEST_F(IncrementalPack, ZerosAndDuplicatesAreNotCountedAsNew) {
  ASSERT_CODE(Sh(dir_.path(),
                 "head -c 2M /dev/zero > v2/zeros.bin && $VF gen -k random -s 1M --seed 11 -o r1.bin && "
                 "cat r1.bin r1.bin > v2/twice.bin"),
              0);
  CommandResult r = Sh(dir_.path(),
                       "$VF pack --json --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin "
                       "v2/zeros.bin v2/twice.bin -o inc.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json pack = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(pack.is_object()) << r.output;
  EXPECT_EQ(pack["zero_bytes"], 2u << 20);
  EXPECT_EQ(pack["dedup_bytes"], 1u << 20);
  const uint64_t accounted = pack["new_bytes"].get<uint64_t>() + pack["base_ref_bytes"].get<uint64_t>() +
                             pack["base_delta_bytes"].get<uint64_t>() + pack["zero_bytes"].get<uint64_t>() +
                             pack["dedup_bytes"].get<uint64_t>();
  EXPECT_EQ(accounted, pack["raw_bytes"].get<uint64_t>());

  r = Sh(dir_.path(), "$VF inspect --json inc.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json inspect = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(inspect.is_object()) << r.output;
  EXPECT_EQ(inspect["new_bytes"], pack["new_bytes"]) << r.output;
  EXPECT_EQ(inspect["base_ref_bytes"], pack["base_ref_bytes"]);
  EXPECT_EQ(inspect["base_delta_bytes"], pack["base_delta_bytes"]);

  r = Sh(dir_.path(),
         "$VF pack --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin v2/zeros.bin "
         "v2/twice.bin -o inc2.vfs");
  ASSERT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "delta-coded, 2.00 MiB zeros, 1.00 MiB deduplicated\n")) << r.output;
}

//! References-only finds the same references from the base's digests; a
//! base without digests is refused for it, before any output exists.
TEST_F(IncrementalPack, ReferencesOnlyNeedsDigestsInTheBase) {
  nlohmann::json full = PackJson("--base base.vfs", "full-mode.vfs");
  nlohmann::json refs = PackJson("--base base.vfs --base-refs-only", "refs.vfs");
  ASSERT_TRUE(full.is_object() && refs.is_object());
  EXPECT_EQ(refs["base_ref_bytes"], full["base_ref_bytes"]);
  EXPECT_EQ(refs["base_delta_bytes"], 0u);

  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q v1/weights.bin v1/optimizer.bin v1/master.bin -o plain.vfs"), 0);
  CommandResult r = Sh(dir_.path(), "$VF pack --base plain.vfs --base-refs-only v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "no chunk digests")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));
  // Full mode needs no digests.
  EXPECT_CODE(Sh(dir_.path(), "$VF pack -q --base plain.vfs v2/weights.bin -o out.vfs"), 0);
}

//! A base without an index (written through a pipe) cannot be matched
//! against: a clear error naming it, status 1, no output. So is a missing
//! base. --base-refs-only without --base is refused up front.
TEST_F(IncrementalPack, BasesThatCannotServeAreClearErrors) {
  ASSERT_CODE(Sh(dir_.path(), "$VF pack -q v1/weights.bin -o - > piped.vfs"), 0);
  CommandResult r = Sh(dir_.path(), "$VF pack --base piped.vfs v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 1);
  EXPECT_TRUE(Contains(r.output, "piped.vfs")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));

  r = Sh(dir_.path(), "$VF pack --base missing.vfs v2/weights.bin -o out.vfs");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "missing.vfs")) << r.output;
  EXPECT_FALSE(fs::exists(dir_.File("out.vfs")));

  r = Sh(dir_.path(), "$VF pack --base-refs-only v2/weights.bin -o out.vfs");
  EXPECT_CODE(r, 2);
  EXPECT_TRUE(Contains(r.output, "--base-refs-only needs --base")) << r.output;
}

//! Inputs read in order (stdin, a named pipe) are matched to the base by
//! name, chunk by chunk, as files are: the same references and deltas as a
//! pack of the files, a stream that unpacks exactly with its base and
//! passes verify, and --base-refs-only too. (Pack refused --base for them.)
TEST_F(IncrementalPack, InputsReadInOrderUseTheBaseToo) {
  nlohmann::json files = PackJson("--base base.vfs", "files.vfs");
  ASSERT_TRUE(files.is_object());
  CommandResult r = Sh(dir_.path(),
                       "mkfifo opt.fifo && (cat v2/optimizer.bin > opt.fifo &) && "
                       "cat v2/weights.bin | $VF pack --json --base base.vfs --name weights.bin - "
                       "opt.fifo v2/master.bin -o piped.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json piped = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(piped.is_object()) << r.output;
  EXPECT_TRUE(piped["sequential"].get<bool>());
  // The files' references: all 8 MiB of the weights, 2 of the optimizer's
  // 6, 3 of the master's 4. opt.fifo is no name of the base's: its 6 MiB
  // are new; the others match as the files do.
  EXPECT_EQ(files["base_ref_bytes"], 13u << 20);
  EXPECT_EQ(piped["base_ref_bytes"], 11u << 20) << r.output;
  EXPECT_GE(piped["new_bytes"].get<uint64_t>(), 6u << 20) << r.output;
  EXPECT_EQ(piped["raw_bytes"], 18u << 20);

  ASSERT_CODE(Sh(dir_.path(),
                 "$VF verify -q piped.vfs && $VF unpack -q piped.vfs -o back/ && "
                 "cmp back/weights.bin v2/weights.bin && cmp back/opt.fifo v2/optimizer.bin && "
                 "cmp back/master.bin v2/master.bin"),
              0);

  r = Sh(dir_.path(),
         "cat v2/master.bin | $VF pack --json --base base.vfs --base-refs-only --name master.bin - "
         "-o refs.vfs");
  ASSERT_CODE(r, 0);
  nlohmann::json refs = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_TRUE(refs.is_object()) << r.output;
  EXPECT_EQ(refs["base_ref_bytes"], 3u << 20);  // master's unchanged MiBs; the changed one whole
  EXPECT_EQ(refs["base_delta_bytes"], 0u);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q refs.vfs -o refs/ && cmp refs/master.bin v2/master.bin"), 0);
}

//! pack --base, then unpack: byte-exact, with the base named (--base) or
//! found where the BASE frame says, which pack records relative to the
//! output's directory (so a directory of checkpoints can move as a whole);
//! verify checks it with its base. A refs-only stream and a stream on an
//! incremental base (a chain of two) unpack exactly too.
TEST_F(IncrementalPack, UnpacksExactlyWithItsBase) {
  ASSERT_CODE(Sh(dir_.path(),
                 "mkdir out && $VF pack -q --base base.vfs v2/weights.bin v2/optimizer.bin v2/master.bin "
                 "-o out/inc.vfs"),
              0);
  ASSERT_CODE(Sh(dir_.path(),
                 "$VF unpack -q out/inc.vfs -o found/ && cmp found/master.bin v2/master.bin && "
                 "cmp found/optimizer.bin v2/optimizer.bin && cmp found/weights.bin v2/weights.bin"),
              0);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q --base base.vfs -o named/ out/inc.vfs && diff -r named v2"), 0);
  ASSERT_CODE(Sh(dir_.path(), "$VF verify -q out/inc.vfs"), 0);
  // The directory moves as a whole: the relative location still holds.
  ASSERT_CODE(Sh(dir_.path(),
                 "mkdir moved && cp base.vfs moved/ && mkdir moved/out && cp out/inc.vfs moved/out/ && "
                 "mv base.vfs base.vfs.away && $VF unpack -q moved/out/inc.vfs -o moved-files/ && "
                 "diff -r moved-files v2 && mv base.vfs.away base.vfs"),
              0);

  ASSERT_CODE(Sh(dir_.path(),
                 "$VF pack -q --base base.vfs --base-refs-only v2/weights.bin v2/optimizer.bin "
                 "v2/master.bin -o refs.vfs && $VF unpack -q refs.vfs -o refs/ && diff -r refs v2"),
              0);

  // A third checkpoint on the second: 2 MiB of the weights change.
  ASSERT_CODE(Sh(dir_.path(),
                 "mkdir v3 && cp v2/* v3/ && $VF gen -k bf16 -s 2M --seed 12 -o b.bin && "
                 "dd if=b.bin of=v3/weights.bin bs=1M seek=3 conv=notrunc status=none"),
              0);
  nlohmann::json j = nlohmann::json::parse(
      Sh(dir_.path(),
         "$VF pack --json --base out/inc.vfs v3/weights.bin v3/optimizer.bin v3/master.bin -o third.vfs "
         "2>/dev/null")
          .output,
      nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["base_ref_bytes"], 16u << 20);
  ASSERT_CODE(Sh(dir_.path(), "$VF unpack -q third.vfs -o third/ && diff -r third v3"), 0);
}

// Issue 55: bases that lie, chains of unchanged increments, bases too large
// for the budget, and flatten reading stdin.

// Chunk records of `stream` in INDEX_BLOCK order, each with the stream offset
// of its block, and calls `edit` on every block (records decoded, the
// DIGEST_BLOCK payload after it, if any); rehashes what `edit` changed.
void EditIndexBlocks(std::vector<uint8_t>* stream,
                     const std::function<void(std::vector<SeekIndexChunk>&, std::span<uint8_t> digests)>& edit) {
  for (uint64_t at = kStreamHeaderSize; at + kFrameHeaderSize <= stream->size();) {
    FrameHeader h;
    ASSERT_TRUE(DecodeFrameHeader(stream->data() + at, &h).ok()) << "at " << at;
    if (h.kind == static_cast<uint8_t>(FrameKind::kStreamEnd)) break;
    uint8_t* payload = stream->data() + at + kFrameHeaderSize;
    const uint64_t next = at + kFrameHeaderSize + h.payload_size;
    if (h.kind == static_cast<uint8_t>(FrameKind::kIndexBlock)) {
      Result<std::vector<SeekIndexChunk>> records = DecodeIndexBlock(std::span<const uint8_t>(payload, h.payload_size));
      ASSERT_TRUE(records.ok()) << records.status().ToString();
      FrameHeader dh;
      uint8_t* digests = nullptr;
      const bool digested = DecodeFrameHeader(stream->data() + next, &dh).ok() &&
                            dh.kind == static_cast<uint8_t>(FrameKind::kDigestBlock);
      if (digested) digests = stream->data() + next + kFrameHeaderSize;
      edit(*records, std::span<uint8_t>(digests, digests ? dh.payload_size : 0));
      std::vector<uint8_t> encoded = EncodeIndexBlock(*records);
      std::copy(encoded.begin(), encoded.end(), payload);
      h.raw_hash = Hash64(payload, h.payload_size);
      EncodeFrameHeader(h, stream->data() + at);
      if (digests) {
        dh.raw_hash = Hash64(digests, dh.payload_size);
        EncodeFrameHeader(dh, stream->data() + next);
      }
    }
    at = next;
  }
}

//! Defect 7: a file packed unchanged on c1, then on c2, then on c3: each
//! increment is a stream of its own with an id of its own, so a fourth on
//! c3 is no loop (it failed "the chain of bases loops": c2 and c3 had the
//! same id), and it unpacks exactly.
TEST(IncrementalPackIssue55, UnchangedIncrementsHaveIdsOfTheirOwn) {
  TempDir dir;
  ASSERT_CODE(Sh(dir.path(),
                 "$VF gen -k random -s 256K -o f.bin && $VF pack -q --chunk-size 64K f.bin -o c1.vfs && "
                 "$VF pack -q --chunk-size 64K --base c1.vfs f.bin -o c2.vfs && "
                 "$VF pack -q --chunk-size 64K --base c2.vfs f.bin -o c3.vfs"),
              0);
  CommandResult r = Sh(dir.path(), "$VF pack -q --chunk-size 64K --base c3.vfs f.bin -o c4.vfs");
  ASSERT_CODE(r, 0);
  std::set<std::string> ids;
  for (const char* name : {"c1.vfs", "c2.vfs", "c3.vfs", "c4.vfs"}) {
    r = Sh(dir.path(), std::string("$VF inspect --json ") + name);
    ASSERT_CODE(r, 0);
    nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("stream_id")) << r.output;
    ids.insert(j["stream_id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_CODE(Sh(dir.path(), "$VF unpack -q c4.vfs -o back/ && cmp back/f.bin f.bin"), 0);
}

//! Defect 8: a base whose DIGEST_BLOCK gives a changed chunk's SHA-256 for
//! its own chunk, or whose index lists two chunk frames each at the other's
//! place, is found out before pack says it is done: status 3 naming the
//! base and the chunk, no output (pack wrote a stream that no unpack could
//! restore), in full and references-only mode, for files and stdin.
TEST(IncrementalPackIssue55, ABaseWhoseDigestsOrIndexLieFailsThePack) {
  TempDir dir;
  // v2/f.bin: f.bin with its last 64 KiB chunk changed.
  ASSERT_CODE(Sh(dir.path(),
                 "$VF gen -k random -s 256K -o f.bin && mkdir v2 && cp f.bin v2/f.bin && "
                 "$VF gen -k random -s 64K --seed 7 -o new.bin && "
                 "dd if=new.bin of=v2/f.bin bs=64K seek=3 conv=notrunc status=none && "
                 "$VF pack -q --digests --chunk-size 64K f.bin -o base.vfs"),
              0);
  const std::vector<uint8_t> base = ReadFileBytes(dir.File("base.vfs"));
  const std::vector<uint8_t> changed = ReadFileBytes(dir.File("new.bin"));
  const Sha256Digest lie = Sha256(changed);
  std::vector<uint8_t> digests_lie = base;
  int edited = 0;
  EditIndexBlocks(&digests_lie, [&](std::vector<SeekIndexChunk>& records, std::span<uint8_t> digests) {
    for (size_t i = 0; i < records.size(); ++i)
      if (records[i].object_offset == 3 * (64u << 10) && digests.size() == 32 * records.size()) {
        std::copy(lie.begin(), lie.end(), digests.begin() + 32 * i);
        ++edited;
      }
  });
  ASSERT_EQ(edited, 1);
  WriteFileBytes(dir.File("digests-lie.vfs"), digests_lie);
  std::vector<uint8_t> index_lie = base;
  EditIndexBlocks(&index_lie, [&](std::vector<SeekIndexChunk>& records, std::span<uint8_t>) {
    if (records.size() < 2) return;
    std::swap(records[0].stream_offset, records[1].stream_offset);
    std::swap(records[0].payload_size, records[1].payload_size);  // the digests stay: each its own chunk's
    ++edited;
  });
  ASSERT_EQ(edited, 2);
  WriteFileBytes(dir.File("index-lie.vfs"), index_lie);
  for (const char* flags : {"--base digests-lie.vfs", "--base digests-lie.vfs --base-refs-only", "--base index-lie.vfs",
                            "--base index-lie.vfs --base-refs-only"}) {
    SCOPED_TRACE(flags);
    for (const char* input : {"v2/f.bin", "- --name f.bin < v2/f.bin"}) {
      SCOPED_TRACE(input);
      CommandResult r = Sh(dir.path(), std::string("rm -rf out.vfs back && $VF pack -q --chunk-size 64K ") + flags +
                                           " " + input + " -o out.vfs");
      if (r.code == 0) {  // what was reported done restores
        EXPECT_CODE(Sh(dir.path(), "$VF unpack -q out.vfs -o back/ && cmp back/f.bin v2/f.bin"), 0);
        ADD_FAILURE() << "pack over a lying base reported success";
        continue;
      }
      EXPECT_CODE(r, 3);  // the base is corrupt
      EXPECT_TRUE(Contains(r.output, "-lie.vfs, object 1 'f.bin', offset ")) << r.output;
      EXPECT_FALSE(fs::exists(dir.File("out.vfs")));
    }
  }
}

// Peak resident memory (KiB) of a shell line's commands, as the children of
// a child, and the line's status.
uint64_t PeakKib(const std::string& dir, const std::string& line, int* code) {
  CommandResult r = Sh(dir,
                       "python3 -c 'import resource,subprocess,sys; c=subprocess.call(sys.argv[1], shell=True, "
                       "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(c)' " +
                           Q(line));
  *code = r.code;
  return std::stoull(r.output);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssIsMeaningful = false;  // shadow memory and quarantine
#else
constexpr bool kRssIsMeaningful = true;
#endif

//! Defect 10: a base of 400K one-byte chunks (32 MB of index records and
//! digests, a 51 MB file) is refused at -m 32M from its counts, before its
//! records are read, by pack and by the readers of a stream built on it
//! (unpack, verify, flatten): a clear error and a peak far below the index
//! (it was read whole under a fixed 256 MiB cap, and refused only then:
//! 100 MiB peak for 600K records, 177 MiB for 1.2 M).
// Writes to `path` a stream of one object "f.bin" of `chunks` one-byte
// chunks (each one frame, its index record and its digest).
void WriteBaseOfOneByteChunks(const std::string& path, uint64_t chunks) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = 1;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(true);
  ASSERT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"f.bin", {}}, chunks);
  ASSERT_TRUE(id.ok());
  const uint8_t byte = 7;
  EncodedChunk data;  // one byte, stored raw (zero runs would merge into one frame)
  data.payload = std::span<const uint8_t>(&byte, 1);
  data.raw_hash = Hash64(&byte, 1);
  const Sha256Digest sha256 = Sha256(data.payload);
  for (uint64_t i = 0; i < chunks; ++i) ASSERT_TRUE(writer.AddChunk(*id, i, 1, data, &sha256).ok());
  ASSERT_TRUE(writer.EndObject(*id).ok());
  ASSERT_TRUE(writer.Finish().ok());
  WriteFileBytes(path, sink.bytes());
}

TEST(IncrementalPackIssue55, ABaseIndexLargerThanTheBudgetIsRefusedBeforeItIsRead) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteBaseOfOneByteChunks(dir.File("big.vfs"), 400000));
  // A stream built on it where the budget allows, for the readers.
  ASSERT_CODE(Sh(dir.path(), "head -c 4096 /dev/urandom > f.bin && $VF pack -q -m 1G --base big.vfs f.bin -o inc.vfs"),
              0);
  const std::string vf = Q(VramflowBinary());
  for (const std::string& command :
       {vf + " pack -m 32M --base big.vfs f.bin -o out.vfs", vf + " unpack -m 32M inc.vfs -o out/",
        vf + " verify -m 32M inc.vfs", vf + " flatten -m 32M inc.vfs -o out.vfs"}) {
    SCOPED_TRACE(command);
    CommandResult r = Sh(dir.path(), command);
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "big.vfs")) << r.output;
    EXPECT_TRUE(Contains(r.output, "--max-memory")) << r.output;
    EXPECT_FALSE(fs::exists(dir.File("out.vfs")) || fs::exists(dir.File("out")));
    int code = 0;
    const uint64_t kib = PeakKib(dir.path(), command, &code);
    EXPECT_EQ(code, r.code);
    if (kRssIsMeaningful) {
      EXPECT_LT(kib, 40u * 1024) << "peak RSS at -m 32M";
    }
    const std::string name = command.substr(vf.size() + 1, command.find(' ', vf.size() + 1) - vf.size() - 1);
    std::printf("%s -m 32M over a base of 400K chunk records: peak %llu KiB\n", name.c_str(),
                static_cast<unsigned long long>(kib));
  }
}

//! Defect 10, the other commands that open a base: each holds the chain's
//! indexes within its own -m, counted before they are read (they kept the
//! fixed 256 MiB cap): streamer extract and capture with --base refuse the
//! base of 400K records, naming it and --max-memory; a receiver whose
//! --base-store holds it does not offer it (its scan counts the index first)
//! and refuses the stream built on it, saying why in its own log. Before,
//! each read the index whole and refused it only then, by a budget line
//! naming neither the base nor --max-memory: peaks of 55, 54 and 55 MiB.
TEST(IncrementalPackIssue55, StreamerAndReceiversHoldABaseIndexWithinTheirBudget) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteBaseOfOneByteChunks(dir.File("big.vfs"), 400000));
  ASSERT_CODE(Sh(dir.path(),
                 "head -c 4096 /dev/urandom > f.bin && $VF pack -q -m 1G --base big.vfs f.bin -o inc.vfs "
                 "&& mkdir img cap store && cp big.vfs store/"),
              0);
  const std::string vf = "timeout 60 " + Q(VramflowBinary());
  // recv in the background, the sender once its socket is there; the line's
  // status is the receiver's.
  const std::string recv = vf + " recv -m 32M --accept-timeout 30 --listen unix:sock -o stored.vfs " +
                           "--base-store store & for i in $(seq 400); do [ -S sock ] && break; sleep 0.05; done; " +
                           vf + " send -q inc.vfs unix:sock; wait $!";
  struct Case {
    std::string what, line, says;
  };
  for (const Case& c : {Case{"extract", vf + " streamer -D img -i inc.vfs --base big.vfs -m 32M extract", "big.vfs"},
                        Case{"capture", vf + " streamer -D cap -o cap.vfs --base big.vfs -m 32M capture", "big.vfs"},
                        Case{"recv", recv, "big.vfs' is not a base"}}) {
    SCOPED_TRACE(c.what);
    CommandResult r = Sh(dir.path(), "rm -f sock; " + c.line);
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.code, 124) << r.output;  // refused at once, not waiting
    EXPECT_TRUE(Contains(r.output, c.says)) << r.output;
    EXPECT_TRUE(Contains(r.output, "--max-memory")) << r.output;
    EXPECT_FALSE(fs::exists(dir.File("cap.vfs")) || fs::exists(dir.File("stored.vfs")));
    EXPECT_TRUE(fs::is_empty(dir.File("img")));
    int code = 0;
    const uint64_t kib = PeakKib(dir.path(), "rm -f sock; " + c.line, &code);
    EXPECT_EQ(code, r.code);
    if (kRssIsMeaningful) {
      EXPECT_LT(kib, 40u * 1024) << "peak RSS at -m 32M";
    }
    std::printf("%s -m 32M with a base of 400K chunk records: peak %llu KiB\n", c.what.c_str(),
                static_cast<unsigned long long>(kib));
  }
}

// The BASE frame of the stream at `path` (what a receiver's open_base gets).
BaseDescriptor BaseFrameOf(const std::string& path) {
  Result<std::unique_ptr<RandomAccessSource>> file = OpenFileRandomAccess(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return {};
  Result<BaseDescriptor> frame = ReadBaseFrame(**file, path);
  EXPECT_TRUE(frame.ok()) << frame.status().ToString();
  return frame.ok() ? *frame : BaseDescriptor{};
}

//! Defect 10, a receiver's base store: of the store, only the offered
//! base's chain is read, within the receiver's budget. Beside the chain
//! ck2 -> ck1, the store holds a stream of 100K chunk records (11 MB of
//! index): ck2 opens at a 4 MiB budget (every other stream of the store was
//! read first, as a candidate link, and counted against it: "would take
//! ..."), and the big stream, offered, is refused at that budget unread,
//! its sender told nothing of the store, the receiver's log why.
TEST(IncrementalPackIssue55, AStoreOpensOnlyTheOfferedBasesChainWithinTheBudget) {
  TempDir dir;
  fs::create_directories(dir.File("store"));
  ASSERT_NO_FATAL_FAILURE(WriteBaseOfOneByteChunks(dir.File("store/big.vfs"), 100000));
  ASSERT_CODE(Sh(dir.path(),
                 "head -c 300000 /dev/urandom > a.bin && $VF pack -q a.bin -o store/ck1.vfs && "
                 "head -c 1000 /dev/urandom > b.bin && $VF pack -q b.bin --base store/ck1.vfs -o "
                 "store/ck2.vfs && $VF pack -q a.bin --base store/ck2.vfs -o on-ck2.vfs && "
                 "$VF pack -q -m 1G b.bin --base store/big.vfs -o on-big.vfs"),
              0);
  Result<BaseStore> scanned = ScanBaseStore(dir.File("store"), TransportOptions{});
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  ASSERT_EQ(scanned->streams.size(), 3u);
  auto store = std::make_shared<const BaseStore>(std::move(*scanned));
  std::string logged;
  const OpenBaseFn open = StoreBaseOpener(
      store, store->Offer(false), TransportOptions{}, [&logged](const std::string& line) { logged += line + "\n"; },
      4 << 20);
  const BaseDescriptor on_ck2 = BaseFrameOf(dir.File("on-ck2.vfs"));
  Result<std::shared_ptr<const BaseStream>> ck2 = open(on_ck2);
  ASSERT_TRUE(ck2.ok()) << ck2.status().ToString() << "\n" << logged;
  EXPECT_EQ((*ck2)->id(), on_ck2.base_id);
  EXPECT_EQ((*ck2)->DescriptorForDependent().chain_length, 2u);

  Result<std::shared_ptr<const BaseStream>> big = open(BaseFrameOf(dir.File("on-big.vfs")));
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(Contains(big.status().message(), "cannot open it")) << big.status().ToString();
  EXPECT_FALSE(Contains(big.status().message(), "big.vfs")) << big.status().ToString();
  EXPECT_TRUE(Contains(logged, "big.vfs")) << logged;
  EXPECT_TRUE(Contains(logged, "more than the 4.00 MiB")) << logged;
}

//! Defect 10, a sender choosing among its bases (pack to a receiver with
//! --base-store): it reads only the chosen base's chain, within its -m. Its
//! store holds the receiver's ck1 and a stream of 400K chunk records; at
//! -m 32M the big one is skipped unread and ck1 chosen, at a 16 MiB peak
//! (before: 57 MiB, every candidate's index read and held under the fixed
//! caps).
TEST(IncrementalPackIssue55, ASenderChoosingItsBaseReadsOnlyTheChosenChainWithinItsBudget) {
  TempDir dir;
  fs::create_directories(dir.File("mine"));
  ASSERT_NO_FATAL_FAILURE(WriteBaseOfOneByteChunks(dir.File("mine/big.vfs"), 400000));
  ASSERT_CODE(Sh(dir.path(),
                 "head -c 300000 /dev/urandom > a.bin && $VF pack -q a.bin -o mine/ck1.vfs && "
                 "mkdir theirs && cp mine/ck1.vfs theirs/ && touch mine/big.vfs"),
              0);
  const std::string vf = "timeout 60 " + Q(VramflowBinary());
  const std::string line = vf + " recv -q --accept-timeout 30 --listen unix:sock -o got.vfs --base-store theirs & " +
                           "for i in $(seq 400); do [ -S sock ] && break; sleep 0.05; done; " + vf +
                           " pack -m 32M a.bin -o unix:sock --base-store mine && wait $!";
  CommandResult r = Sh(dir.path(), line);
  ASSERT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "the receiver holds mine/ck1.vfs")) << r.output;
  EXPECT_CODE(Sh(dir.path(), "$VF unpack -q got.vfs --base mine/ck1.vfs -o back/ && cmp back/a.bin a.bin"), 0);
  int code = 0;
  const uint64_t kib = PeakKib(dir.path(), "rm -f sock got.vfs; " + line, &code);
  EXPECT_EQ(code, 0);
  if (kRssIsMeaningful) {
    EXPECT_LT(kib, 40u * 1024) << "peak RSS at -m 32M";
  }
  std::printf("pack -m 32M to a receiver, choosing among ck1 and a stream of 400K records: peak %llu KiB\n",
              static_cast<unsigned long long>(kib));
}

//! Defect 15: flatten reads an incremental stream with dedup references
//! from stdin (it failed: "would need a dedup window of 1048580 DATA
//! frames"), within -m, to a stream that verifies and unpacks exactly.
TEST(IncrementalPackIssue55, FlattenReadsAnIncrementalStreamFromStdin) {
  TempDir dir;
  // v2/f.bin: the first half of f.bin (base references), then a new chunk
  // twice (a DATA frame and a DEDUP_REF).
  ASSERT_CODE(Sh(dir.path(),
                 "$VF gen -k random -s 256K -o f.bin && $VF gen -k random -s 64K --seed 5 -o n.bin && "
                 "mkdir v2 && head -c 128K f.bin > v2/f.bin && cat n.bin n.bin >> v2/f.bin && "
                 "$VF pack -q --chunk-size 64K f.bin -o c1.vfs && "
                 "$VF pack -q --chunk-size 64K --base c1.vfs v2/f.bin -o c2.vfs && "
                 "$VF pack -q --chunk-size 64K --base c1.vfs v2/f.bin -o - > piped.vfs && "
                 "$VF inspect --full c2.vfs | grep -q 'dedup-ref'"),
              0);
  for (const char* input : {"c2.vfs", "piped.vfs"}) {
    SCOPED_TRACE(input);
    const std::string flatten = "rm -rf flat.vfs back && $VF flatten -m 32M - -o flat.vfs --base c1.vfs < ";
    CommandResult r = Sh(dir.path(), flatten + input);
    ASSERT_CODE(r, 0);
    EXPECT_CODE(Sh(dir.path(), "$VF verify -q flat.vfs && $VF unpack -q flat.vfs -o back/ && cmp back/f.bin v2/f.bin"),
                0);
  }
}

}  // namespace
}  // namespace vramflow
