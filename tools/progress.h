// Progress display and memory sampling for long-running CLI jobs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "common/status.h"

namespace vramflow {

// A one-line progress bar on stderr. On a terminal it redraws in place at
// most ten times a second; otherwise it prints a line every 25%. With a total
// of 0 (not known up front) it shows bytes and rate only.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, bool enabled = true);
  ~ProgressBar();  // finishes the line
  void Update(uint64_t done);  // thread-compatible: call from one thread at a time

 private:
  void Draw(uint64_t done, bool final);
  std::string label_;
  uint64_t total_;
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
