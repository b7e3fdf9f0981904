// SPDX-License-Identifier: MIT
// The one JSON object that `--json` prints on stdout at the end of pack,
// unpack, verify, send, recv, inspect and demo (docs/CLI.md, "Machine output"): the same
// field names for the same quantities in every command, and a
// schema_version that changes only when a field changes meaning or goes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "tools/inspect.h"
#include "tools/pack.h"
#include "tools/receive_dir.h"
#include "tools/stream_figures.h"
#include "tools/transfer.h"
#include "tools/unpack.h"

namespace vramflow {

constexpr int kJsonSchemaVersion = 1;

// {"schema_version": 1, "command": COMMAND, "ok": true}: what every report
// starts from.
nlohmann::json JsonSuccess(const std::string& command);
// {"schema_version", "command", "ok": false, "exit_code", "error": {"code",
// "message"}}: a failed job's report.
nlohmann::json JsonFailure(const std::string& command, const Status& status, int exit_code);

// The same leading fields, in that order, for the reports that keep their
// own field order (inspect, demo): JsonSuccess's when `status` is OK,
// JsonFailure's (with ExitStatusFor(status)) when not.
nlohmann::ordered_json JsonReportHead(const std::string& command, const Status& status);

// Which of a report's StreamFigures its JSON states besides objects,
// raw_bytes and seconds, which every one states: those the command knows.
enum FigureFields : unsigned {
  kStreamBytesField = 1u << 0,  // stream_bytes
  kSavingsFields = 1u << 1,     // zero_bytes, dedup_bytes
  kBaseFields = 1u << 2,        // base_ref_bytes, base_delta_bytes, new_bytes
};
// Puts `figures` into the report `j` under the names every command uses.
void PutFigures(const StreamFigures& figures, unsigned fields, nlohmann::json* j);

nlohmann::json PackJson(const PackReport& report, const std::string& output);
nlohmann::json UnpackJson(const UnpackReport& report, const std::string& input, const std::string& output);
nlohmann::json VerifyJson(const VerifyReport& report, const std::string& input);
// send and recv: the stream's bytes moved, from where to where.
nlohmann::json TransferJson(const std::string& command, const TransferReport& report, const std::string& source,
                            const std::string& destination);
nlohmann::json ReceiveDirJson(const ReceiveDirReport& report, const std::string& listen, const std::string& dir);

// Writes `report` and a newline to stdout, and flushes.
void PrintJson(const nlohmann::json& report);

}  // namespace vramflow
