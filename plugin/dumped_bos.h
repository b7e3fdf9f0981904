// SPDX-License-Identifier: MIT
// DumpedBos: every BO a CRIU dump has saved so far, by GPU and GEM handle,
// so that a BO shared between processes through a dma-buf is noticed.
//
// The handles come from GpuBackend::GemHandle: the dumper's own DRM file
// per GPU gives one BO the same handle whichever process exported it, as
// upstream's plugin relies on. A BO that two KFD processes map (one exported
// it, the other imported it) would come back from KFD's RESTORE as two
// separate buffers, each process with its own copy: writes of one would no
// longer reach the other. vramflow does not restore such sharing, so the
// dump of the second process fails, naming both.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/status.h"

namespace vramflow {

class DumpedBos {
 public:
  // Records the BO `gem_handle` of GPU `gpu_id` (actual), described by
  // `what` ("BO 3 of process 42 at GPU VA 0x7f0000000000, 1.00 MiB");
  // NotSupported naming both when that BO was recorded before.
  Status Record(uint32_t gpu_id, uint32_t gem_handle, std::string what);

 private:
  std::map<std::pair<uint32_t, uint32_t>, std::string> seen_;
};

}  // namespace vramflow
