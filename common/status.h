// SPDX-License-Identifier: MIT
// Status and Result: errors as values with context.
//
// A Status is either OK or carries a code and a human-readable message that
// says what failed and where (file, stream offset, frame). Functions that can
// fail return Status, or Result<T> when they also produce a value. Neither
// throws. Both are cheap to move; OK carries no allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace vramflow {

class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument,  // the caller asked for something impossible
    kCorruption,       // bytes do not follow the format
    kTruncated,        // the input ended before it was complete
    kIoError,          // the OS said no
    kNotSupported,     // valid, but not something this build can do
    kAlreadyExists,    // refusing to overwrite
    kCancelled,        // another part of the work failed first
    kTimedOut,         // something did not happen in time (a DMA fence, a peer)
    kInternal,         // a bug in vramflow
    kUnauthenticated,  // a peer or endpoint refused our credentials, or we refused its (TLS, keys)
    kNotFound,         // something needed is missing (an incremental stream's base)
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status Truncated(std::string msg) { return Status(Code::kTruncated, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  // An I/O error from errno: "<context>: <strerror(err)>".
  static Status FromErrno(const std::string& context, int err);
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status AlreadyExists(std::string msg) { return Status(Code::kAlreadyExists, std::move(msg)); }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  static Status TimedOut(std::string msg) { return Status(Code::kTimedOut, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status Unauthenticated(std::string msg) { return Status(Code::kUnauthenticated, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  // A status of `code` (one this header names) with `msg`; kOk is Ok(). For
  // a code that crossed a wire, or a message rewritten for someone else.
  static Status WithCode(Code code, std::string msg) {
    return code == Code::kOk ? Status() : Status(code, std::move(msg));
  }

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  const std::string& message() const;
  // "corruption: <message>", or "ok".
  std::string ToString() const;

  // Prefix the message with more context: "<context>: <message>".
  Status WithContext(const std::string& context) const;

  Status(const Status& other) : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct State {
    Code code;
    std::string message;
  };
  Status(Code code, std::string msg) : state_(std::make_unique<State>(State{code, std::move(msg)})) {}
  std::unique_ptr<State> state_;
};

const char* CodeName(Status::Code code);

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace vramflow

// Return early from the enclosing function when `expr` yields a non-OK Status.
#define VF_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::vramflow::Status vf_status_ = (expr);  \
    if (!vf_status_.ok()) return vf_status_; \
  } while (0)

#define VF_CONCAT_INNER(a, b) a##b
#define VF_CONCAT(a, b) VF_CONCAT_INNER(a, b)
// `VF_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a Result or returns its Status.
#define VF_ASSIGN_OR_RETURN(decl, expr) VF_ASSIGN_OR_RETURN_IMPL(VF_CONCAT(vf_result_, __LINE__), decl, expr)
#define VF_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  decl = std::move(tmp).value()
