// SPDX-License-Identifier: MIT
#include "common/streaming_copy.h"

#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace vramflow {

void CopyAroundCache(uint8_t* dst, const uint8_t* src, size_t size) {
#if defined(__x86_64__)
  constexpr size_t kMinStreamingSize = 4096;  // below this, the setup is not worth it
  if (size >= kMinStreamingSize) {
    // Streaming stores need a 16-byte aligned destination: copy up to it.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    size -= head;
    size_t i = 0;
    for (; i + 64 <= size; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    // Streaming stores are weakly ordered: fence them before whoever signals
    // completion (a fence, a mutex) makes the bytes visible to others.
    _mm_sfence();
    std::memcpy(dst + i, src + i, size - i);
    return;
  }
#endif
  std::memcpy(dst, src, size);
}

}  // namespace vramflow
