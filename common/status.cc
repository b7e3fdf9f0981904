// SPDX-License-Identifier: MIT
#include "common/status.h"

#include <cstring>

namespace vramflow {

Status Status::FromErrno(const std::string& context, int err) {
  return Status(Code::kIoError, context + ": " + std::strerror(err));
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "ok";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kCorruption:
      return "corruption";
    case Status::Code::kTruncated:
      return "truncated";
    case Status::Code::kIoError:
      return "I/O error";
    case Status::Code::kNotSupported:
      return "not supported";
    case Status::Code::kAlreadyExists:
      return "already exists";
    case Status::Code::kCancelled:
      return "cancelled";
    case Status::Code::kTimedOut:
      return "timed out";
    case Status::Code::kInternal:
      return "internal error";
    case Status::Code::kUnauthenticated:
      return "authentication failed";
    case Status::Code::kNotFound:
      return "not found";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code())) + ": " + state_->message;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return Status();
  return Status(state_->code, context + ": " + state_->message);
}

}  // namespace vramflow
