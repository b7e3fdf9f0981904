// SPDX-License-Identifier: MIT
#include "plugin/kfd_file_list.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace vramflow {
namespace {

constexpr std::string_view kHeaderV1 = "vramflow kfd files 1";
constexpr std::string_view kHeaderV2 = "vramflow kfd files 2";
constexpr std::string_view kDumpIdPrefix = "dump-id ";
constexpr size_t kDumpIdDigits = 32;
// Header, dump id, ids of at most 10 digits, newlines: a larger image is not ours.
constexpr size_t kMaxListBytes = kHeaderV2.size() + kDumpIdPrefix.size() + kDumpIdDigits + 2 + kMaxKfdFiles * 12;

Status LineError(size_t line_no, const std::string& what) {
  return Status::Corruption(std::string(kKfdFileListImage) + ": line " + std::to_string(line_no) + " " + what);
}

// One file id line (line_no counts from 1) into `ids`.
Status ParseId(std::string_view line, size_t line_no, std::vector<int>* ids) {
  int id = -1;
  auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), id);
  if (ec != std::errc() || ptr != line.data() + line.size() || id < 0) return LineError(line_no, "is not a file id");
  if (ids->size() == kMaxKfdFiles)
    return Status::Corruption(std::string(kKfdFileListImage) + ": more than " + std::to_string(kMaxKfdFiles) + " ids");
  if (std::find(ids->begin(), ids->end(), id) != ids->end())
    return LineError(line_no, "repeats id " + std::to_string(id));
  ids->push_back(id);
  return Status::Ok();
}

}  // namespace

std::string NewDumpId() {
  uint64_t random[2] = {};
  if (::getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    // getrandom without GRND_NONBLOCK fails only on a kernel without it: time, pid and an address.
    random[0] = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    random[1] = (static_cast<uint64_t>(::getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&random);
  }
  char text[kDumpIdDigits + 1];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(random[0]),
                static_cast<unsigned long long>(random[1]));
  return text;
}

bool IsDumpId(std::string_view id) {
  return id.size() == kDumpIdDigits &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Status WriteKfdFileList(ImageStore& images, const KfdFileList& list) {
  if (!list.dump_id.empty() && !IsDumpId(list.dump_id))
    return Status::Internal("dump id '" + list.dump_id + "' is not 32 lowercase hex digits");
  std::string text(list.dump_id.empty() ? kHeaderV1 : kHeaderV2);
  text += '\n';
  if (!list.dump_id.empty()) text += std::string(kDumpIdPrefix) + list.dump_id + '\n';
  for (int id : list.ids) text += std::to_string(id) + '\n';
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, images.Create(kKfdFileListImage));
  VF_RETURN_IF_ERROR(sink->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return sink->Commit().WithContext(kKfdFileListImage);
}

Result<std::optional<KfdFileList>> ReadKfdFileList(ImageStore& images) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, images.Open(kKfdFileListImage));
  if (!source) return std::optional<KfdFileList>();
  std::string text;
  uint8_t buf[4096];
  for (;;) {
    VF_ASSIGN_OR_RETURN(size_t n, source->Read(buf));
    if (n == 0) break;
    text.append(reinterpret_cast<const char*>(buf), n);
    if (text.size() > kMaxListBytes)
      return Status::Corruption(std::string(kKfdFileListImage) + ": larger than " + std::to_string(kMaxListBytes) +
                                " bytes");
  }
  VF_ASSIGN_OR_RETURN(KfdFileList list, ParseKfdFileList(text));
  return std::optional<KfdFileList>(std::move(list));
}

Result<KfdFileList> ParseKfdFileList(std::string_view text) {
  KfdFileList list;
  size_t line_no = 0;
  bool v2 = false;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) return LineError(line_no + 1, "does not end");
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line_no == 1) {
      v2 = line == kHeaderV2;
      if (!v2 && line != kHeaderV1)
        return Status::Corruption(std::string(kKfdFileListImage) + ": does not start with '" + std::string(kHeaderV2) +
                                  "' or '" + std::string(kHeaderV1) + "'");
    } else if (line_no == 2 && v2) {
      if (line.substr(0, kDumpIdPrefix.size()) != kDumpIdPrefix || !IsDumpId(line.substr(kDumpIdPrefix.size())))
        return LineError(line_no, "is not 'dump-id' and 32 lowercase hex digits");
      list.dump_id = std::string(line.substr(kDumpIdPrefix.size()));
    } else {
      VF_RETURN_IF_ERROR(ParseId(line, line_no, &list.ids));
    }
  }
  if (line_no == 0) return Status::Corruption(std::string(kKfdFileListImage) + ": empty");
  if (v2 && list.dump_id.empty()) return LineError(2, "is missing: a version 2 list names its dump");
  return list;
}

}  // namespace vramflow
