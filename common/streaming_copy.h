// SPDX-License-Identifier: MIT
// CopyAroundCache: memcpy for a destination the CPU will not read soon.
//
// The simulated GPU's rings copy restored chunks from host staging into BO
// memory, which stands in for VRAM: no CPU reads it during the restore. A
// plain memcpy first reads every destination cache line into the cache
// (read for ownership) and then evicts data the pipeline still needs. On
// x86-64, copies of 4 KiB and more use non-temporal stores, which write
// whole lines straight to memory: about twice as fast for 1 MiB copies into
// a memfd on the 2-core VM we measured, and the cache keeps the decoder's
// working set. Elsewhere, and for small copies, it is memcpy. Same contract
// as memcpy (no overlap).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vramflow {

void CopyAroundCache(uint8_t* dst, const uint8_t* src, size_t size);

}  // namespace vramflow
