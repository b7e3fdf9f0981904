// SPDX-License-Identifier: MIT
// Parsing and printing of byte sizes ("64M", "1.5GiB") and hex numbers for
// options and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace vramflow {

// Accepts a plain number of bytes or a number with a binary suffix:
// K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all powers of 1024), case-insensitive.
Result<uint64_t> ParseSize(std::string_view text);

// "1.50 GiB", "512 B".
std::string FormatSize(uint64_t bytes);

// "0x1a2b": addresses, gpu_ids and flags in messages.
std::string Hex(uint64_t v);

}  // namespace vramflow
