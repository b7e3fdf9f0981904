// SPDX-License-Identifier: MIT
// Moving one GPU's BO contents between its BOs and a stream: the plugin's
// data path, on top of the dump and restore graphs (streamer/pipeline.h).
//
// A GPU's BOs travel as one vramflow chunk stream (docs/FORMAT.md), one
// object per BO named "bo-<index>", where index is the BO's position among
// the KFD image's bo_entries. Restore also reads upstream's raw
// amdgpu-pages images (an 8-byte size, then every BO's bytes in image order).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/device/device.h"
#include "streamer/pipeline.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

// One BO with contents (VRAM or GTT).
struct VramBo {
  uint32_t index = 0;  // position among the image's bo_entries
  uint64_t size = 0;
  uint64_t addr = 0;   // GPU virtual address, kept in the stream for inspection
  int dmabuf_fd = -1;  // borrowed: KFD's dma-buf fd of the BO
};

// The stream object name of BO `index` ("bo-7").
std::string VramObjectName(uint32_t index);

// Dumps `bos` (all on `device`'s GPU) as one chunk stream into `sink` and
// commits it. A non-empty `dump_id` goes into every object's attributes
// (kDumpIdAttribute, plugin/kfd_file_list.h), binding the stream to its dump.
Status DumpVram(Device& device, uint32_t gpu_id, const std::vector<VramBo>& bos, ByteSink& sink,
                const PipelineOptions& options, PipelineStats* stats, const std::string& dump_id = "");

// Restores `bos` from a chunk stream that must hold exactly these objects,
// each of its BO's size; anything else (a missing, extra, repeated or
// resized BO, a corrupt or truncated stream) is an error naming the stream.
// With a non-empty `dump_id` (the metadata images' dump), every object must
// carry that dump id: a stream of another dump, or one without an id, is
// refused before any of its bytes reach a BO.
Status RestoreVram(Device& device, const std::vector<VramBo>& bos, ByteSource& source, const PipelineOptions& options,
                   PipelineStats* stats, const std::string& dump_id = "");

// RestoreVram into BOs the caller has already imported into `device`:
// handles[i] is bos[i]'s handle there (bos[i].dmabuf_fd is not used). The
// checks are RestoreVram's. `vramflow criu export-upstream` restores into
// byte ranges of a file this way (tools/criu_export.h).
Status RestoreVramInto(Device& device, const std::vector<VramBo>& bos, const std::vector<uint32_t>& handles,
                       ByteSource& source, const PipelineOptions& options, PipelineStats* stats,
                       const std::string& dump_id = "");

// Restores `bos` from an upstream amdgpu-pages image: its size header must
// equal the BOs' total and its bytes follow in `bos` order, nothing after.
// Double-buffered through `options.chunk_size` staging buffers.
Status RestoreRawPages(Device& device, const std::vector<VramBo>& bos, ByteSource& source,
                       const PipelineOptions& options);

}  // namespace vramflow
