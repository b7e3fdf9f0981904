// SPDX-License-Identifier: MIT
#include "transport/net/net_sink.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/printable.h"
#include "common/thread_start.h"
#include "transport/net/deadline.h"
#include "transport/net/net_protocol.h"
#include "transport/net/net_security.h"
#include "transport/net/shared_key.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

using Clock = std::chrono::steady_clock;

// How long a broken generation's control connection may go on reading (for
// the receiver's ERROR) before the supervisor tears it down. A receiver that
// closed ends it at once; this bounds a silent network.
constexpr std::chrono::milliseconds kLastWordGrace{1000};

// A connection closed or reset (under a handshake: TLS, or the hello).
bool Cut(const Status& s) { return s.code() == Status::Code::kIoError || s.code() == Status::Code::kTruncated; }

// Failures worth a reconnect: the network, not the peer's judgement.
bool Transient(const Status& s) { return Cut(s) || s.code() == Status::Code::kTimedOut; }

// The wait before reconnect attempt `attempt` (1, 2, ...): 200 ms, doubling, at most 5 s.
std::chrono::milliseconds Backoff(unsigned attempt) {
  return std::chrono::milliseconds(std::min(200 << std::min(attempt - 1, 5u), 5000));
}

class NetSink final : public ByteSink {
 public:
  NetSink(Endpoint endpoint, NetOptions options) : endpoint_(std::move(endpoint)), options_(std::move(options)) {
    if (endpoint_.streams) options_.streams = endpoint_.streams;
    options_.streams = std::clamp(options_.streams, 1u, kMaxStreams);
    options_.segment_bytes = std::clamp<uint32_t>(options_.segment_bytes, 4096, kMaxSegmentBytes);
    options_.window_bytes = std::clamp<uint64_t>(options_.window_bytes, 2ull * options_.segment_bytes, 1ull << 30);
    ping_interval_ = std::max(options_.socket.io_timeout / 4, std::chrono::milliseconds(10));
  }

  ~NetSink() override {
    interrupt_entry_.Release();  // before mu_: an interrupt in progress holds it
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (supervisor_.joinable()) supervisor_.join();
    bool abort;
    {
      // The connections' loops may still set these (Broken, DONE).
      std::lock_guard lock(mu_);
      abort = !done_ && generation_alive_ && !generation_.channels.empty();
    }
    if (abort) {
      // Best effort: tell the receiver to discard what it has.
      (void)generation_.channels[0]->Send(MsgType::kAbort, position_, {});
    }
    TearDown();
  }

  Status Start() {
    VF_ASSIGN_OR_RETURN(tls_, NetTlsContext(endpoint_, options_, TlsContext::Role::kClient));
    VF_RETURN_IF_ERROR(RandomBytes(session_));
    uint64_t resume = 0;
    Status connected = Connect(&resume, /*resuming=*/false);
    // A receiver under load cuts off the handshakes that have waited longest
    // (NETWORK.md, "Limits before authentication"), which looks the same as
    // a receiver that does not speak our kind of handshake: try again, as
    // after a broken connection, before saying which it may be. The same
    // session and generation: the receiver replaces whichever of its
    // connections got through.
    unsigned attempts = 1;
    while (!connected.ok() && cut_in_handshake_ && attempts <= options_.retries) {
      std::this_thread::sleep_for(Backoff(attempts));
      ++attempts;
      connected = Connect(&resume, /*resuming=*/false);
    }
    if (!connected.ok() && cut_in_handshake_ && attempts > 1)
      return connected.WithContext("giving up after " + std::to_string(attempts) +
                                   " attempts, each cut off in its handshake");
    VF_RETURN_IF_ERROR(connected);
    if (resume != 0) return Status::Internal("a new session was asked to resume at " + std::to_string(resume));
    if (options_.ask_bases && options_.on_bases) options_.on_bases(offer_);
    VF_RETURN_IF_ERROR(StartThreads());
    Status started =
        StartThread(&supervisor_, "the supervisor of the transfer to " + endpoint_.uri, [this] { Supervise(); });
    if (!started.ok()) {
      StopThreads();
      return started;
    }
    interrupt_entry_ = CleanupEntry(
        options_.cleanup, [this] { TellInterrupted(); }, CleanupRegistry::Kind::kRemote);
    return Status::Ok();
  }

  Status Write(std::span<const uint8_t> data) override {
    if (end_requested_) return Status::Internal("write to committed " + Describe());
    while (!data.empty()) {
      if (current_.capacity() < options_.segment_bytes) TakeBuffer();
      size_t take = std::min<size_t>(data.size(), options_.segment_bytes - current_.size());
      current_.insert(current_.end(), data.begin(), data.begin() + take);
      data = data.subspan(take);
      if (current_.size() == options_.segment_bytes) VF_RETURN_IF_ERROR(Enqueue());
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (!current_.empty()) VF_RETURN_IF_ERROR(Enqueue());
    std::unique_lock lock(mu_);
    if (!fatal_.ok()) return fatal_;
    end_requested_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ || !fatal_.ok(); });
    return fatal_.ok() ? Status::Ok() : fatal_;
  }

  std::string Describe() const override { return "receiver " + endpoint_.uri; }
  // A receiver that stores the stream (its BASES said so) keeps it where it
  // can be read at any offset: the writer then ends it with its index.
  bool Seekable() const override { return offer_.stores; }

 private:
  struct Segment {
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
    uint64_t end() const { return offset + bytes.size(); }
  };
  struct Generation {
    std::vector<std::unique_ptr<Channel>> channels;
    std::vector<std::thread> threads;
  };

  // Reuses the buffer of an acknowledged segment when there is one: fresh
  // megabytes cost a page fault and a zeroed page per 4 KiB.
  void TakeBuffer() {
    {
      std::lock_guard lock(mu_);
      if (!spare_.empty()) {
        current_ = std::move(spare_.back());
        spare_.pop_back();
        current_.clear();
      }
    }
    current_.reserve(options_.segment_bytes);
  }

  // Hands the filled segment to the connections, waiting while the window
  // of unacknowledged bytes is full.
  Status Enqueue() {
    auto segment = std::make_shared<Segment>();
    segment->offset = position_;
    segment->bytes = std::move(current_);
    current_ = {};
    std::unique_lock lock(mu_);
    auto last_progress = Clock::now();
    uint64_t last_acked = acked_;
    while (fatal_.ok() && queued_bytes_ + segment->bytes.size() > window_) {
      cv_.wait_for(lock, ping_interval_);
      if (acked_ != last_acked || !generation_alive_) {
        last_acked = acked_;
        last_progress = Clock::now();
      } else if (Clock::now() - last_progress > options_.socket.io_timeout) {
        Fail(Status::TimedOut(Describe() + " acknowledged nothing for " + FormatSeconds(options_.socket.io_timeout) +
                              " with the window full: it stopped consuming the stream"));
      }
    }
    if (!fatal_.ok()) return fatal_;
    position_ += segment->bytes.size();
    queued_bytes_ += segment->bytes.size();
    segments_.push_back(std::move(segment));
    cv_.notify_all();
    return Status::Ok();
  }

  // Opens every connection of a new generation; `resume` gets the first byte
  // the receiver still needs.
  Status Connect(uint64_t* resume, bool resuming) {
    Generation generation;
    *resume = UINT64_MAX;
    cut_in_handshake_ = false;
    uint64_t granted = options_.window_bytes;
    for (unsigned i = 0; i < options_.streams; ++i) {
      std::string what = "connection " + std::to_string(i) + " to " + endpoint_.uri;
      VF_ASSIGN_OR_RETURN(std::unique_ptr<Connection> connection, Secure(what));
      ClientHello hello;
      if (resuming) hello.flags |= kHelloResume;
      if (!options_.name.empty()) hello.flags |= kHelloNamed;
      if (options_.ask_bases) hello.flags |= kHelloBases;
      hello.conn_index = static_cast<uint16_t>(i);
      hello.conn_count = static_cast<uint16_t>(options_.streams);
      hello.session = session_;
      hello.generation = static_cast<uint32_t>(generation_number_ + 1);
      hello.segment_bytes = options_.segment_bytes;
      hello.window_bytes = options_.window_bytes;
      Result<ClientConnection> handshake =
          ClientHandshake(std::move(connection), hello, options_.socket.io_timeout, what);
      if (!handshake.ok()) cut_in_handshake_ = Cut(handshake.status());
      if (!handshake.ok() && handshake.status().code() == Status::Code::kTruncated && !options_.name.empty() &&
          generation_number_ == 0) {
        // A receiver from before named streams closes the connection at
        // the hello's unknown flag without answering.
        return Status::NotSupported(handshake.status().message() +
                                    " (a receiver older than named streams closes the connection when a sender "
                                    "names its stream: update it, or send without a name)");
      }
      if (!handshake.ok() && !tls_ && endpoint_.kind == Endpoint::Kind::kTcp && generation_number_ == 0 &&
          (handshake.status().code() == Status::Code::kTruncated ||
           handshake.status().code() == Status::Code::kIoError)) {
        // A TLS receiver drops a plaintext hello, usually with a reset.
        return Status::Unauthenticated(handshake.status().message() +
                                       " (a receiver that requires TLS closes the connection at a plaintext hello: "
                                       "give the sender its key (--key-file) or a certificate (--cert, --key, --ca))");
      }
      if (!handshake.ok() && handshake.status().code() == Status::Code::kTruncated && options_.ask_bases &&
          generation_number_ == 0) {
        return Status::NotSupported(handshake.status().message() +
                                    " (a receiver older than base negotiation closes the connection when a sender "
                                    "asks for its bases: update it, or send without --base)");
      }
      VF_ASSIGN_OR_RETURN(ClientConnection conn, std::move(handshake));
      if (options_.ask_bases && i == 0) VF_RETURN_IF_ERROR(ReceiveOffer(*conn.channel));
      *resume = std::min(*resume, conn.resume_offset);
      granted = std::min<uint64_t>(granted, conn.window_bytes);
      generation.channels.push_back(std::move(conn.channel));
    }
    std::lock_guard lock(mu_);
    window_ = granted;  // the receiver may hold less than we would send
    generation_ = std::move(generation);
    generation_alive_ = true;
    generation_error_ = Status::Ok();
    ++generation_number_;
    return Status::Ok();
  }

  // Reads the receiver's BASES, the first message on connection 0 of every
  // generation when the sender asks. The first generation's is the offer;
  // a reconnect must hear the same one (the stream is built on it already).
  Status ReceiveOffer(Channel& channel) {
    VF_ASSIGN_OR_RETURN(MsgHeader header, channel.ReceiveHeader(kMaxOfferedBases * 32));
    std::vector<uint8_t> payload(header.length);
    VF_RETURN_IF_ERROR(channel.ReceivePayload(header, payload));
    if (header.type != MsgType::kBases) {
      if (header.type == MsgType::kError)
        return Status::IoError(Describe() + " failed: " + EscapedText(std::string(payload.begin(), payload.end())));
      return Status::Corruption(Describe() + " sent " + MsgTypeName(header.type) +
                                " where its BASES answer was due (the sender asked which bases it holds)");
    }
    Result<BaseOffer> offer = ParseBases(header.offset, payload);
    if (!offer.ok()) return offer.status().WithContext(Describe());
    if (generation_number_ == 0) {
      offer_ = std::move(*offer);
    } else if (!(*offer == offer_)) {
      return Status::Corruption(Describe() + " offered other bases on reconnecting than at the start");
    }
    return Status::Ok();
  }

  // The process is being interrupted: the receiver hears why (ERROR, which
  // ends its session) instead of waiting for data until it times out.
  void TellInterrupted() {
    std::lock_guard lock(mu_);  // keeps the generation's channels alive
    if (done_ || !generation_alive_ || generation_.channels.empty()) return;
    const std::string why = "the sender " + options_.cleanup->reason();
    (void)generation_.channels[0]->Send(MsgType::kError, position_,
                                        {reinterpret_cast<const uint8_t*>(why.data()), why.size()});
  }

  // A new connection, through TLS unless the endpoint needs none.
  Result<std::unique_ptr<Connection>> Secure(const std::string& what) {
    VF_ASSIGN_OR_RETURN(UniqueFd fd, ConnectStream(endpoint_, options_.socket));
    if (!tls_) return std::unique_ptr<Connection>(std::make_unique<PlainConnection>(std::move(fd)));
    auto tls = TlsConnection::Handshake(*tls_, std::move(fd), endpoint_.host, options_.socket.io_timeout,
                                        what + " (" + tls_->describe() + ")");
    if (!tls.ok()) {
      cut_in_handshake_ = Cut(tls.status());
      // A receiver without TLS drops the TLS hello (a reset when it leaves
      // some of it unread).
      if (cut_in_handshake_ && generation_number_ == 0)
        return Status::Unauthenticated(tls.status().message() +
                                       " (a receiver without TLS (--insecure) closes the connection at the TLS hello)");
      return tls.status();
    }
    if (options_.tls.ktls && options_.log) std::call_once(ktls_reported_, [&] { options_.log(DescribeKtls(**tls)); });
    return std::unique_ptr<Connection>(std::move(*tls));
  }

  // Starts a thread per connection and the control loop; when one cannot
  // start, ends those that did (StopThreads) and says why.
  Status StartThreads() {
    uint64_t number = generation_number_;
    const size_t connections = generation_.channels.size();
    for (size_t i = 0; i <= connections; ++i) {
      std::thread thread;
      Status s = i < connections ? StartThread(&thread, "connection " + std::to_string(i) + " to " + endpoint_.uri,
                                               [this, i, number] { SendLoop(i, number); })
                                 : StartControlThread(&thread, number);
      if (!s.ok()) {
        StopThreads();
        return s;
      }
      generation_.threads.push_back(std::move(thread));
    }
    return Status::Ok();
  }

  // The control loop says when it has ended, so that the supervisor can let
  // it read the receiver's last word before tearing a broken generation down.
  Status StartControlThread(std::thread* thread, uint64_t number) {
    {
      std::lock_guard lock(mu_);
      control_running_ = true;
    }
    Status s = StartThread(thread, "the control connection to " + endpoint_.uri, [this, number] {
      ControlLoop(number);
      std::lock_guard lock(mu_);
      control_running_ = false;
      cv_.notify_all();
    });
    if (!s.ok()) {
      std::lock_guard lock(mu_);
      control_running_ = false;
    }
    return s;
  }

  // Ends the current generation's loops (they see it is no longer alive)
  // and joins them.
  void StopThreads() {
    {
      std::lock_guard lock(mu_);
      generation_alive_ = false;
      cv_.notify_all();
    }
    TearDown();
  }

  // Shuts every connection of the current generation and joins its threads.
  void TearDown() {
    for (auto& channel : generation_.channels) channel->Shutdown();
    for (auto& t : generation_.threads)
      if (t.joinable()) t.join();
    std::lock_guard lock(mu_);
    generation_ = {};
    generation_alive_ = false;
  }

  // A connection of generation `number` failed.
  void Broken(uint64_t number, Status s) {
    std::lock_guard lock(mu_);
    if (number != generation_number_ || !generation_alive_) return;
    generation_alive_ = false;
    generation_error_ = std::move(s);
    cv_.notify_all();
  }

  void Fail(Status s) {
    if (fatal_.ok()) fatal_ = std::move(s);
    cv_.notify_all();
  }

  bool Quit(uint64_t number) const {
    return stop_ || !fatal_.ok() || number != generation_number_ || !generation_alive_;
  }

  // Sends unsent segments in order, and END once everything is sent.
  // Connection 0 of every generation opens with the stream's NAME, if any.
  void SendLoop(size_t index, uint64_t number) {
    Channel* channel = generation_.channels[index].get();
    if (index == 0 && !options_.name.empty()) {
      Status s = channel->Send(MsgType::kName, 0,
                               {reinterpret_cast<const uint8_t*>(options_.name.data()), options_.name.size()});
      if (!s.ok()) return Broken(number, std::move(s));
    }
    for (;;) {
      std::shared_ptr<Segment> segment;
      bool send_end = false;
      uint64_t total = 0;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] {
          return Quit(number) || next_ < first_index_ + segments_.size() ||
                 (index == 0 && end_requested_ && !end_sent_ && next_ == first_index_ + segments_.size());
        });
        if (Quit(number)) return;
        if (next_ < first_index_ + segments_.size()) {
          segment = segments_[next_ - first_index_];
          ++next_;
        } else {
          send_end = true;
          end_sent_ = true;
          total = position_;
        }
      }
      Status s = send_end ? channel->Send(MsgType::kEnd, total, {})
                          : channel->Send(MsgType::kData, segment->offset, segment->bytes);
      if (!s.ok()) return Broken(number, std::move(s));
    }
  }

  // Connection 0 carries the receiver's ACK, PING, DONE and ERROR messages.
  void ControlLoop(uint64_t number) {
    Channel* channel = generation_.channels[0].get();
    std::vector<uint8_t> payload;
    for (;;) {
      Result<MsgHeader> header = channel->ReceiveHeader(64 << 10);
      if (!header.ok()) return Broken(number, header.status());
      payload.resize(header->length);
      Status s = channel->ReceivePayload(*header, payload);
      if (!s.ok()) return Broken(number, std::move(s));
      std::lock_guard lock(mu_);
      if (number != generation_number_) return;
      switch (header->type) {
        case MsgType::kAck:
          Acknowledge(header->offset);
          break;
        case MsgType::kPing:
          break;
        case MsgType::kDone:
          if (header->offset != position_ || !end_requested_) {
            Fail(Status::Corruption(Describe() + " reported the stream complete at byte " +
                                    std::to_string(header->offset) + " but " + std::to_string(position_) +
                                    " bytes were written"));
          } else {
            Acknowledge(header->offset);
            done_ = true;
          }
          cv_.notify_all();
          return;
        case MsgType::kError:
          // The receiver's text, its control bytes escaped.
          Fail(Status::IoError(Describe() + " failed: " + EscapedText(std::string(payload.begin(), payload.end()))));
          return;
        default:
          Fail(Status::Corruption(Describe() + " sent an unexpected " + MsgTypeName(header->type) + " message"));
          return;
      }
    }
  }

  // Drops every segment the receiver has consumed. Caller holds mu_.
  void Acknowledge(uint64_t offset) {
    if (offset > position_) {
      Fail(Status::Corruption(Describe() + " acknowledged byte " + std::to_string(offset) + " of " +
                              std::to_string(position_) + " sent"));
      return;
    }
    acked_ = std::max(acked_, offset);
    while (!segments_.empty() && segments_.front()->end() <= acked_) {
      queued_bytes_ -= segments_.front()->bytes.size();
      // Keep the buffer for the next segment, unless a connection is still
      // sending it (a resend). The window bounds how many exist at once, so
      // keeping them all costs no more memory than a full window; freeing
      // them would cost a page fault and a zeroed page per 4 KiB on reuse.
      if (segments_.front().use_count() == 1) spare_.push_back(std::move(segments_.front()->bytes));
      segments_.pop_front();
      ++first_index_;
    }
    next_ = std::max(next_, first_index_);
    if (options_.progress) options_.progress(acked_);
    cv_.notify_all();
  }

  // Pings while things go well; reconnects and resends when a connection
  // breaks, up to options_.retries times.
  void Supervise() {
    unsigned failures = 0;
    for (;;) {
      bool alive;
      uint64_t position;  // Write()'s thread moves it on under mu_
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, ping_interval_, [&] { return stop_ || done_ || !fatal_.ok() || !generation_alive_; });
        if (stop_ || done_ || !fatal_.ok()) return;
        alive = generation_alive_;
        position = position_;
      }
      if (alive) {
        for (auto& channel : generation_.channels) (void)channel->Send(MsgType::kPing, position, {});
        continue;  // a failed ping shows up through the loops
      }
      {
        // A receiver that fails says why on the control connection and
        // closes: a data connection may break before that ERROR is read.
        // Let the control loop read to its end (bounded) before tearing down.
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, kLastWordGrace, [&] { return stop_ || !fatal_.ok() || !control_running_; });
        if (stop_ || !fatal_.ok()) return;
      }
      Status why = generation_error_;
      TearDown();
      for (;;) {
        if (!Transient(why) || failures >= options_.retries) {
          std::lock_guard lock(mu_);
          Fail(failures ? why.WithContext("giving up after " + std::to_string(failures) + " reconnects") : why);
          return;
        }
        ++failures;
        {
          std::unique_lock lock(mu_);
          if (cv_.wait_for(lock, Backoff(failures), [&] { return stop_; })) return;
        }
        uint64_t resume = 0;
        why = Connect(&resume, /*resuming=*/true);
        if (!why.ok()) continue;
        std::lock_guard lock(mu_);
        if (resume < acked_ || resume > position_) {
          Fail(Status::Corruption(Describe() + " asked to resume at byte " + std::to_string(resume) +
                                  " but acknowledged " + std::to_string(acked_) + " of " + std::to_string(position_)));
          return;
        }
        Acknowledge(resume);
        next_ = first_index_;  // resend everything unacknowledged; the receiver drops duplicates
        end_sent_ = false;
        break;
      }
      Status started = StartThreads();
      if (!started.ok()) {
        std::lock_guard lock(mu_);
        Fail(started);
        return;
      }
    }
  }

  Endpoint endpoint_;
  NetOptions options_;
  std::unique_ptr<TlsContext> tls_;  // tcp:// unless --insecure
  std::chrono::milliseconds ping_interval_;
  SessionId session_{};
  std::thread supervisor_;
  std::once_flag ktls_reported_;  // --ktls: whether it runs is logged once
  std::vector<uint8_t> current_;  // the segment being filled (Write's thread only)
  BaseOffer offer_;               // the receiver's BASES (ask_bases), set by the first Connect()

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Segment>> segments_;  // unacknowledged, in stream order
  uint64_t first_index_ = 0;                       // absolute number of segments_.front()
  uint64_t next_ = 0;                              // absolute number of the next segment to send
  uint64_t queued_bytes_ = 0;
  uint64_t window_ = 0;                      // granted by the receiver
  std::vector<std::vector<uint8_t>> spare_;  // buffers of acknowledged segments
  uint64_t position_ = 0;                    // stream bytes handed to segments_
  uint64_t acked_ = 0;
  bool end_requested_ = false;
  bool end_sent_ = false;
  bool done_ = false;
  bool stop_ = false;
  Status fatal_;
  Generation generation_;  // replaced only by the supervisor (or the destructor) with no loops running
  uint64_t generation_number_ = 0;
  bool cut_in_handshake_ = false;  // the last Connect() failed on a connection closed or reset in its handshake
  bool generation_alive_ = false;
  bool control_running_ = false;  // the current generation's ControlLoop has not returned
  Status generation_error_;
  CleanupEntry interrupt_entry_;  // last: released first, in the destructor
};

}  // namespace

Result<std::unique_ptr<ByteSink>> OpenNetSink(const Endpoint& endpoint, const NetOptions& options) {
  if (!endpoint.is_network()) return Status::InvalidArgument("'" + endpoint.uri + "' is not a network address");
  if (endpoint.kind == Endpoint::Kind::kTcp && (endpoint.host.empty() || endpoint.port == 0))
    return Status::InvalidArgument("'" + endpoint.uri + "': sending needs a host and a port");
  if (options.name.size() > kMaxStreamName)
    return Status::InvalidArgument("stream name of " + std::to_string(options.name.size()) + " bytes for " +
                                   endpoint.uri + " is longer than the " + std::to_string(kMaxStreamName) +
                                   " bytes the protocol allows");
  auto sink = std::make_unique<NetSink>(endpoint, options);
  VF_RETURN_IF_ERROR(sink->Start());
  return std::unique_ptr<ByteSink>(std::move(sink));
}

}  // namespace vramflow
