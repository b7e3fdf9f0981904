#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/thread_start.h"
#include "common/units.h"

namespace vramflow {

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (enabled_) Draw(last_done_, true);
}

void ProgressBar::Update(uint64_t done) {
  last_done_ = done;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
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
