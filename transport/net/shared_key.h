// SPDX-License-Identifier: MIT
// The shared key of the network transports (--key-file, $VRAMFLOW_KEY_FILE,
// $VRAMFLOW_KEY): loading it with the same care ssh takes with private keys,
// and making new ones (`vramflow keygen`). tls.h turns it into a TLS 1.3
// pre-shared key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace vramflow {

struct SharedKey {
  std::vector<uint8_t> secret;  // at least kMinKeyBytes
  std::string origin;           // "key file 'k'", "VRAMFLOW_KEY": for messages
};
inline constexpr size_t kMinKeyBytes = 16;

// Reads a key file: its contents with trailing whitespace (a newline) removed.
// Refuses files shorter than kMinKeyBytes and files that group or others may
// read or write (like ssh does with private keys).
Result<SharedKey> LoadKeyFile(const std::string& path);

// The key to use: `key_file` if not empty, else the file named by
// $VRAMFLOW_KEY_FILE, else the secret in $VRAMFLOW_KEY; nullopt if none is set.
Result<std::optional<SharedKey>> ResolveKey(const std::string& key_file);

// A new random key as 64 hex characters (32 bytes of entropy).
Result<std::string> GenerateKeyText();

Status RandomBytes(std::span<uint8_t> out);

}  // namespace vramflow
