// SPDX-License-Identifier: MIT
#include "transport/core/byte_stream.h"

namespace vramflow {

Result<size_t> ReadFully(ByteSource& source, std::span<uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    VF_ASSIGN_OR_RETURN(size_t n, source.Read(data.subspan(done)));
    if (n == 0) break;
    done += n;
  }
  return done;
}

}  // namespace vramflow
