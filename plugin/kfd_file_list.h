// SPDX-License-Identifier: MIT
// The dump's KFD file list, amdgpu-vramflow-kfd-files.img: the CRIU file ids
// of every KFD file the dump saved, written at DUMP_DEVICES_LATE (after
// every task). At restore the main CRIU process reads it at plugin init to
// know how many KFD files the tasks will restore (plugin/restore_progress.h).
//
// Text, one line each: "vramflow kfd files 1", then the ids in decimal.
// Images without it (another plugin's, or a dump through a CRIU without
// DUMP_DEVICES_LATE) restore each task's BOs in the task.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plugin/image_store.h"

namespace vramflow {

inline constexpr char kKfdFileListImage[] = "amdgpu-vramflow-kfd-files.img";
// More KFD files than any process tree has (each is a process's /dev/kfd).
inline constexpr size_t kMaxKfdFiles = 1u << 16;

Status WriteKfdFileList(ImageStore& images, const std::vector<int>& ids);

// The ids, or nullopt when the images have no list; Corruption naming the
// line for a list that does not parse.
Result<std::optional<std::vector<int>>> ReadKfdFileList(ImageStore& images);

// The list's text as ReadKfdFileList parses it (exposed for tests and fuzzing).
Result<std::vector<int>> ParseKfdFileList(std::string_view text);

}  // namespace vramflow
