// SPDX-License-Identifier: MIT
// The threads a network receiver serves its connections on, bounded: one
// thread per connection, at most `max_threads` at once, of which at most
// `max_handshakes` may still be in their handshake (unauthenticated), each
// for at most `handshake_deadline` from accept. Threads that ended are
// joined (reaped) by the next Tend() or Start(), so a flood of connections
// that come and go costs no more than the limits, never a leak.
//
// What it does to a connection past its limits: a handshake past its
// deadline is cut off (shutdown(), so its reads and writes fail at once);
// when a new connection arrives with every handshake slot taken, the oldest
// handshake is cut off to make room, so idle connections cannot keep a real
// sender out (so does the accept loop when it runs out of descriptors);
// when no thread can be started (the thread limit, or the system
// refusing one), the new connection is closed and Start() says why.
//
// Thread safety: every method may be called from any thread. The accept loop
// calls Tend() and Start(); connection threads call HandshakeDone(); the
// owner calls Stop() and then JoinAll() (which must not run on one of these
// threads).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

struct ConnectionLimits {
  size_t max_threads = 256;                            // connection threads alive at once, handshakes included
  size_t max_handshakes = 128;                         // of those, still in their handshake
  std::chrono::milliseconds handshake_deadline{5000};  // from accept to HandshakeDone()
};

class ConnectionThreads {
 public:
  // A connection's number, for HandshakeDone().
  using Id = uint64_t;
  // Serves one connection; runs on the connection's own thread.
  using Serve = std::function<void(UniqueFd fd, Id id)>;

  explicit ConnectionThreads(ConnectionLimits limits);
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;
  ~ConnectionThreads();  // Stop() and JoinAll()

  // Joins the threads that ended and cuts off the handshakes past their
  // deadline. Returns how long until the next deadline (at most `longest`),
  // so that the caller's wait for a connection ends in time to cut it.
  std::chrono::milliseconds Tend(std::chrono::milliseconds longest);
  // Waits up to `timeout` until a thread may start (the thread limit is not
  // reached) or Stop(); true if one may.
  bool WaitForRoom(std::chrono::milliseconds timeout);
  // Serves `fd` on a new thread, as a connection in its handshake, and
  // takes it. Fails, leaving `fd` with the caller to try again, when the
  // thread limit is reached or no descriptor is left to watch it with;
  // fails and closes it when the system refuses a thread.
  Status Start(UniqueFd& fd, Serve serve);
  // The connection's handshake is over: it is no longer cut off.
  void HandshakeDone(Id id);
  // Cuts off the handshake that has taken longest (when out of descriptors).
  void CutOldest();
  // Cuts off every handshake, and every later one at once; wakes WaitForRoom().
  void Stop();
  // Joins every thread (after Stop(), or once the connections ended).
  void JoinAll();

  // For tests and benchmarks: threads alive (or ended but not yet joined),
  // and connections in their handshake.
  size_t threads() const;
  size_t handshakes() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Handshake {
    UniqueFd watch;  // a dup of the connection's socket: shutdown() reaches it, even after the thread closed its own
    Clock::time_point deadline;
  };
  void Ended(Id id);       // on the connection's thread, after `serve`
  void ReapLocked();       // joins ended threads; caller holds mu_
  void CutOldestLocked();  // caller holds mu_; there is a handshake

  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                // guarded by mu_
  Id next_id_ = 0;                      // guarded by mu_
  std::map<Id, std::thread> threads_;   // guarded by mu_
  std::vector<Id> ended_;               // guarded by mu_: threads that returned, to join
  std::map<Id, Handshake> handshakes_;  // guarded by mu_: by id, so the oldest comes first
};

}  // namespace vramflow
