// SPDX-License-Identifier: MIT
// `vramflow criu export-upstream DIR`: turns the amdgpu plugin images of a
// CRIU images directory from vramflow's layout into upstream CRIU's, so the
// checkpoint restores with upstream's amdgpu_plugin.so (a roll-back).
//
// Both layouts share the metadata: amdgpu-kfd-<id>.img is upstream's
// criu_kfd message either way, and amdgpu-renderD-<id>.img upstream's
// criu_render_node. They differ only in BO contents: vramflow keeps one
// chunk stream per GPU (amdgpu-vram-<id>-<gpu_id>.img, object "bo-<index>"
// per BO), upstream one raw file per GPU, amdgpu-pages-<id>-<gpu_id>.img:
//
//   offset 0  8 bytes  N, the sum of the sizes below (native-endian size_t)
//   offset 8  N bytes  every VRAM or GTT BO of that GPU, in the order of the
//                      image's bo_entries, back to back
//
// Upstream's restore (plugins/amdgpu/amdgpu_plugin.c, restore_bo_contents)
// opens this file for every device entry with a gpu_id, even one without
// BOs (N = 0), and fails on a missing file or a size that differs.
//
// The export runs in steps. (1) Every KFD image is read and every GPU's
// source found; nothing is written before. (2) Each GPU's stream is
// decoded with the restore graph (every checksum and hash verified, each
// object exactly one of the GPU's BOs, of its size) into a hidden temporary
// file in DIR, then synced. Memory stays within
// options.pipeline.max_memory, whatever the BO sizes. (3) Once all are
// complete, each is renamed to its final name; an existing pages file is
// replaced only with `force`. (4) Streams are kept unless `remove_streams`,
// and only then removed.
//
// The metadata images are left as they are: upstream reads them already.
// The BO `handle` fields are already GEM handles as upstream records them.
// VRAM streams that the dump sent elsewhere (VRAMFLOW_TARGET) or that sit
// inside a --stream checkpoint must first be put into DIR as files
// (`vramflow recv`, `criu-image-streamer extract`).
//
// Not thread-safe; one export per directory at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cleanup_registry.h"
#include "common/status.h"
#include "streamer/pipeline.h"

namespace vramflow {

struct ExportUpstreamOptions {
  std::string dir;              // the CRIU images directory
  bool force = false;           // replace existing amdgpu-pages files
  bool remove_streams = false;  // delete the converted amdgpu-vram streams at the end
  PipelineOptions pipeline;     // threads and memory budget of the decoding
  // Temporary pages files are registered here, to be removed if the process
  // is interrupted (common/cleanup_registry.h); nullptr: not registered.
  CleanupRegistry* cleanup = nullptr;
};

// One GPU of one KFD image.
struct ExportedGpu {
  std::string kfd_image;  // amdgpu-kfd-<id>.img
  uint32_t gpu_id = 0;    // as the image names it
  std::string pages;      // amdgpu-pages-<id>-<gpu_id>.img
  std::string stream;     // amdgpu-vram-<id>-<gpu_id>.img
  uint64_t bos = 0;       // VRAM/GTT BOs in the pages file
  uint64_t bytes = 0;     // their total size (the pages file is 8 bytes more)
  // False: there was no stream, only a pages file already (a checkpoint
  // dumped by upstream, or exported before); it was left as it is.
  bool written = false;
};

struct ExportUpstreamReport {
  std::vector<ExportedGpu> gpus;
  std::vector<std::string> removed;  // streams deleted (remove_streams)
};

// Exports every amdgpu-kfd-<id>.img in options.dir. Errors name the image,
// the GPU and the file: no KFD image in the directory, an unreadable or
// corrupt image, a GPU with neither a stream nor a pages file, a pages file
// that exists (without force), a corrupt or truncated stream, an I/O error.
// An error in steps 1 and 2 leaves no new file behind (temporary files are
// removed); one in step 3 (a pages file appeared meanwhile, a failed
// rename) leaves the pages files renamed before it, each complete and
// verified, and no stream is removed.
Status RunExportUpstream(const ExportUpstreamOptions& options, ExportUpstreamReport* report);

}  // namespace vramflow
