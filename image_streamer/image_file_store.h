// SPDX-License-Identifier: MIT
// ImageFileStore: the image files of `vramflow streamer serve` and
// `extract` between the stream and whoever takes them (CRIU, an ext-file fd,
// the images directory).
//
// One reader thread fills it from a verified stream: Begin, Write /
// WriteZeros / Copy (a dedup reference), End once the object's OBJECT_END is
// proven, and Finish with the stream's outcome. Other threads Take files by
// name: Take waits until the answer is certain, so nothing unverified is ever
// handed out. A file is given out once; a second Take of it is an error (as
// criu-image-streamer's "requested multiple times").
//
// Memory: file bytes are held in buffers charged to the budget (which the
// reader's own buffers share). When a new buffer would pass the budget, the
// file holding the most memory that nobody has taken yet is spilled: its
// bytes are written to its own file in `spill_dir` and only its segment list
// stays in memory; what it receives later goes to that file directly. When
// nothing is left to spill (the files being pushed hold the memory), new
// bytes go to their file's spill file. So the image is never held whole in
// memory. With `spill_all` (extract) every file
// goes to its spill file from its first byte, which becomes the file itself.
// The bookkeeping is charged too: each file, each of its byte ranges (a
// range that touches another of the same kind joins it; a zero run of a
// spilled file is a hole in its spill file) and the file list. A stream of
// more separate ranges or names than the budget holds fails, naming
// --max-memory, instead of growing past it.
//
// A stream read from a regular file (SetStreamFile, serve -i FILE): DATA
// bytes are not copied at all. The reader decodes and checks each DATA frame
// as always, and the store keeps only where its payload lies in the file
// (WriteFrame); the taker reads the payload again and decodes it as it
// writes the file out, checking the decoded bytes against the frame's hash
// once more (a file changed since it was verified fails the push). So a
// stream far larger than the budget is served without spilling, and memory
// holds the decoders of the files being pushed, not their bytes.
//
// The file list: an object with metadata attribute kStreamerAttribute =
// kStreamerFileListValue lists every image file of the dump (names, each
// followed by a NUL). It is kept out of the files; once it has arrived, Take
// answers "absent" at once for names it does not hold.
//
// Thread safety: every method may be called from any thread; one reader.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "image_streamer/file_list.h"
#include "streamer/machine/memory_budget.h"

namespace vramflow {

// Rewrites one image file once it has arrived, before it can be taken
// (serve's --tcp-listen-remap rewrites files.img): the file's bytes in, the
// bytes to hand over out, or an error that fails the stream.
using ImageFileRewrite = std::function<Result<std::vector<uint8_t>>(std::vector<uint8_t> bytes)>;
// The largest file a rewrite is given (it is read whole into memory).
inline constexpr uint64_t kMaxRewrittenFile = 64ull << 20;

// Where a verified DATA frame's payload lies in the stream file, and how
// to decode it (the frame header's fields).
struct StoredFrame {
  uint64_t payload_offset = 0;  // from the start of the stream
  uint32_t payload_size = 0;
  uint8_t codec = 0;
  uint8_t transform = 0;
  uint64_t raw_hash = 0;  // XXH3-64 of the decoded bytes
};

class ImageFileStore {
 public:
  struct File;  // one image file; opaque to users

  // `spill_dir` exists, is private to this store and outlives it.
  // `unlisted` (the ext files) may be in the stream without being in its
  // file list; any other file must be in it.
  ImageFileStore(MemoryBudget* budget, std::string spill_dir, bool spill_all, std::set<std::string> unlisted = {});
  ~ImageFileStore();
  ImageFileStore(const ImageFileStore&) = delete;
  ImageFileStore& operator=(const ImageFileStore&) = delete;

  Status Open();  // opens spill_dir
  // Before the stream is read: file `name` is rewritten at its end.
  void SetRewrite(const std::string& name, ImageFileRewrite rewrite);

  // Before the stream is read: it is read from `fd`, a regular file that
  // only its owner (this user or root) may write, in which the stream
  // starts at `stream_start`. DATA given to WriteFrame is then read again
  // from there when its file is written out, instead of being held (not
  // with `spill_all`, whose files are written out whole).
  void SetStreamFile(UniqueFd fd, uint64_t stream_start);

  // ---- the reader (one thread) ----
  // What the reader's own buffers may still need of the budget (its payload
  // and decode buffers for a frame of the stream's chunk size): files leave
  // it free.
  void SetReaderReserve(uint64_t bytes);
  // A new object; `file_list` marks the stream's list of files.
  Status Begin(uint32_t id, const std::string& name, bool file_list);
  // Bytes of object `id` at `offset` (verified DATA).
  Status Write(uint32_t id, uint64_t offset, std::span<const uint8_t> data);
  // Verified DATA of object `id` at `offset`: `data`, decoded from `frame`.
  // With a stream file, only where the frame lies is kept (the file list
  // and a file to rewrite keep their bytes); else as Write.
  Status WriteFrame(uint32_t id, uint64_t offset, const StoredFrame& frame, std::span<const uint8_t> data);
  Status WriteZeros(uint32_t id, uint64_t offset, uint64_t size);
  // A dedup reference: `size` bytes of object `source` at `source_offset`,
  // checked against `raw_hash` (XXH3-64) once copied. Fails when `source`
  // was already handed over and released.
  Status Copy(uint32_t id, uint64_t offset, uint32_t source, uint64_t source_offset, uint64_t size, uint64_t raw_hash);
  // The object's OBJECT_END was verified: the file is complete.
  Status End(uint32_t id, uint64_t size);
  // The stream ended: OK at its verified end, else its error. Wakes every Take.
  void Finish(const Status& outcome);

  // ---- takers ----
  // Waits until `name` can be answered: the file (now the caller's to
  // WriteTo and Release), or null when the stream does not hold it (the file
  // list does not name it, or the stream ended without it). Errors: the
  // stream failed, or the file was taken before.
  Result<std::shared_ptr<File>> Take(const std::string& name);
  // Writes the whole file into `fd` (a pipe or a file), `what` naming it.
  // Frames kept in the stream file are read and decoded here, on the
  // caller's thread, with buffers Take charged to the budget.
  Status WriteTo(const File& file, int fd, const std::string& what) const;
  // Frees the file's memory and spill file.
  void Release(const std::shared_ptr<File>& file);

  // ---- extract (spill_all), after Finish(OK) ----
  // Moves every file nobody took into `dir_fd` under its name (replacing
  // what is there); the caller checked the names. All or nothing: a
  // directory in the way fails it before any file moves, and a move that
  // fails puts back the files moved before it (those they replaced too,
  // where the file system can exchange two names).
  Status MoveInto(int dir_fd, const std::string& shown) const;

  // The file list, once it has arrived (tests, messages).
  bool has_file_list() const;
  uint64_t spilled_bytes() const;

 private:
  struct FileList;
  File* FindLocked(uint32_t id, const std::string& what);
  // Spills until `bytes` more fit in the budget; `fits` false when even
  // spilling every untaken file does not make room.
  Status MakeRoomLocked(uint64_t bytes, bool* fits);
  // Charges `bytes` of bookkeeping (spilling to make room); an error naming
  // --max-memory and `what` when they do not fit.
  Status ChargeLocked(uint64_t bytes, const std::string& what);
  Status SpillLocked(File* file);
  Status OpenSpillFileLocked(File* file);
  // Lengthens a spill file over its holes at the end, before it is read.
  Status CoverSpillLocked(File* file);
  void ClearSegmentsLocked(File* file);
  // A zero run, or (`in_spill`) a range of the spill file: joins a range of
  // the same kind it touches, or is a new (charged) one.
  Status AddRangeLocked(File* file, uint64_t offset, uint64_t size, bool in_spill);
  bool MergeRangeLocked(File* file, uint64_t offset, uint64_t size, bool in_spill);
  // MoveInto's steps: true when the file replaced (was exchanged with) one.
  Result<bool> MoveOneInto(const File& file, int dir_fd, const std::string& shown) const;
  void MoveOneBack(const File& file, int dir_fd, bool exchanged) const;
  Status ReadLocked(const File& file, uint64_t offset, std::span<uint8_t> out);
  // What decoding a file's frames again takes (WriteTo's buffers).
  static uint64_t FrameDecodingBytes(const File& file);
  Status AddFileBytesLocked(File* file, uint64_t offset, std::span<const uint8_t> data);
  Status CheckAgainstListLocked(const std::string& name) const;
  Status TakeFileListLocked(File* file);
  Status RewriteLocked(File* file, const ImageFileRewrite& rewrite);

  MemoryBudget* budget_;
  std::string spill_dir_;
  bool spill_all_;
  std::set<std::string> unlisted_;
  UniqueFd spill_fd_;
  UniqueFd stream_fd_;  // SetStreamFile
  uint64_t stream_start_ = 0;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, ImageFileRewrite> rewrites_;      // guarded by mu_
  std::map<uint32_t, std::shared_ptr<File>> by_id_;       // guarded by mu_
  std::map<std::string, std::shared_ptr<File>> by_name_;  // guarded by mu_; the file list not included
  std::unique_ptr<FileList> file_list_;                   // guarded by mu_
  bool has_file_list_object_ = false;                     // guarded by mu_
  uint64_t files_charged_ = 0;                            // guarded by mu_
  std::optional<Status> outcome_;                         // guarded by mu_
  uint64_t spilled_bytes_ = 0;                            // guarded by mu_
  uint64_t reserve_ = 0;                                  // guarded by mu_
};

}  // namespace vramflow
