// SPDX-License-Identifier: MIT
// The dump's KFD file list, amdgpu-vramflow-kfd-files.img: the CRIU file ids
// of every KFD file the dump saved, written at DUMP_DEVICES_LATE (after
// every task). At restore the main CRIU process reads it at plugin init to
// know how many KFD files the tasks will restore (plugin/restore_progress.h).
//
// It also names the dump: every dump gets a random 128-bit id (NewDumpId),
// recorded here, in each KFD image (CriuKfd.vramflow_dump_id) and in every
// object of every VRAM stream it writes (attribute kDumpIdAttribute), so
// that a restore refuses a stream of another dump (docs/PLUGIN.md, "Streams
// of another dump").
//
// Text, one line each: "vramflow kfd files 2", "dump-id " and the id in 32
// lowercase hex digits, then the file ids in decimal. Version 1 (an older
// vramflow's) has no dump-id line and is still read. Images without a list
// (another plugin's, or a dump through a CRIU without DUMP_DEVICES_LATE)
// restore each task's BOs in the task.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plugin/image_store.h"

namespace vramflow {

inline constexpr char kKfdFileListImage[] = "amdgpu-vramflow-kfd-files.img";
// More KFD files than any process tree has (each is a process's /dev/kfd).
inline constexpr size_t kMaxKfdFiles = 1u << 16;

// The stream object attribute that names the dump a VRAM stream belongs to.
inline constexpr char kDumpIdAttribute[] = "dump-id";

// A fresh dump id: 128 random bits as 32 lowercase hex digits.
std::string NewDumpId();
// Whether `id` has that form.
bool IsDumpId(std::string_view id);

struct KfdFileList {
  std::vector<int> ids;  // CRIU file ids of the dump's KFD files
  std::string dump_id;   // empty in a version 1 list
};

// Writes version 2 when `list.dump_id` is set (it must be IsDumpId), else 1.
Status WriteKfdFileList(ImageStore& images, const KfdFileList& list);

// The list, or nullopt when the images have no list; Corruption naming the
// line for a list that does not parse.
Result<std::optional<KfdFileList>> ReadKfdFileList(ImageStore& images);

// The list's text as ReadKfdFileList parses it (exposed for tests and fuzzing).
Result<KfdFileList> ParseKfdFileList(std::string_view text);

}  // namespace vramflow
