// SPDX-License-Identifier: MIT
#include "common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/thread_start.h"
#include "common/units.h"

namespace vramflow {

ProgressStyle::Mode ProgressStyle::Auto() { return ::isatty(STDERR_FILENO) == 1 ? Mode::kBar : Mode::kLines; }

std::optional<ProgressStyle::Mode> ParseProgressMode(const std::string& text) {
  if (text == "auto") return ProgressStyle::Auto();
  if (text == "bar") return ProgressStyle::Mode::kBar;
  if (text == "lines") return ProgressStyle::Mode::kLines;
  if (text == "none") return ProgressStyle::Mode::kNone;
  return std::nullopt;
}

ProgressBar::ProgressBar(std::string label, uint64_t total, ProgressStyle style)
    : label_(std::move(label)),
      total_(total),
      style_(style),
      enabled_(static_cast<bool>(style)),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && style_.mode == ProgressStyle::Mode::kBar) Draw(last_done_, true);
}

void ProgressBar::Update(uint64_t done) {
  last_done_ = done;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (style_.mode == ProgressStyle::Mode::kLines) {
    if (now - last_draw_ < style_.interval) return;
    last_draw_ = now;
    DrawLine(done);
    return;
  }
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    Draw(done, false);
  } else {
    int quarter = total_ ? static_cast<int>(4 * done / total_) : 4;
    if (quarter > last_quarter_ && quarter < 4) {
      last_quarter_ = quarter;
      Draw(done, false);
    }
  }
}

void ProgressBar::DrawLine(uint64_t done) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;  // bytes per second
  if (total_ == 0) {
    std::fprintf(stderr, "%s: %s, %.1f MB/s\n", label_.c_str(), FormatSize(done).c_str(), rate / 1e6);
  } else {
    char eta[48] = "ETA -";
    if (rate > 0 && done <= total_)
      std::snprintf(eta, sizeof eta, "ETA %.0f s", static_cast<double>(total_ - done) / rate);
    std::fprintf(stderr, "%s: %s of %s (%.0f%%), %.1f MB/s, %s\n", label_.c_str(), FormatSize(done).c_str(),
                 FormatSize(total_).c_str(), 100.0 * static_cast<double>(done) / static_cast<double>(total_),
                 rate / 1e6, eta);
  }
  std::fflush(stderr);
}

void ProgressBar::Draw(uint64_t done, bool final) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (total_ == 0) {  // size unknown up front (a stream arriving): bytes and rate only
    std::fprintf(stderr, "%s%-8s %s  %.2f GB/s%s", tty_ ? "\r" : "", label_.c_str(), FormatSize(done).c_str(),
                 seconds > 0 ? static_cast<double>(done) / seconds / 1e9 : 0.0, (final || !tty_) ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  double fraction = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(fraction * kWidth + 0.5);
  std::string bar(static_cast<size_t>(std::min(filled, kWidth)), '#');
  bar.resize(kWidth, '.');
  double rate = seconds > 0 ? static_cast<double>(done) / seconds / 1e9 : 0;
  std::fprintf(stderr, "%s%-8s [%s] %3.0f%%  %s / %s  %.2f GB/s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
               fraction * 100, FormatSize(done).c_str(), FormatSize(total_).c_str(), rate,
               (final || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

namespace {
uint64_t StatusField(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == field) {
      uint64_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
    std::getline(f, key);
  }
  return 0;
}
}  // namespace

uint64_t CurrentRssAnonBytes() { return StatusField("RssAnon:"); }
uint64_t PeakRssBytes() { return StatusField("VmHWM:"); }

RssAnonSampler::RssAnonSampler() {
  peak_ = CurrentRssAnonBytes();
  status_ = StartThread(&thread_, "sampling memory use", [this] {
    while (!stop_.load()) {
      uint64_t now = CurrentRssAnonBytes();
      uint64_t peak = peak_.load();
      while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

RssAnonSampler::~RssAnonSampler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace vramflow
