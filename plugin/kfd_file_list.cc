// SPDX-License-Identifier: MIT
#include "plugin/kfd_file_list.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

namespace vramflow {
namespace {

constexpr std::string_view kHeader = "vramflow kfd files 1";
// Header, ids of at most 10 digits, newlines: a larger image is not ours.
constexpr size_t kMaxListBytes = kHeader.size() + 1 + kMaxKfdFiles * 12;

}  // namespace

Status WriteKfdFileList(ImageStore& images, const std::vector<int>& ids) {
  std::string text(kHeader);
  text += '\n';
  for (int id : ids) text += std::to_string(id) + '\n';
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, images.Create(kKfdFileListImage));
  VF_RETURN_IF_ERROR(sink->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return sink->Commit().WithContext(kKfdFileListImage);
}

Result<std::optional<std::vector<int>>> ReadKfdFileList(ImageStore& images) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, images.Open(kKfdFileListImage));
  if (!source) return std::optional<std::vector<int>>();
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
  VF_ASSIGN_OR_RETURN(std::vector<int> ids, ParseKfdFileList(text));
  return std::optional<std::vector<int>>(std::move(ids));
}

Result<std::vector<int>> ParseKfdFileList(std::string_view text) {
  std::vector<int> ids;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos)
      return Status::Corruption(std::string(kKfdFileListImage) + ": line " + std::to_string(line_no + 1) +
                                " does not end");
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line_no++ == 0) {
      if (line != kHeader)
        return Status::Corruption(std::string(kKfdFileListImage) + ": does not start with '" + std::string(kHeader) +
                                  "'");
      continue;
    }
    int id = -1;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), id);
    if (ec != std::errc() || ptr != line.data() + line.size() || id < 0)
      return Status::Corruption(std::string(kKfdFileListImage) + ": line " + std::to_string(line_no) +
                                " is not a file id");
    if (ids.size() == kMaxKfdFiles)
      return Status::Corruption(std::string(kKfdFileListImage) + ": more than " + std::to_string(kMaxKfdFiles) +
                                " ids");
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      return Status::Corruption(std::string(kKfdFileListImage) + ": line " + std::to_string(line_no) + " repeats id " +
                                std::to_string(id));
    ids.push_back(id);
  }
  if (line_no == 0) return Status::Corruption(std::string(kKfdFileListImage) + ": empty");
  return ids;
}

}  // namespace vramflow
