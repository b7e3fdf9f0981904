// SPDX-License-Identifier: MIT
// `vramflow completion bash|zsh`: the shell completion script, written from
// the CLI11 definition of the running program, so that every subcommand and
// option the parser accepts is completed and none it does not (nothing to
// keep in step by hand; the package installs the output of this).
//
// The script holds one table per command path ("", "pack", "bench codecs"):
// its subcommands, its options, and which options take a value (the word
// after one is a value, not a subcommand). Options of a parent that passes
// unknown options down (CLI11's fallthrough: `streamer capture -D DIR`)
// count for its subcommands too. Option groups are flattened into their
// command. Values themselves are completed as file names by the shell.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace vramflow {

// The script for `shell` ("bash" or "zsh") completing `program` (the
// command's name) from `app`'s tree; an empty string for any other shell.
std::string ShellCompletion(const CLI::App& app, const std::string& program, const std::string& shell);

}  // namespace vramflow
