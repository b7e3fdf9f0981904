// SPDX-License-Identifier: MIT
// The dump and restore pipelines: oneTBB flow graphs that move objects
// between devices and a chunk stream, overlapping DMA, codec work and I/O
// across every core, object, ring and device, inside one memory budget.
//
// Dump:    generate jobs -> (slot token) -> DMA read into staging
//          -> zero check + content hash (parallel) -> [in order] dedup
//          -> encode (parallel) -> [in order] write frames -> slot back
// Restore: (slot token) -> read + check frames (serial) -> decode + hash
//          check (parallel) -> DMA write into the BO -> slot back;
//          dedup references are copied device-side at the end.
//
// Every buffer comes from a fixed slot pool charged to the budget; a job
// holds a slot from entry to exit, so nothing queues without bound. The
// first error (sink, DMA, fence timeout, corrupt frame) stops the
// generator or reader, in-flight jobs drain without doing work, and that
// one error is returned. Output is deterministic for the same input and
// options.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "streamer/device/device.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/stream_validator.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct PipelineOptions {
  EncoderOptions encoder;
  uint32_t chunk_size = 1u << 20;
  // Every buffer of the pipeline together; 0 = fit to the machine
  // (streamer/pipeline_fit.h).
  uint64_t max_memory = 256ull << 20;
  // Worker threads; 0 = the CPUs this process may use (pipeline_fit.h). A
  // graph runs fewer when its budget cannot feed them, and says so in `note`.
  unsigned threads = 0;
  bool dedup = true;  // dump: identical chunks become references
  // Dump: how many of the latest DATA frames a reference may name (FORMAT.md
  // 4.6); 0 picks DefaultDedupWindow(max_memory). Never more than the dump's
  // chunks. Costs kDedupWindowEntryBytes per frame on each side.
  uint32_t dedup_window = 0;
  bool seek_index = true;  // dump: end with a seek index when the sink is Seekable()
  // Dump: the stream an incremental dump is built on (base_stream.h), or
  // null for a full stream. Chunks equal to the base's chunk at the same
  // place of the matched object become BASE_REFs; changed ones BASE_DELTAs
  // where smaller (docs/FORMAT.md 4.9 to 4.11).
  std::shared_ptr<const BaseStream> base;
  // Dump with a base: the location its BASE frame records, a hint for the
  // reader (relative paths are taken from the new stream's directory,
  // streamer/format/base_location.h); empty: the one the base was opened from.
  std::string base_location;
  // Dump with a base: match by the base's stored SHA-256 digests (the base
  // must have them), reading only the base chunks that become references,
  // to prove them; no deltas.
  bool base_refs_only = false;
  // Dump: write DIGEST_BLOCKs (FORMAT.md 4.12) so that the stream can be a
  // refs-only base later. Always on for a dump with a base.
  bool chunk_digests = false;
  // Restore: opens the base that the stream's BASE frame names (checking it
  // is that stream). Unset, an incremental stream fails: "needs its base".
  std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)> open_base;
  std::chrono::milliseconds dma_timeout{30000};
  std::string producer = "vramflow";
  // Called from a serial stage with the raw bytes done so far.
  std::function<void(uint64_t)> progress;
  // Called before the graph runs with one line for the user, when it runs
  // fewer threads than asked for because the budget cannot feed them.
  std::function<void(const std::string&)> note;
  // Dump and restore graphs: clock the CPU time of each serial stage's body
  // (PipelineStats::serial_stages), for `bench pipeline`. Off by default:
  // it reads the thread's CPU clock (a system call) twice per job.
  bool measure_serial_cpu = false;
};

// The CPU one serial stage of a graph used (user + system of the threads
// that ran its bodies, one at a time). A serial stage caps the graph at
// raw_bytes / cpu_seconds bytes a second, whatever the number of cores.
struct SerialStageCpu {
  std::string name;  // dump: "generate", "dedup", "write"; restore: "read", "account"
  double cpu_seconds = 0;
};

struct PipelineStats {
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;
  uint64_t stream_bytes = 0;
  uint64_t zero_bytes = 0;
  uint64_t dedup_bytes = 0;
  uint64_t data_chunks = 0;
  uint64_t base_ref_bytes = 0;    // raw bytes that are references to the base
  uint64_t base_delta_bytes = 0;  // raw bytes coded as deltas against the base
  // Restore: how many times dedup references were copied, in batches of at
  // most kMaxPendingReferences (each one waits for the graph to drain).
  uint64_t reference_batches = 0;
  uint64_t slots = 0;
  uint64_t budget_peak = 0;  // highest charge against the memory budget
  unsigned threads = 0;
  double seconds = 0;
  // Time spent in the graph's one serial stage that moves stream bytes: the
  // ordered frame writer of a dump (framing and the sink's writes), the
  // frame reader of a restore (the source's reads and parsing). Close to
  // `seconds`, that stage is the bottleneck and more threads cannot help.
  double serial_seconds = 0;
  // With PipelineOptions::measure_serial_cpu: each serial stage of the dump
  // or restore graph, in graph order; empty otherwise.
  std::vector<SerialStageCpu> serial_stages;
};

// One object to dump: a BO of `device`, imported by the caller.
struct DumpSource {
  Device* device = nullptr;
  uint32_t bo = 0;
  uint64_t size = 0;
  ObjectMetadata metadata;
};

// The dedup window a dump declares unless told otherwise: 65536 DATA frames
// (64 GiB of 1 MiB chunks), less where that would take more than an eighth of
// the memory budget.
uint32_t DefaultDedupWindow(uint64_t max_memory);

// Dumps `sources` as one stream into `sink` (not committed: the caller
// commits once this returns OK).
Status RunDump(const std::vector<DumpSource>& sources, ByteSink* sink, const PipelineOptions& options,
               PipelineStats* stats);

// A restore copies the ranges of DEDUP_REF frames from where the DATA frames
// they name were restored, once those have reached the device: it reads on
// until this many references wait, lets the graph drain, copies them, and
// goes on. Bounds what it holds (48 bytes each) whatever the stream's size.
inline constexpr size_t kMaxPendingReferences = 8192;

// Where one object of a stream is restored to.
struct RestoreTarget {
  Device* device = nullptr;
  uint32_t bo = 0;
  // The target already reads as zeros (a new file): zero runs are skipped.
  // GPU memory handed out by the driver is not known to be zero, so there
  // zero runs are written.
  bool zero_filled = false;
  // Bytes the resolver keeps for this object until the restore ends (its
  // records of files, names, ...). Charged, with the graph's own record of
  // the target, to the reader's record limit (an eighth of max_memory), so
  // that a stream of very many objects fails instead of outgrowing it.
  uint64_t kept_bytes = 0;
};
// Called (from the serial reader) for each OBJECT_BEGIN; every target's
// device must be in `devices` passed to RunRestore.
using RestoreResolver = std::function<Result<RestoreTarget>(const ObjectState& object)>;

// Called (from the serial reader) at each verified OBJECT_END, when the
// object's final size is known; its last bytes may still be in flight.
using ObjectEndHook = std::function<Status(const ObjectState& object)>;

// Restores a stream. Returns OK only when the stream was complete and
// intact and every byte of every object reached its device.
Status RunRestore(ByteSource* source, const std::vector<Device*>& devices, const RestoreResolver& resolve,
                  const PipelineOptions& options, PipelineStats* stats, const ObjectEndHook& on_object_end = {});

}  // namespace vramflow
