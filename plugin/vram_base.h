// SPDX-License-Identifier: MIT
// The base of a GPU's VRAM stream (VRAMFLOW_BASE, docs/PLUGIN.md): an
// incremental dump codes each GPU's stream against the stream of the same
// image name in an earlier checkpoint, and its restore reads the base's
// chunks that the new stream refers to.
//
// The base of a stream is found by its image name (amdgpu-vram-<id>-<gpu>.img)
// under the VRAMFLOW_BASE pattern (ImageLocation, as VRAMFLOW_TARGET); each
// stream holds one GPU, so within it the base's GPU buffers are matched by
// virtual address and size (gpu ordinal 0). A base that cannot be opened,
// or is not the one an incremental stream was built on, is an error naming
// VRAMFLOW_BASE and the location: the dump or restore fails rather than go
// on without it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "plugin/plugin_options.h"
#include "streamer/format/base_stream.h"

namespace vramflow {

// The location of stream `stream_name`'s base under options.base.
Result<std::string> VramBaseLocation(const PluginOptions& options, const std::string& stream_name);

// Dump: an error when options.base names the very place the dump writes
// stream `stream_name` to (`written`: ImageStore::Location; "" is never the
// same): the dump would replace its own base (a second dump into the same
// directory replaces its images). OK when options.base is unset.
Status RefuseBaseAsTarget(const PluginOptions& options, const std::string& written, const std::string& stream_name);

// Dump: opens the base of stream `stream_name` (options.base must be set).
Result<std::shared_ptr<const BaseStream>> OpenVramBase(const PluginOptions& options, const std::string& stream_name);

// Restore: PipelineOptions::open_base for stream `stream_name`: the base at
// VRAMFLOW_BASE when set, else where the stream's BASE frame says; either
// way it must be the stream the BASE frame names.
OpenBaseFn VramBaseOpener(const PluginOptions& options, const std::string& stream_name);

}  // namespace vramflow
