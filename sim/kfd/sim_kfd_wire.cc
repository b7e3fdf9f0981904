// SPDX-License-Identifier: MIT
// The simulated KFD service's messages (framing in sim_kfd_wire.h). Bodies
// per op, request -> reply, with the fds each carries:
//
//   GetVersion      -                              -> major u32, minor u32
//   ProcessInfo     [kfd]  pid i32                 -> ProcessInfo
//   Checkpoint      [kfd]  ProcessInfo             -> Checkpoint  [a dma-buf per VRAM/GTT BO]
//   Unpause         [kfd]  -                       -> -
//   Restore         [kfd, drm fds...]  Checkpoint  -> per BO: restored_offset u64, dmabuf_fd i32
//                                                     [a dma-buf per VRAM/GTT BO]
//   Resume          [kfd]  pid i32                 -> -
//   OpenKfd         pid i32                        -> -  [the KFD file]
//   OpenRenderNode  gpu_id u32                     -> -  [the render node]
//   Classify        st_dev u64, st_ino u64         -> GpuFileKind u32 (0 none, 1 KFD, 2 render node),
//                                                     gpu_id u32 (render nodes; else 0)
#include "sim/kfd/sim_kfd_wire.h"

#include <algorithm>

#include "common/endian.h"

namespace vramflow::sim_wire {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kDeviceBytes = 4 + 4 + 4;
constexpr uint64_t kBoBytes = 8 + 8 + 8 + 8 + 4 + 4 + 4;

// Sends `header` with the first batch of fds, then `rest`, then the other
// batches behind their batch headers.
Status SendFramed(int socket, std::span<const uint8_t> header, std::span<const uint8_t> rest, std::span<const int> fds,
                  milliseconds timeout, const std::string& what) {
  size_t first = std::min(fds.size(), kMaxFdsPerMessage);
  VF_RETURN_IF_ERROR(SendWithFds(socket, header, fds.first(first), timeout, what));
  if (!rest.empty()) VF_RETURN_IF_ERROR(SendWithFds(socket, rest, {}, timeout, what));
  for (size_t at = first; at < fds.size(); at += kMaxFdsPerMessage) {
    const size_t count = std::min(fds.size() - at, kMaxFdsPerMessage);
    uint8_t batch[kBatchHeaderBytes];
    StoreLE32(batch, static_cast<uint32_t>(count));
    VF_RETURN_IF_ERROR(SendWithFds(socket, batch, fds.subspan(at, count), timeout, what));
  }
  return Status::Ok();
}

// Receives `rest_len` bytes after a header whose fds are in *fds, then the
// further batches, until `num_fds` fds have come. Any mismatch is Corruption,
// found as soon as it shows (no waiting for batches that cannot come).
Status RecvRest(int socket, size_t rest_len, uint32_t num_fds, std::vector<uint8_t>* rest, std::vector<UniqueFd>* fds,
                milliseconds timeout, const std::string& what) {
  rest->resize(rest_len);
  if (rest_len > 0) VF_RETURN_IF_ERROR(RecvWithFds(socket, *rest, fds, timeout, what));
  const size_t first = std::min<size_t>(num_fds, kMaxFdsPerMessage);
  if (fds->size() != first) {
    return Status::Corruption(what + ": " + std::to_string(fds->size()) + " fds came with the message, " +
                              std::to_string(first) + " expected");
  }
  while (fds->size() < num_fds) {
    const size_t had = fds->size();
    uint8_t batch[kBatchHeaderBytes];
    VF_RETURN_IF_ERROR(RecvWithFds(socket, batch, fds, timeout, what));
    const uint32_t count = LoadLE32(batch);
    if (count == 0 || count > kMaxFdsPerMessage || fds->size() - had != count) {
      return Status::Corruption(what + ": a batch header says " + std::to_string(count) + " fds, " +
                                std::to_string(fds->size() - had) + " came with it");
    }
  }
  if (fds->size() != num_fds) {
    return Status::Corruption(what + ": " + std::to_string(fds->size()) + " fds came, the header says " +
                              std::to_string(num_fds));
  }
  return Status::Ok();
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kGetVersion:
      return "GetVersion";
    case Op::kProcessInfo:
      return "ProcessInfo";
    case Op::kCheckpoint:
      return "Checkpoint";
    case Op::kUnpause:
      return "Unpause";
    case Op::kRestore:
      return "Restore";
    case Op::kResume:
      return "Resume";
    case Op::kOpenKfd:
      return "OpenKfd";
    case Op::kOpenRenderNode:
      return "OpenRenderNode";
    case Op::kClassify:
      return "Classify";
    case Op::kListDrmBos:
      return "ListDrmBos";
  }
  return "unknown op";
}

Status SendRequest(int socket, Op op, std::span<const uint8_t> body, std::span<const int> fds, milliseconds timeout) {
  const std::string what = std::string("sending a simulated KFD ") + OpName(op) + " request";
  if (fds.size() > kMaxRequestFds || body.size() > kMaxRequestBody) {
    return Status::InvalidArgument(what + ": " + std::to_string(fds.size()) + " fds and " +
                                   std::to_string(body.size()) + " bytes exceed the protocol's limits");
  }
  uint8_t header[kRequestHeaderBytes];
  StoreLE32(header, static_cast<uint32_t>(op));
  StoreLE32(header + 4, static_cast<uint32_t>(fds.size()));
  StoreLE32(header + 8, static_cast<uint32_t>(body.size()));
  return SendFramed(socket, header, body, fds, timeout, what);
}

Result<Request> RecvRequest(int socket, milliseconds timeout) {
  const std::string what = "receiving a simulated KFD request";
  Request request;
  uint8_t header[kRequestHeaderBytes];
  VF_RETURN_IF_ERROR(RecvWithFds(socket, header, &request.fds, timeout, what));
  const uint32_t op = LoadLE32(header), num_fds = LoadLE32(header + 4), body_len = LoadLE32(header + 8);
  if (op == 0 || op > kLastOp) return Status::Corruption(what + ": unknown op " + std::to_string(op));
  if (num_fds > kMaxRequestFds || body_len > kMaxRequestBody) {
    return Status::Corruption(what + ": " + std::to_string(num_fds) + " fds and " + std::to_string(body_len) +
                              " bytes exceed the protocol's limits");
  }
  request.op = static_cast<Op>(op);
  VF_RETURN_IF_ERROR(RecvRest(socket, body_len, num_fds, &request.body, &request.fds, timeout, what));
  return request;
}

Status SendReply(int socket, const Status& status, std::span<const uint8_t> body, std::span<const int> fds,
                 milliseconds timeout) {
  const std::string what = "sending a simulated KFD reply";
  std::string message = status.message();
  if (message.size() > kMaxReplyMessage) message.resize(kMaxReplyMessage);
  if (fds.size() > kMaxReplyFds || body.size() > kMaxReplyBody) {
    return Status::Internal(what + ": " + std::to_string(fds.size()) + " fds and " + std::to_string(body.size()) +
                            " bytes exceed the protocol's limits");
  }
  uint8_t header[kReplyHeaderBytes];
  StoreLE32(header, static_cast<uint32_t>(status.code()));
  StoreLE32(header + 4, static_cast<uint32_t>(fds.size()));
  StoreLE32(header + 8, static_cast<uint32_t>(message.size()));
  StoreLE32(header + 12, static_cast<uint32_t>(body.size()));
  std::vector<uint8_t> rest(message.begin(), message.end());
  rest.insert(rest.end(), body.begin(), body.end());
  return SendFramed(socket, header, rest, fds, timeout, what);
}

Result<Reply> RecvReply(int socket, milliseconds timeout) {
  const std::string what = "receiving a simulated KFD reply";
  Reply reply;
  uint8_t header[kReplyHeaderBytes];
  VF_RETURN_IF_ERROR(RecvWithFds(socket, header, &reply.fds, timeout, what));
  const uint32_t code = LoadLE32(header), num_fds = LoadLE32(header + 4), message_len = LoadLE32(header + 8),
                 body_len = LoadLE32(header + 12);
  if (num_fds > kMaxReplyFds || message_len > kMaxReplyMessage || body_len > kMaxReplyBody) {
    return Status::Corruption(what + ": sizes over the protocol's limits");
  }
  std::vector<uint8_t> rest;
  VF_RETURN_IF_ERROR(RecvRest(socket, size_t{message_len} + body_len, num_fds, &rest, &reply.fds, timeout, what));
  reply.status = StatusFromWire(code, std::string(rest.begin(), rest.begin() + message_len));
  reply.body.assign(rest.begin() + message_len, rest.end());
  return reply;
}

void Writer::U32(uint32_t v) {
  uint8_t b[4];
  StoreLE32(b, v);
  bytes_.insert(bytes_.end(), b, b + 4);
}

void Writer::U64(uint64_t v) {
  uint8_t b[8];
  StoreLE64(b, v);
  bytes_.insert(bytes_.end(), b, b + 8);
}

void Writer::Bytes(std::span<const uint8_t> bytes) { bytes_.insert(bytes_.end(), bytes.begin(), bytes.end()); }

bool Reader::Take(uint64_t n) {
  if (!ok_ || n > bytes_.size() - at_) {
    ok_ = false;
    return false;
  }
  return true;
}

uint32_t Reader::U32() {
  if (!Take(4)) return 0;
  at_ += 4;
  return LoadLE32(bytes_.data() + at_ - 4);
}

uint64_t Reader::U64() {
  if (!Take(8)) return 0;
  at_ += 8;
  return LoadLE64(bytes_.data() + at_ - 8);
}

std::vector<uint8_t> Reader::Bytes(uint64_t n) {
  if (!Take(n)) return {};
  at_ += n;
  return std::vector<uint8_t>(bytes_.begin() + (at_ - n), bytes_.begin() + at_);
}

Status Reader::Done(const std::string& what) const {
  if (!ok_) return Status::Corruption(what + ": the message body is too short");
  if (at_ != bytes_.size()) {
    return Status::Corruption(what + ": " + std::to_string(bytes_.size() - at_) +
                              " unexpected bytes after the message body");
  }
  return Status::Ok();
}

void PutCheckpoint(const KfdCheckpoint& state, Writer* out) {
  out->U32(state.num_objects);
  out->U32(static_cast<uint32_t>(state.devices.size()));
  out->U32(static_cast<uint32_t>(state.bos.size()));
  out->U32(static_cast<uint32_t>(state.priv_data.size()));
  for (const KfdDevice& d : state.devices) {
    out->U32(d.user_gpu_id);
    out->U32(d.actual_gpu_id);
    out->I32(d.drm_fd);
  }
  for (const KfdBo& b : state.bos) {
    out->U64(b.addr);
    out->U64(b.size);
    out->U64(b.offset);
    out->U64(b.restored_offset);
    out->U32(b.gpu_id);
    out->U32(b.alloc_flags);
    out->I32(b.dmabuf_fd);
  }
  out->Bytes(state.priv_data);
}

Result<KfdCheckpoint> GetCheckpoint(Reader* in) {
  KfdCheckpoint state;
  state.num_objects = in->U32();
  const uint64_t devices = in->U32(), bos = in->U32(), priv_len = in->U32();
  // Counts are checked against what is left before anything is allocated.
  if (!in->ok() || devices * kDeviceBytes + bos * kBoBytes + priv_len > kMaxReplyBody) {
    return Status::Corruption("a simulated KFD checkpoint body with impossible counts");
  }
  for (uint64_t i = 0; i < devices && in->ok(); ++i) {
    KfdDevice d;
    d.user_gpu_id = in->U32();
    d.actual_gpu_id = in->U32();
    d.drm_fd = in->I32();
    state.devices.push_back(d);
  }
  for (uint64_t i = 0; i < bos && in->ok(); ++i) {
    KfdBo b;
    b.addr = in->U64();
    b.size = in->U64();
    b.offset = in->U64();
    b.restored_offset = in->U64();
    b.gpu_id = in->U32();
    b.alloc_flags = in->U32();
    b.dmabuf_fd = in->I32();
    state.bos.push_back(b);
  }
  state.priv_data = in->Bytes(priv_len);
  if (!in->ok()) return Status::Corruption("a simulated KFD checkpoint body is too short");
  return state;
}

void PutProcessInfo(const KfdProcessInfo& info, Writer* out) {
  out->U32(info.pid);
  out->U32(info.num_devices);
  out->U32(info.num_bos);
  out->U32(info.num_objects);
  out->U64(info.priv_data_size);
}

KfdProcessInfo GetProcessInfo(Reader* in) {
  KfdProcessInfo info;
  info.pid = in->U32();
  info.num_devices = in->U32();
  info.num_bos = in->U32();
  info.num_objects = in->U32();
  info.priv_data_size = in->U64();
  return info;
}

Status StatusFromWire(uint32_t code, std::string message) {
  constexpr auto kLastCode = static_cast<uint32_t>(Status::Code::kNotFound);
  if (code > kLastCode) {
    return Status::Corruption("simulated KFD reply with unknown status code " + std::to_string(code) + ": " + message);
  }
  return Status::WithCode(static_cast<Status::Code>(code), std::move(message));
}

}  // namespace vramflow::sim_wire
