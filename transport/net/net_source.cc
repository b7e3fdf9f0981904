// SPDX-License-Identifier: MIT
#include "transport/net/net_source.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/printable.h"
#include "common/thread_start.h"
#include "transport/net/connection_threads.h"
#include "transport/net/deadline.h"
#include "transport/net/net_protocol.h"
#include "transport/net/net_security.h"
#include "transport/net/refusal_log.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

using Clock = std::chrono::steady_clock;

// One sender's session: its connections, the reorder buffer, and where the
// consumer is.
struct Session {
  SessionId id{};
  uint16_t conn_count = 0;
  uint32_t segment_bytes = 0;
  uint64_t window_bytes = 0;
  std::string peer;
  bool named = false;       // the hello announced a NAME message
  bool asks_bases = false;  // the hello asked for BASES (kHelloBases)
  BaseOffer offer;          // what this session's sender is offered (fixed when the session starts)

  std::mutex mu;
  std::condition_variable cv;
  uint32_t generation = 0;
  std::vector<std::shared_ptr<Channel>> channels;  // this generation's, by connection index
  std::optional<Clock::time_point> disconnected_since;
  struct Piece {
    std::vector<uint8_t> bytes;
    size_t start = 0;  // bytes already consumed or received before
  };
  std::map<uint64_t, Piece> pending;  // by stream offset
  // Memory. Payload buffers are counted from before they are allocated:
  // those in `pending`, those being received (by their connection's
  // generation) and spare ones. The first two may not exceed window_bytes,
  // as a sender never has more unacknowledged; spares are dropped to stay
  // within it. A resent payload that is held already is read into
  // `discard`, one segment for the whole session. So a session holds at
  // most window_bytes + segment_bytes, whatever its sender does.
  uint64_t pending_bytes = 0;
  std::map<uint32_t, uint64_t> receiving;  // by generation
  uint64_t spare_bytes = 0;
  std::mutex discard_mu;
  std::vector<uint8_t> discard;  // guarded by discard_mu
  uint64_t delivered = 0;        // stream bytes handed to the consumer
  uint64_t acked = 0;
  std::optional<uint64_t> end;
  std::optional<std::string> name;  // from the NAME message
  Status failed;
  bool finished = false;  // Finish() ran (with success when failed is OK)
  int open_readers = 0;

  std::vector<std::vector<uint8_t>> spare;  // buffers of consumed pieces, for reuse (KeepSpare)

  void Fail(Status s) {
    if (failed.ok()) failed = std::move(s);
    cv.notify_all();
  }
  uint64_t ReceivingBytes() const {
    uint64_t n = 0;
    for (const auto& [generation, bytes] : receiving) n += bytes;
    return n;
  }
  // True when the stream bytes [offset, offset + length) are consumed or
  // held already: a resend. Caller holds mu.
  bool Holds(uint64_t offset, uint32_t length) const {
    if (offset + length <= delivered) return true;
    auto it = pending.find(offset);
    return it != pending.end() && it->second.bytes.size() >= length;
  }
  // Counts a payload of `length` bytes on a connection of `generation` as
  // being received and returns a buffer for it: a spare one of that size,
  // else an empty one to be sized outside the lock. Fails the session when
  // that would put more than the window ahead of the consumer; waits up to
  // `wait` first while connections of an older generation, being cut off,
  // still hold buffers. Caller holds mu (in `lock`).
  Result<std::vector<uint8_t>> Reserve(std::unique_lock<std::mutex>& lock, uint32_t length, uint32_t from_generation,
                                       std::chrono::milliseconds wait) {
    auto fits = [&] { return pending_bytes + ReceivingBytes() + length <= window_bytes; };
    auto stale = [&] { return !receiving.empty() && receiving.begin()->first < generation; };
    cv.wait_for(lock, wait, [&] { return fits() || !stale() || !failed.ok() || from_generation != generation; });
    if (!failed.ok()) return failed;
    if (!fits()) {
      Fail(Status::Corruption("the sender (" + peer + ") overran its window of " + std::to_string(window_bytes) +
                              " bytes (this receiver's share of its memory budget): " +
                              std::to_string(pending_bytes + ReceivingBytes() + length) +
                              " bytes would be held ahead of byte " + std::to_string(delivered)));
      return failed;
    }
    if (length > 0) receiving[from_generation] += length;  // no empty entries: Received() erases at zero
    std::vector<uint8_t> buffer;
    if (!spare.empty() && spare.back().size() == length) {
      buffer = std::move(spare.back());
      spare.pop_back();
      spare_bytes -= length;
    }
    while (!spare.empty() && pending_bytes + ReceivingBytes() + spare_bytes > window_bytes) {
      spare_bytes -= spare.back().size();
      spare.pop_back();
    }
    return buffer;
  }
  // The payload Reserve() counted has arrived (or failed to): no longer
  // counted as being received. Caller holds mu.
  void Received(uint32_t length, uint32_t from_generation) {
    if (length == 0) return;
    auto it = receiving.find(from_generation);
    it->second -= length;
    if (it->second == 0) receiving.erase(it);
    cv.notify_all();
  }
  // Keeps a payload buffer that is no longer needed for the next payload of
  // its size (buffers are reused, so that no fresh, page-faulting megabytes
  // are needed per segment), within the window. Caller holds mu.
  void KeepSpare(std::vector<uint8_t> buffer) {
    if (buffer.empty() || spare.size() >= 2u * conn_count ||
        pending_bytes + ReceivingBytes() + spare_bytes + buffer.size() > window_bytes)
      return;
    spare_bytes += buffer.size();
    spare.push_back(std::move(buffer));
  }
  // Reads a resent payload that is held already into the one discard buffer.
  Status ReceiveDuplicate(Channel& channel, const MsgHeader& header) {
    std::lock_guard lock(discard_mu);
    if (discard.size() < segment_bytes) discard.resize(segment_bytes);
    return channel.ReceivePayload(header, std::span<uint8_t>(discard.data(), header.length));
  }
  // Closes this generation's connections (the readers then exit).
  void DropConnections() {
    for (auto& c : channels)
      if (c) c->Shutdown();
    std::fill(channels.begin(), channels.end(), nullptr);
  }
  std::shared_ptr<Channel> Control() {
    std::lock_guard lock(mu);
    return channels.empty() ? nullptr : channels[0];
  }
  // Fails the session once its sender has been gone longer than it may
  // take to resume. Caller holds mu.
  void CheckResumeTimeout(std::chrono::milliseconds resume_timeout) {
    if (!disconnected_since || Clock::now() - *disconnected_since < resume_timeout) return;
    Fail(Status::TimedOut("the sender (" + peer + ") disconnected at byte " + std::to_string(delivered) +
                          " and did not resume within " + FormatSeconds(resume_timeout)));
    DropConnections();
  }
};

// How long the accept loop pauses after a failed accept (EMFILE, ENFILE,
// ENOMEM) or a connection it could not start a thread for.
constexpr std::chrono::milliseconds kAcceptBackoff{20};

// Finished sessions kept so that a sender that missed their DONE can
// reconnect and hear it again.
constexpr size_t kKeptSessions = 4;

// Largest message a sender may send on a finished session's connection (it
// should only wait for DONE, and PING meanwhile).
constexpr uint32_t kMaxAfterDone = 4096;

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(Listener listener, NetOptions options, std::unique_ptr<TlsContext> tls, bool unix)
      : listener_(std::move(listener)),
        options_(std::move(options)),
        tls_(std::move(tls)),
        unix_(unix),
        connections_(options_.limits),
        refusals_(options_.log, listener_.uri() + ": ") {
    ping_interval_ = std::max(options_.socket.io_timeout / 4, std::chrono::milliseconds(10));
    OfferBases(options_.base_offer);
  }

  // Starts the accept and ping threads; on failure Stop() ends what started.
  Status Start() {
    Status s = StartThread(&accept_thread_, "the receiver's accept loop on " + uri(),
                           [self = shared_from_this()] { self->AcceptLoop(); });
    if (s.ok())
      s = StartThread(&ping_thread_, "the receiver's pings on " + uri(),
                      [self = shared_from_this()] { self->PingLoop(); });
    if (!s.ok()) Stop();
    return s;
  }

  // Ends every thread; the last owner calls it, and Shutdown() may too.
  void Stop() {
    std::lock_guard stop_lock(stop_mu_);
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
      listener_.Interrupt();
      if (session_) {
        std::lock_guard session_lock(session_->mu);
        session_->DropConnections();
        session_->Fail(Status::Cancelled("the receiver is shutting down"));
      }
    }
    connections_.Stop();  // cuts silent handshakes short instead of waiting out their timeout
    if (accept_thread_.joinable()) accept_thread_.join();
    if (ping_thread_.joinable()) ping_thread_.join();
    connections_.JoinAll();
    refusals_.Flush(/*force=*/true);
  }

  std::string uri() const { return listener_.uri(); }

  Result<std::shared_ptr<Session>> WaitForSession(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    auto ready = [&] { return (session_ && !handed_) || stop_; };
    if (timeout.count() < 0) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_for(lock, timeout, ready)) {
      return Status::TimedOut("no sender connected to " + uri() + " within " + FormatSeconds(timeout));
    }
    if (stop_) return Status::Cancelled("the receiver on " + uri() + " shut down");
    handed_ = true;
    return session_;
  }

  const NetOptions& options() const { return options_; }

  void OfferBases(BaseOffer offer) {
    if (offer.ids.size() > kMaxOfferedBases) offer.ids.resize(kMaxOfferedBases);
    std::lock_guard lock(mu_);
    offer_ = std::move(offer);
  }

 private:
  // Accepts connections and starts a thread for each, within the
  // connection limits (connection_threads.h). Out of descriptors, threads or
  // memory, it cuts the oldest handshake off, so that idle connections
  // cannot hold what a real sender needs, and pauses (kAcceptBackoff)
  // instead of spinning on an accept() that fails at once (EMFILE); a
  // connection accepted meanwhile waits for its thread.
  void AcceptLoop() {
    UniqueFd waiting;  // accepted, not started yet
    std::string peer;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
      }
      refusals_.Flush();  // the summary of a burst of refused connections, once it has calmed down
      const std::chrono::milliseconds wait = connections_.Tend(std::chrono::milliseconds(1000));
      Status status;
      if (!waiting.valid()) {
        if (!connections_.WaitForRoom(wait)) continue;
        Result<UniqueFd> fd = listener_.Accept(wait, &peer);
        if (!fd.ok() && fd.status().code() == Status::Code::kCancelled) return;  // Stop()
        if (!fd.ok() && fd.status().code() == Status::Code::kTimedOut) continue;
        if (fd.ok()) waiting = std::move(*fd);
        status = fd.status();
      }
      if (waiting.valid()) {
        status = connections_.Start(waiting, [self = shared_from_this(), peer](UniqueFd f, ConnectionThreads::Id id) {
          self->ServeConnection(std::move(f), peer, id);
        });
        // Closed: the system refused a thread (not just the limit reached).
        if (!status.ok() && !waiting.valid()) refusals_.Refused(status.message() + " (from " + peer + ")");
      }
      if (!status.ok()) {
        connections_.CutOldest();
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, kAcceptBackoff, [&] { return stop_; });
      }
    }
  }

  // The handshake, then reading this connection's messages into its session.
  void ServeConnection(UniqueFd fd, const std::string& peer, ConnectionThreads::Id id) {
    const auto timeout = options_.socket.io_timeout;
    std::string what = "connection from " + peer;
    std::unique_ptr<Connection> conn = Secure(std::move(fd), peer);
    if (!conn) return;
    Result<IncomingHello> in = ReadClientHello(*conn, timeout, what);
    if (!in.ok()) return;  // not a sender, or gone: nothing to answer
    const ClientHello& hello = in->hello;
    if (hello.version != kNetProtocolVersion)
      return RefuseClient(*conn, HelloStatus::kVersion,
                          "this receiver speaks protocol version " + std::to_string(kNetProtocolVersion) +
                              ", the sender " + std::to_string(hello.version),
                          timeout);
    if (Granted(hello) == 0)
      return RefuseClient(*conn, HelloStatus::kBadRequest,
                          "the sender's segments of " + std::to_string(hello.segment_bytes) +
                              " bytes do not fit this receiver's memory budget of " +
                              std::to_string(options_.window_bytes) +
                              " bytes (it needs two); give the receiver more --max-memory",
                          timeout);

    // An existing session (a reconnect, or another stripe), or a new one.
    // A new session only exists once a connection has passed the handshake,
    // so a sender with a wrong key never blocks the destination.
    std::shared_ptr<Session> session;
    uint64_t resume = 0;
    bool finished_ok = false;
    {
      std::lock_guard lock(mu_);
      session = FindSession(hello.session);
      if (!session && (hello.flags & kHelloResume))
        return RefuseClient(*conn, HelloStatus::kSessionOver,
                            "this receiver has no session to resume (was it restarted?)", timeout);
      if (!session) {
        std::string why = WhyNoNewSession();
        if (!why.empty()) return RefuseClient(*conn, HelloStatus::kBusy, why, timeout);
      }
    }
    if (session) {
      std::lock_guard lock(session->mu);
      if (hello.conn_count != session->conn_count || hello.segment_bytes != session->segment_bytes ||
          Granted(hello) != session->window_bytes || ((hello.flags & kHelloNamed) != 0) != session->named ||
          ((hello.flags & kHelloBases) != 0) != session->asks_bases)
        return RefuseClient(*conn, HelloStatus::kBadRequest, "the connection does not match its session's settings",
                            timeout);
      if (!session->failed.ok())
        return RefuseClient(*conn, HelloStatus::kSessionOver, session->failed.message(), timeout);
      finished_ok = session->finished;
      resume = finished_ok && session->end ? *session->end : session->delivered;
    }
    Result<std::unique_ptr<Channel>> accepted =
        AcceptClient(std::move(conn), resume, Granted(hello), timeout,
                     "connection " + std::to_string(hello.conn_index) + " from " + peer);
    if (!accepted.ok()) return;  // a vanished sender
    std::shared_ptr<Channel> channel(std::move(*accepted));
    connections_.HandshakeDone(id);
    if (!session) {
      std::lock_guard lock(mu_);
      session = FindSession(hello.session);  // another of its connections may have been first
      if (!session) {
        std::string why = WhyNoNewSession();  // lost a race with another sender
        if (!why.empty()) {
          (void)channel->Send(MsgType::kError, 0, {reinterpret_cast<const uint8_t*>(why.data()), why.size()});
          return;
        }
        if (session_) {
          past_.push_back(std::move(session_));
          if (past_.size() > kKeptSessions) past_.pop_front();
        }
        session_ = std::make_shared<Session>();
        session_->id = hello.session;
        session_->conn_count = hello.conn_count;
        session_->segment_bytes = hello.segment_bytes;
        session_->window_bytes = Granted(hello);
        session_->named = (hello.flags & kHelloNamed) != 0;
        session_->asks_bases = (hello.flags & kHelloBases) != 0;
        session_->offer = offer_;
        session_->peer = peer;
        session_->channels.resize(hello.conn_count);
        handed_ = false;
        ++created_;
        cv_.notify_all();
        session = session_;
      }
    }
    if (session->asks_bases && hello.conn_index == 0) {
      // The offer opens connection 0 of every generation; it was fixed when
      // the session started, so a resuming sender hears the same one.
      const std::vector<uint8_t> ids = EncodeBasesPayload(session->offer);
      if (!channel->Send(MsgType::kBases, EncodeBasesFlags(session->offer), ids).ok()) return;  // a vanished sender
    }
    if (finished_ok) {
      // The sender missed our DONE; it is complete, say so again.
      if (hello.conn_index == 0) (void)channel->Send(MsgType::kDone, resume, {});
      return WaitForClose(channel);
    }
    {
      std::lock_guard lock(session->mu);
      if (hello.generation < session->generation) return;  // a straggler from before a reconnect
      if (hello.generation > session->generation) {
        session->DropConnections();  // the sender gave up on those
        session->generation = hello.generation;
      }
      if (session->channels[hello.conn_index]) session->channels[hello.conn_index]->Shutdown();
      session->channels[hello.conn_index] = channel;
      session->disconnected_since.reset();
      ++session->open_readers;
      session->cv.notify_all();
    }
    ReadMessages(*session, channel, hello.conn_index, hello.generation);
    std::lock_guard lock(session->mu);
    --session->open_readers;
    session->cv.notify_all();
  }

  // The connection through TLS (tcp:// unless --insecure), or a UNIX peer of
  // our own user; nullptr, logged with the peer's address, when refused.
  std::unique_ptr<Connection> Secure(UniqueFd fd, const std::string& peer) {
    if (unix_) {
      Status own = CheckUnixPeer(fd.get());
      if (!own.ok()) {
        refusals_.Refused(own.message());
        return nullptr;
      }
    }
    // Within the receiver's handshake deadline (connection_threads.h), which
    // also cuts a trickling client off.
    const auto timeout = std::min(options_.socket.io_timeout, options_.limits.handshake_deadline);
    if (!tls_) {
      if (!unix_) {  // a TLS client here is a sender with credentials meeting an --insecure receiver
        Status plain = CheckPeerSpeaksPlaintext(fd.get(), timeout, peer);
        if (!plain.ok()) {
          refusals_.Refused("refused: " + plain.message());
          return nullptr;
        }
      }
      return std::make_unique<PlainConnection>(std::move(fd));
    }
    auto tls = TlsConnection::Handshake(*tls_, std::move(fd), "", timeout, peer);
    if (!tls.ok()) {
      refusals_.Refused("refused: " + tls.status().message());
      return nullptr;
    }
    if (options_.tls.ktls && options_.log) std::call_once(ktls_reported_, [&] { options_.log(DescribeKtls(**tls)); });
    return std::move(*tls);
  }

  // The sender's window, cut to this receiver's share of its memory budget
  // less one segment (for resent data, see Session); 0 when the budget
  // cannot hold two of the sender's segments.
  uint32_t Granted(const ClientHello& hello) const {
    const uint64_t budget = options_.window_bytes;
    if (budget < 2ull * hello.segment_bytes) return 0;
    return static_cast<uint32_t>(std::min<uint64_t>({hello.window_bytes, budget - hello.segment_bytes, 1ull << 30}));
  }

  // The current session or a kept finished one. Caller holds mu_.
  std::shared_ptr<Session> FindSession(const SessionId& id) const {
    if (session_ && session_->id == id) return session_;
    for (const auto& past : past_)
      if (past->id == id) return past;
    return nullptr;
  }

  // Why a new sender cannot start a session now, or empty. The sender is
  // not authenticated yet, so this says nothing about the destination or
  // the active sender. Caller holds mu_.
  std::string WhyNoNewSession() const {
    if (session_) {
      std::lock_guard lock(session_->mu);
      if (!session_->finished) return "the receiver is busy with another sender's stream";
    }
    if (options_.sessions != 0 && created_ >= options_.sessions) return "the receiver takes no more streams";
    return "";
  }

  void ReadMessages(Session& s, const std::shared_ptr<Channel>& channel, uint16_t index, uint32_t generation) {
    for (;;) {
      Result<MsgHeader> header = channel->ReceiveHeader(s.segment_bytes);
      Status status = header.status();
      std::vector<uint8_t> payload;
      bool duplicate = false;
      if (header.ok()) {
        std::unique_lock lock(s.mu);
        duplicate = header->type == MsgType::kData && s.Holds(header->offset, header->length);
        if (!duplicate) {
          Result<std::vector<uint8_t>> buffer = s.Reserve(lock, header->length, generation, options_.socket.io_timeout);
          if (!buffer.ok()) {
            // The consumer's Finish() failed the session: it tells the sender
            // why on the control connection, then closes; closing here
            // could cut that verdict off.
            if (s.finished) return;
            // Else tell the sender why now, where it listens (it would also
            // hear it on reconnecting).
            std::shared_ptr<Channel> control = s.channels.empty() ? nullptr : s.channels[0];
            lock.unlock();
            const std::string why = buffer.status().ToString();
            if (control)
              (void)control->Send(MsgType::kError, 0, {reinterpret_cast<const uint8_t*>(why.data()), why.size()});
            lock.lock();
            s.DropConnections();
            return;
          }
          payload = std::move(*buffer);
        }
      }
      if (header.ok() && duplicate) {
        status = s.ReceiveDuplicate(*channel, *header);
      } else if (header.ok()) {
        if (payload.size() != header->length) payload = std::vector<uint8_t>(header->length);
        status = channel->ReceivePayload(*header, payload);
      }
      std::lock_guard lock(s.mu);
      if (header.ok() && !duplicate) s.Received(header->length, generation);
      if (!status.ok()) {
        if (s.finished || generation != s.generation || s.channels[index] != channel) return;
        if (status.code() == Status::Code::kCorruption) {
          // Tampering or a wrong key is not a network hiccup: no resume.
          s.Fail(status);
          s.DropConnections();
          return;
        }
        // The sender reconnects every connection; drop the rest too.
        s.DropConnections();
        if (!s.disconnected_since) s.disconnected_since = Clock::now();
        s.cv.notify_all();
        return;
      }
      if (duplicate) continue;
      switch (header->type) {
        case MsgType::kData:
          Insert(s, header->offset, payload);
          break;
        case MsgType::kEnd:
          if ((s.end && *s.end != header->offset) || header->offset < s.delivered ||
              (!s.pending.empty() &&
               s.pending.rbegin()->first + s.pending.rbegin()->second.bytes.size() > header->offset)) {
            s.Fail(Status::Corruption(channel->what() + ": END at byte " + std::to_string(header->offset) +
                                      " contradicts the data received"));
          }
          s.end = header->offset;
          s.cv.notify_all();
          break;
        case MsgType::kPing:
          break;
        case MsgType::kName: {
          std::string name(payload.begin(), payload.end());
          if (!s.named || index != 0 || name.empty() || name.size() > kMaxStreamName) {
            s.Fail(Status::Corruption(channel->what() + ": a NAME message of " + std::to_string(name.size()) +
                                      " bytes" + (s.named ? "" : " that the hello did not announce") +
                                      (index != 0 ? " on a connection other than 0" : "") + " (names are 1 to " +
                                      std::to_string(kMaxStreamName) + " bytes)"));
          } else if (s.name && *s.name != name) {
            s.Fail(Status::Corruption(channel->what() + ": the stream named " + Printable(*s.name) + " was renamed " +
                                      Printable(name) + " on reconnecting"));
          } else {
            s.name = std::move(name);
            s.cv.notify_all();
          }
          break;
        }
        case MsgType::kAbort:
          s.Fail(Status::Cancelled("the sender (" + s.peer + ") aborted the transfer at byte " +
                                   std::to_string(header->offset)));
          return;
        case MsgType::kError:
          s.Fail(Status::IoError("the sender (" + s.peer + ") failed: " +
                                 EscapedText(std::string(payload.begin(), payload.end()))));  // the peer's text
          return;
        default:
          s.Fail(Status::Corruption(channel->what() + ": unexpected " + MsgTypeName(header->type) + " message"));
          return;
      }
      s.KeepSpare(std::move(payload));  // unless Insert() kept it
    }
  }

  // Files a DATA payload by offset, taking `bytes` unless it is not needed.
  // Caller holds s.mu.
  void Insert(Session& s, uint64_t offset, std::vector<uint8_t>& bytes) {
    uint64_t end = offset + bytes.size();
    if (end <= s.delivered || bytes.empty()) return;  // resent after a reconnect
    if (s.end && end > *s.end) {
      s.Fail(Status::Corruption("the sender sent bytes " + std::to_string(offset) + ".." + std::to_string(end) +
                                " past the end it announced (" + std::to_string(*s.end) + ")"));
      return;
    }
    if (s.pending.count(offset)) return;  // a duplicate
    Session::Piece piece;
    piece.start = offset < s.delivered ? s.delivered - offset : 0;
    piece.bytes = std::move(bytes);
    s.pending_bytes += piece.bytes.size();
    s.pending.emplace(offset, std::move(piece));
    s.cv.notify_all();
  }

  void WaitForClose(const std::shared_ptr<Channel>& channel) {
    std::vector<uint8_t> sink;
    for (;;) {
      Result<MsgHeader> header = channel->ReceiveHeader(kMaxAfterDone);
      if (!header.ok()) return;
      sink.resize(header->length);
      if (!channel->ReceivePayload(*header, sink).ok()) return;
    }
  }

  // Pings the current sender's control connection so it knows we are alive
  // while the consumer is slow.
  void PingLoop() {
    for (;;) {
      std::shared_ptr<Session> session;
      {
        std::unique_lock lock(mu_);
        if (cv_.wait_for(lock, ping_interval_, [&] { return stop_; })) return;
        session = session_;
      }
      if (!session) continue;
      uint64_t delivered;
      std::shared_ptr<Channel> control;
      {
        std::lock_guard lock(session->mu);
        if (session->finished || !session->failed.ok()) continue;
        delivered = session->delivered;
        control = session->channels.empty() ? nullptr : session->channels[0];
      }
      if (control) (void)control->Send(MsgType::kPing, delivered, {});
    }
  }

  Listener listener_;
  NetOptions options_;
  std::unique_ptr<TlsContext> tls_;  // tcp:// unless --insecure
  bool unix_;                        // unix: peers must be our user or root
  std::chrono::milliseconds ping_interval_;
  std::thread accept_thread_;
  std::thread ping_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::shared_ptr<Session> session_;           // the newest session
  bool handed_ = false;                        // session_ went to the consumer
  BaseOffer offer_;                            // for new sessions whose senders ask (kHelloBases)
  std::deque<std::shared_ptr<Session>> past_;  // finished sessions, oldest first
  unsigned created_ = 0;                       // sessions so far
  std::mutex stop_mu_;                         // one Stop() at a time
  ConnectionThreads connections_;
  RefusalLog refusals_;           // refused connections, rate-limited
  std::once_flag ktls_reported_;  // --ktls: whether it runs is logged once
};

// Owns the core's lifetime: the last of the receiver and its source stops it.
struct CoreOwner {
  explicit CoreOwner(std::shared_ptr<Core> c) : core(std::move(c)) {}
  CoreOwner(const CoreOwner&) = delete;
  CoreOwner& operator=(const CoreOwner&) = delete;
  ~CoreOwner() { core->Stop(); }
  std::shared_ptr<Core> core;
};

class NetSource final : public ByteSource {
 public:
  NetSource(std::shared_ptr<CoreOwner> owner, std::shared_ptr<Session> session)
      : owner_(std::move(owner)), session_(std::move(session)), options_(owner_->core->options()) {
    ack_every_ = std::max<uint64_t>(session_->window_bytes / 8, 1);
    // The process is being interrupted: the sender hears why (ERROR) instead
    // of waiting for acknowledgements until it times out.
    interrupt_entry_ = CleanupEntry(
        options_.cleanup,
        [session = session_, registry = options_.cleanup] {
          uint64_t delivered;
          {
            std::lock_guard lock(session->mu);
            if (session->finished) return;
            delivered = session->delivered;
          }
          if (std::shared_ptr<Channel> control = session->Control()) {
            const std::string why = "the receiver " + registry->reason();
            (void)control->Send(MsgType::kError, delivered, {reinterpret_cast<const uint8_t*>(why.data()), why.size()});
          }
        },
        CleanupRegistry::Kind::kRemote);
  }
  ~NetSource() override {
    if (!finished_) (void)Finish(Status::Cancelled("the receiver stopped before the end of the stream"));
  }

  Result<size_t> Read(std::span<uint8_t> data) override {
    Session& s = *session_;
    size_t n = 0;
    {
      std::unique_lock lock(s.mu);
      for (;;) {
        if (!s.failed.ok()) return s.failed;
        if (!s.pending.empty()) {
          auto it = s.pending.begin();
          Session::Piece& piece = it->second;
          if (it->first + piece.start == s.delivered) {
            n = std::min(data.size(), piece.bytes.size() - piece.start);
            std::memcpy(data.data(), piece.bytes.data() + piece.start, n);
            piece.start += n;
            s.delivered += n;
            if (piece.start == piece.bytes.size()) {
              s.pending_bytes -= piece.bytes.size();
              std::vector<uint8_t> buffer = std::move(piece.bytes);
              s.pending.erase(it);
              s.KeepSpare(std::move(buffer));
            }
            break;
          }
        }
        if (s.end && s.delivered >= *s.end) return size_t{0};
        s.CheckResumeTimeout(options_.resume_timeout);
        if (!s.failed.ok()) continue;
        s.cv.wait_for(lock, std::chrono::milliseconds(50));
      }
    }
    if (options_.progress) options_.progress(s.delivered);
    if (s.delivered - s.acked >= ack_every_) SendAck();
    return n;
  }

  std::string Describe() const override { return "sender " + session_->peer; }

  // The bases this session's sender was offered, if it asked.
  std::optional<BaseOffer> Offered() const {
    if (!session_->asks_bases) return std::nullopt;
    return session_->offer;  // fixed when the session started
  }

  // The stream's name: empty when the sender gave none, else waits for its
  // NAME message (the first on connection 0).
  Result<std::string> WaitForName() {
    Session& s = *session_;
    std::unique_lock lock(s.mu);
    if (!s.named) return std::string();
    for (;;) {
      if (!s.failed.ok()) return s.failed;
      if (s.name) return *s.name;
      s.CheckResumeTimeout(options_.resume_timeout);
      if (!s.failed.ok()) continue;
      s.cv.wait_for(lock, std::chrono::milliseconds(50));
    }
  }

  Status Finish(const Status& outcome) override {
    if (finished_) return Status::Ok();
    finished_ = true;
    Session& s = *session_;
    Status result = outcome;
    uint64_t delivered;
    {
      std::lock_guard lock(s.mu);
      if (result.ok() && !(s.end && s.delivered == *s.end))
        result = Status::Internal("the stream was reported consumed before its end");
      if (!result.ok()) s.Fail(result);
      s.finished = true;
      delivered = s.delivered;
    }
    std::shared_ptr<Channel> control = s.Control();
    Status told;
    if (control) {
      if (result.ok()) {
        told = control->Send(MsgType::kDone, delivered, {});
      } else {
        std::string text = result.ToString();
        told = control->Send(MsgType::kError, delivered, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
      }
    }
    // Let the sender read the verdict and close first: closing with its pings
    // unread would reset the connection under the verdict.
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, std::min<std::chrono::milliseconds>(options_.socket.io_timeout, std::chrono::seconds(5)),
                  [&] { return s.open_readers == 0; });
    s.DropConnections();
    return told;
  }

 private:
  void SendAck() {
    uint64_t delivered;
    {
      std::lock_guard lock(session_->mu);
      delivered = session_->delivered;
      session_->acked = delivered;
    }
    if (auto control = session_->Control()) (void)control->Send(MsgType::kAck, delivered, {});
  }

  std::shared_ptr<CoreOwner> owner_;
  std::shared_ptr<Session> session_;
  const NetOptions& options_;
  uint64_t ack_every_ = 1;
  bool finished_ = false;
  CleanupEntry interrupt_entry_;
};

class NetReceiverImpl final : public NetReceiver {
 public:
  explicit NetReceiverImpl(std::shared_ptr<CoreOwner> owner) : owner_(std::move(owner)) {}
  std::string uri() const override { return owner_->core->uri(); }
  Result<NetStream> AcceptStream(std::chrono::milliseconds timeout) override {
    VF_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, owner_->core->WaitForSession(timeout));
    auto source = std::make_unique<NetSource>(owner_, std::move(session));
    Result<std::string> name = source->WaitForName();
    if (!name.ok()) {
      (void)source->Finish(name.status());
      return Status::IoError(source->Describe() +
                             " failed before its stream's name arrived: " + name.status().message());
    }
    const std::string& expected = owner_->core->options().name;
    if (!expected.empty() && !name->empty() && *name != expected) {
      Status wrong = Status::InvalidArgument(source->Describe() + " sent the stream named " + Printable(*name) +
                                             ", but this receiver expects " + Printable(expected));
      (void)source->Finish(wrong);
      return wrong;
    }
    std::optional<BaseOffer> offered = source->Offered();
    return NetStream{std::move(source), std::move(*name), std::move(offered)};
  }
  void OfferBases(BaseOffer offer) override { owner_->core->OfferBases(std::move(offer)); }
  void Shutdown() override { owner_->core->Stop(); }

 private:
  std::shared_ptr<CoreOwner> owner_;
};

}  // namespace

Result<std::unique_ptr<NetReceiver>> NetReceiver::Listen(const Endpoint& endpoint, const NetOptions& options) {
  if (!endpoint.is_network()) return Status::InvalidArgument("'" + endpoint.uri + "' is not a network address");
  // A passed socket (systemd:) is TCP or UNIX, which decides TLS: taken first,
  // so that the credentials are checked for what it is.
  std::optional<Listener> passed;
  Endpoint security = endpoint;
  if (endpoint.kind == Endpoint::Kind::kSystemd) {
    VF_ASSIGN_OR_RETURN(passed, Listener::Open(endpoint, options.socket));
    security.kind = passed->is_unix() ? Endpoint::Kind::kUnix : Endpoint::Kind::kTcp;
    security.uri = endpoint.uri + " (" + passed->uri() + ")";
  }
  VF_ASSIGN_OR_RETURN(std::unique_ptr<TlsContext> tls, NetTlsContext(security, options, TlsContext::Role::kServer));
  if (!passed) {
    VF_ASSIGN_OR_RETURN(passed, Listener::Open(endpoint, options.socket, options.cleanup));
  }
  auto core =
      std::make_shared<Core>(std::move(*passed), options, std::move(tls), security.kind == Endpoint::Kind::kUnix);
  VF_RETURN_IF_ERROR(core->Start());
  auto owner = std::make_shared<CoreOwner>(core);
  return std::unique_ptr<NetReceiver>(new NetReceiverImpl(std::move(owner)));
}

}  // namespace vramflow
