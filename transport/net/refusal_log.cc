// SPDX-License-Identifier: MIT
#include "transport/net/refusal_log.h"

#include <cstdio>

namespace vramflow {

RefusalLog::RefusalLog(std::function<void(const std::string&)> log, std::string prefix,
                       std::chrono::milliseconds interval)
    : log_(std::move(log)), prefix_(std::move(prefix)), interval_(interval) {}

void RefusalLog::Refused(const std::string& why) {
  if (!log_) return;
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  FlushLocked(now, /*force=*/false);
  if (logged_any_ && now - last_line_ < interval_) {
    ++unlogged_;
    latest_ = why;
    return;
  }
  log_(prefix_ + why);
  logged_any_ = true;
  last_line_ = now;
}

void RefusalLog::Flush(bool force) {
  if (!log_) return;
  std::lock_guard lock(mu_);
  FlushLocked(Clock::now(), force);
}

void RefusalLog::FlushLocked(Clock::time_point now, bool force) {
  if (unlogged_ == 0 || (!force && now - last_line_ < interval_)) return;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s", std::chrono::duration<double>(now - last_line_).count());
  log_(prefix_ + std::to_string(unlogged_) + " more connection" + (unlogged_ == 1 ? "" : "s") +
       " refused in the last " + seconds + "; the latest: " + latest_);
  unlogged_ = 0;
  latest_.clear();
  last_line_ = now;
}

}  // namespace vramflow
