// SPDX-License-Identifier: MIT
// The simulated KFD service's wire protocol (sim/kfd/sim_kfd_service.h), shared
// by its server and client and by nothing else.
//
// One UNIX stream connection per client process; the client sends a request
// and waits for its reply, one at a time. All integers little-endian.
//
//   request  op u32 | num_fds u32 | body_len u32 | body
//   reply    code u32 (Status::Code) | num_fds u32 | message_len u32 |
//            body_len u32 | message | body
//
// Fds travel with SCM_RIGHTS: the first min(num_fds, kMaxFdsPerMessage)
// with the header's bytes, each further batch of up to kMaxFdsPerMessage
// with a 4-byte batch header (its fd count, u32) after the body. A request
// carries at most one batch (KFD file, render nodes); a reply any number
// (a dma-buf per BO). Bodies per op are in sim_kfd_wire.cc.
//
// A peer that breaks the framing (unknown op, sizes over the limits, fds
// that do not match num_fds) is not answered; its connection is dropped.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/kfd/kfd_ops.h"
#include "transport/net/fd_passing.h"

namespace vramflow::sim_wire {

enum class Op : uint32_t {  // DO NOT CHANGE THESE VALUES: both ends must agree
  kGetVersion = 1,
  kProcessInfo = 2,
  kCheckpoint = 3,
  kUnpause = 4,
  kRestore = 5,
  kResume = 6,
  kOpenKfd = 7,
  kOpenRenderNode = 8,
  kClassify = 9,
  kListDrmBos = 10,
};
inline constexpr uint32_t kLastOp = 10;
const char* OpName(Op op);

inline constexpr size_t kRequestHeaderBytes = 4 + 4 + 4;    // op, num_fds, body_len
inline constexpr size_t kReplyHeaderBytes = 4 + 4 + 4 + 4;  // code, num_fds, message_len, body_len
inline constexpr size_t kBatchHeaderBytes = 4;              // fds in the batch
// Limits, so that a garbage header cannot make the other side allocate
// gigabytes or wait for fds that never come. A Restore of 100k BOs is ~10 MiB.
inline constexpr uint32_t kMaxRequestBody = 64u << 20;
inline constexpr uint32_t kMaxReplyBody = 64u << 20;
inline constexpr uint32_t kMaxReplyMessage = 64u << 10;
inline constexpr uint32_t kMaxRequestFds = kMaxFdsPerMessage;
inline constexpr uint32_t kMaxReplyFds = 1u << 20;

struct Request {
  Op op = Op::kGetVersion;
  std::vector<uint8_t> body;
  std::vector<UniqueFd> fds;
};

struct Reply {
  Status status;  // the server's, code and message
  std::vector<uint8_t> body;
  std::vector<UniqueFd> fds;
};

// Whole messages with their fds; each waits at most `timeout` for progress.
Status SendRequest(int socket, Op op, std::span<const uint8_t> body, std::span<const int> fds,
                   std::chrono::milliseconds timeout);
Result<Request> RecvRequest(int socket, std::chrono::milliseconds timeout);
Status SendReply(int socket, const Status& status, std::span<const uint8_t> body, std::span<const int> fds,
                 std::chrono::milliseconds timeout);
Result<Reply> RecvReply(int socket, std::chrono::milliseconds timeout);

// Little-endian body building.
class Writer {
 public:
  void U32(uint32_t v);
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void U64(uint64_t v);
  void Bytes(std::span<const uint8_t> bytes);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Little-endian body parsing. Reading past the end yields zeros and marks
// the reader failed; callers check ok() (or Done()) once at the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint32_t U32();
  int32_t I32() { return static_cast<int32_t>(U32()); }
  uint64_t U64();
  std::vector<uint8_t> Bytes(uint64_t n);
  bool ok() const { return ok_; }
  // OK when every byte was read and nothing past the end; else Corruption.
  Status Done(const std::string& what) const;

 private:
  bool Take(uint64_t n);
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
  bool ok_ = true;
};

// KfdCheckpoint bodies (Checkpoint's reply, Restore's request). The fd
// fields (devices' drm_fd, BOs' dmabuf_fd) carry indexes into the message's
// fds, or kKfdNoFd; the caller maps them.
//   num_objects u32 | num_devices u32 | num_bos u32 | priv_len u32 |
//   devices: user_gpu_id u32, actual_gpu_id u32, drm_fd i32 |
//   bos: addr u64, size u64, offset u64, restored_offset u64, gpu_id u32,
//        alloc_flags u32, dmabuf_fd i32 | priv_data
void PutCheckpoint(const KfdCheckpoint& state, Writer* out);
Result<KfdCheckpoint> GetCheckpoint(Reader* in);

//   num_devices u32 | num_bos u32 | num_objects u32 | priv_data_size u64
void PutProcessInfo(const KfdProcessInfo& info, Writer* out);
KfdProcessInfo GetProcessInfo(Reader* in);

// A Status from a code and message as received (an unknown code: kCorruption).
Status StatusFromWire(uint32_t code, std::string message);

}  // namespace vramflow::sim_wire
