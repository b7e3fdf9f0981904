// SPDX-License-Identifier: MIT
// Progress display and memory sampling for long-running CLI jobs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"

namespace vramflow {

// How a long job shows its progress on stderr (--progress, docs/CLI.md).
// Converts from a bool (true: auto) so that options kept as "progress on or
// off" still read naturally.
struct ProgressStyle {
  enum class Mode {
    kNone,   // nothing
    kBar,    // one line redrawn in place (a terminal)
    kLines,  // a new line every `interval`: bytes, rate, ETA; for logs
  };
  Mode mode = Mode::kNone;
  std::chrono::milliseconds interval{5000};  // kLines

  ProgressStyle() = default;
  ProgressStyle(bool on) : mode(on ? Auto() : Mode::kNone) {}  // NOLINT: implicit by design
  explicit ProgressStyle(Mode m, std::chrono::milliseconds every = std::chrono::milliseconds(5000))
      : mode(m), interval(every) {}
  explicit operator bool() const { return mode != Mode::kNone; }
  // kBar when stderr is a terminal, kLines otherwise.
  static Mode Auto();
};

// Parses --progress's value: auto, bar, lines or none; nullopt otherwise.
std::optional<ProgressStyle::Mode> ParseProgressMode(const std::string& text);

// Progress of one job on stderr. kBar: on a terminal it redraws in place at
// most ten times a second, elsewhere it prints a line every 25%. kLines: a
// line every interval, "LABEL: DONE of TOTAL (P%), RATE, ETA S s" (without
// the total, bytes and rate only), none at the end (the job's summary
// follows). With a total of 0 (not known up front) bytes and rate only.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, ProgressStyle style = ProgressStyle(true));
  ~ProgressBar();              // finishes the line
  void Update(uint64_t done);  // thread-compatible: call from one thread at a time

 private:
  void Draw(uint64_t done, bool final);
  void DrawLine(uint64_t done);
  std::string label_;
  uint64_t total_;
  ProgressStyle style_;
  bool enabled_;
  bool tty_;
  uint64_t last_done_ = 0;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Samples this process's anonymous resident memory (RssAnon: heap, stacks,
// private buffers; not file or shared-memory pages such as simulated VRAM)
// every few milliseconds on a background thread and keeps the peak. Without
// that thread (it could not be started: status()) the peak is the value at
// construction.
class RssAnonSampler {
 public:
  RssAnonSampler();
  ~RssAnonSampler();
  uint64_t peak_bytes() const { return peak_.load(); }
  const Status& status() const { return status_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> peak_{0};
  Status status_;
  std::thread thread_;
};

// Current RssAnon / VmHWM of this process from /proc/self/status (0 if unknown).
uint64_t CurrentRssAnonBytes();
uint64_t PeakRssBytes();

}  // namespace vramflow
