// SPDX-License-Identifier: MIT
// The command lines (tools/command.h) of `vramflow send` and `vramflow recv`,
// which move a stream as it is between two transports (tools/transfer.h; recv
// --output-dir: tools/receive_dir.h), and of `vramflow keygen`, which makes
// the shared key both ends of the network use.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/transport_flags.h"
#include "tools/command.h"
#include "tools/transfer.h"

namespace vramflow {

// `vramflow send SOURCE DEST`: succeeds once the receiver has stored it all.
class SendCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "send"; }
  bool json() const override { return out_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  TransferOptions options_;
  TransportFlags net_;
  bool force_ = false;
  OutputFlags out_;
  FsyncFlags fsync_;
  std::string stream_name_;  // --name
};

// `vramflow recv --listen URI`: one stream to -o OUT, or streams into
// --output-dir DIR under their senders' names.
class RecvCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "recv"; }
  bool json() const override { return out_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  // --output-dir: every stream that arrives, until --count or a signal.
  Status RunIntoDirectory();
  // -o: the one stream.
  Status RunOne();

  CLI::App* cmd_ = nullptr;
  TransferOptions options_;
  TransportFlags net_;
  bool force_ = false;
  OutputFlags out_;
  FsyncFlags fsync_;
  std::string dir_;
  unsigned count_ = 0;
  std::string base_store_;
  MemoryFlag memory_;
};

// `vramflow keygen -o FILE`: a new random key, never over an existing file.
class KeygenCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "keygen"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  std::string output_;
};

}  // namespace vramflow
