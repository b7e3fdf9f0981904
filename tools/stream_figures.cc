// SPDX-License-Identifier: MIT
#include "tools/stream_figures.h"

namespace vramflow {

StreamFigures FiguresOf(const PipelineStats& stats) {
  StreamFigures figures;
  figures.objects = stats.objects;
  figures.raw_bytes = stats.raw_bytes;
  figures.stream_bytes = stats.stream_bytes;
  figures.zero_bytes = stats.zero_bytes;
  figures.dedup_bytes = stats.dedup_bytes;
  figures.base_ref_bytes = stats.base_ref_bytes;
  figures.base_delta_bytes = stats.base_delta_bytes;
  figures.seconds = stats.seconds;
  return figures;
}

}  // namespace vramflow
