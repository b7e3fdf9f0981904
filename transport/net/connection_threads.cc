// SPDX-License-Identifier: MIT
#include "transport/net/connection_threads.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace vramflow {

ConnectionThreads::ConnectionThreads(ConnectionLimits limits) : limits_(limits) {}

ConnectionThreads::~ConnectionThreads() {
  Stop();
  JoinAll();
}

std::chrono::milliseconds ConnectionThreads::Tend(std::chrono::milliseconds longest) {
  std::lock_guard lock(mu_);
  ReapLocked();
  const Clock::time_point now = Clock::now();
  Clock::time_point next = now + longest;
  for (auto& [id, handshake] : handshakes_) {
    if (handshake.deadline <= now) {
      // Stays listed (and counted) until its thread is out of the handshake.
      ::shutdown(handshake.watch.get(), SHUT_RDWR);
      handshake.deadline = Clock::time_point::max();
    } else {
      next = std::min(next, handshake.deadline);
    }
  }
  return std::chrono::ceil<std::chrono::milliseconds>(next - now);
}

bool ConnectionThreads::WaitForRoom(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  ReapLocked();
  cv_.wait_for(lock, timeout, [&] {
    ReapLocked();
    return stopped_ || threads_.size() < limits_.max_threads;
  });
  return !stopped_ && threads_.size() < limits_.max_threads;
}

Status ConnectionThreads::Start(UniqueFd& fd, Serve serve) {
  std::lock_guard lock(mu_);
  ReapLocked();
  if (stopped_) return Status::Cancelled("the receiver is shutting down");
  if (threads_.size() >= limits_.max_threads)
    return Status::IoError("refused a connection: " + std::to_string(threads_.size()) + " connections are open");
  UniqueFd watch(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!watch.valid()) return Status::FromErrno("no descriptor to watch a connection's handshake with", errno);
  if (handshakes_.size() >= limits_.max_handshakes) CutOldestLocked();
  const Id id = next_id_++;
  try {
    std::thread thread([this, id, fd = std::move(fd), serve = std::move(serve)]() mutable {
      serve(std::move(fd), id);
      serve = nullptr;  // what it holds goes before the thread counts as ended
      Ended(id);
    });
    threads_.emplace(id, std::move(thread));
  } catch (const std::system_error& e) {
    // The system's thread or memory limits (EAGAIN, ENOMEM): refuse this
    // connection, and keep serving the ones there are.
    return Status::IoError(std::string("refused a connection: cannot start a thread for it: ") + e.what());
  }
  handshakes_.emplace(id, Handshake{std::move(watch), Clock::now() + limits_.handshake_deadline});
  return Status::Ok();
}

void ConnectionThreads::HandshakeDone(Id id) {
  std::lock_guard lock(mu_);
  handshakes_.erase(id);
}

void ConnectionThreads::CutOldest() {
  std::lock_guard lock(mu_);
  if (!handshakes_.empty()) CutOldestLocked();
}

void ConnectionThreads::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (auto& [id, handshake] : handshakes_) ::shutdown(handshake.watch.get(), SHUT_RDWR);
  cv_.notify_all();
}

void ConnectionThreads::JoinAll() {
  std::map<Id, std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
    ended_.clear();
  }
  for (auto& [id, thread] : threads) thread.join();
}

size_t ConnectionThreads::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

size_t ConnectionThreads::handshakes() const {
  std::lock_guard lock(mu_);
  return handshakes_.size();
}

void ConnectionThreads::Ended(Id id) {
  std::lock_guard lock(mu_);
  handshakes_.erase(id);
  ended_.push_back(id);
  cv_.notify_all();
}

void ConnectionThreads::ReapLocked() {
  for (Id id : ended_) {
    auto it = threads_.find(id);
    if (it == threads_.end()) continue;  // JoinAll() took it
    // The thread has returned from its work and only needs to exit: a short
    // wait, and it needs no lock to finish.
    it->second.join();
    threads_.erase(it);
  }
  ended_.clear();
}

void ConnectionThreads::CutOldestLocked() {
  auto oldest = handshakes_.begin();
  ::shutdown(oldest->second.watch.get(), SHUT_RDWR);
  handshakes_.erase(oldest);
}

}  // namespace vramflow
