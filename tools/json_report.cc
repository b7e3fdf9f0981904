// SPDX-License-Identifier: MIT
#include "tools/json_report.h"

#include <cstdio>

#include "common/printable.h"
#include "tools/cli/exit_status.h"

namespace vramflow {
namespace {

// An error's message as a JSON string can hold it: a message can quote a
// path or a peer's bytes that are not UTF-8 (they are then escaped).
std::string MessageText(const Status& status) {
  return IsValidUtf8(status.message()) ? status.message() : EscapedText(status.message());
}

}  // namespace

nlohmann::json JsonSuccess(const std::string& command) {
  return nlohmann::json{{"schema_version", kJsonSchemaVersion}, {"command", command}, {"ok", true}};
}

nlohmann::json JsonFailure(const std::string& command, const Status& status, int exit_code) {
  nlohmann::json j{{"schema_version", kJsonSchemaVersion}, {"command", command}, {"ok", false}};
  j["exit_code"] = exit_code;
  j["error"] = {{"code", CodeName(status.code())}, {"message", MessageText(status)}};
  return j;
}

nlohmann::ordered_json JsonReportHead(const std::string& command, const Status& status) {
  nlohmann::ordered_json j{{"schema_version", kJsonSchemaVersion}, {"command", command}, {"ok", status.ok()}};
  if (status.ok()) return j;
  j["exit_code"] = ExitStatusFor(status);
  j["error"] = {{"code", CodeName(status.code())}, {"message", MessageText(status)}};
  return j;
}

void PutFigures(const StreamFigures& figures, unsigned fields, nlohmann::json* j) {
  nlohmann::json& report = *j;
  report["objects"] = figures.objects;
  report["raw_bytes"] = figures.raw_bytes;
  report["seconds"] = figures.seconds;
  if (fields & kStreamBytesField) report["stream_bytes"] = figures.stream_bytes;
  if (fields & kSavingsFields) {
    report["zero_bytes"] = figures.zero_bytes;
    report["dedup_bytes"] = figures.dedup_bytes;
  }
  if (fields & kBaseFields) {
    report["base_ref_bytes"] = figures.base_ref_bytes;
    report["base_delta_bytes"] = figures.base_delta_bytes;
    report["new_bytes"] = figures.NewBytes();
  }
}

nlohmann::json PackJson(const PackReport& report, const std::string& output) {
  nlohmann::json j = JsonSuccess("pack");
  j["output"] = output;
  PutFigures(report, kStreamBytesField | kSavingsFields | (report.incremental ? kBaseFields : 0u), &j);
  j["legacy_images"] = report.legacy_images;
  j["sequential"] = report.sequential;
  if (report.incremental) j["base_id"] = report.base_id;
  return j;
}

nlohmann::json UnpackJson(const UnpackReport& report, const std::string& input, const std::string& output) {
  nlohmann::json j = JsonSuccess("unpack");
  j["input"] = input;
  j["output"] = output;
  PutFigures(report, report.through_index ? kStreamBytesField : 0u, &j);
  j["through_index"] = report.through_index;
  if (report.through_index) {
    j["bytes_read"] = report.bytes_read;
    j["stream_objects"] = report.stream_objects;
  }
  j["written"] = report.written;
  return j;
}

nlohmann::json VerifyJson(const VerifyReport& report, const std::string& input) {
  nlohmann::json j = JsonSuccess("verify");
  j["input"] = input;
  PutFigures(report, kStreamBytesField, &j);
  j["frames"] = report.frames;
  return j;
}

nlohmann::json TransferJson(const std::string& command, const TransferReport& report, const std::string& source,
                            const std::string& destination) {
  nlohmann::json j = JsonSuccess(command);
  j["input"] = source;
  j["output"] = destination;
  j["peer"] = report.peer;
  j["stream_bytes"] = report.bytes;
  j["seconds"] = report.seconds;
  return j;
}

nlohmann::json ReceiveDirJson(const ReceiveDirReport& report, const std::string& listen, const std::string& dir) {
  nlohmann::json j = JsonSuccess("recv");
  j["input"] = listen;
  j["output"] = dir;
  j["streams"] = report.stored;
  j["failed_streams"] = report.failed;
  j["stream_bytes"] = report.bytes;
  return j;
}

void PrintJson(const nlohmann::json& report) {
  // A path given on the command line may not be UTF-8 either: such bytes
  // become U+FFFD rather than abort the report.
  std::string text = report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fprintf(stdout, "%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace vramflow
