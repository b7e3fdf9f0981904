// SPDX-License-Identifier: MIT
#include "tools/pipeline_bench.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "common/progress.h"
#include "common/units.h"
#include "sim/gpu/sim_process.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/thread_cpu.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

struct Run {
  unsigned threads = 0;
  PipelineStats dump;
  PipelineStats restore;
  uint64_t dump_rss_anon = 0;
  uint64_t restore_rss_anon = 0;
  CpuUse dump_cpu;
  CpuUse restore_cpu;
};

Status MeasureOnce(const std::vector<SimBoSpec>& layout, SimProcess& original, const SimDeviceOptions& device_options,
                   const PipelineOptions& pipeline, const std::string& path, Run* run) {
  // The last run's stream goes first: replacing it at commit would free its
  // pages inside this run's CPU figures.
  ::unlink(path.c_str());
  {
    VF_ASSIGN_OR_RETURN(std::vector<DumpSource> sources, original.DumpSources());
    FileSinkOptions sink_options;
    sink_options.overwrite = true;
    // With N threads the payloads are written on N threads of the sink's,
    // out of the ordered write stage, which then only frames and copies
    // headers (its CPU caps the dump on many cores: serial stages, below).
    sink_options.writer_threads = pipeline.threads;
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenFileSink(path, sink_options));
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    VF_ASSIGN_OR_RETURN(CpuUse before, ProcessCpuUse());
    VF_RETURN_IF_ERROR(RunDump(sources, sink.get(), pipeline, &run->dump).WithContext("dump"));
    VF_RETURN_IF_ERROR(sink->Commit());
    VF_ASSIGN_OR_RETURN(CpuUse after, ProcessCpuUse());
    run->dump_cpu = after - before;
    run->dump_rss_anon = rss.peak_bytes();
  }
  SimProcess restored(static_cast<uint32_t>(original.devices().size()), device_options);
  VF_RETURN_IF_ERROR(restored.Allocate(layout));
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenFileSource(path));
  {
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    VF_ASSIGN_OR_RETURN(CpuUse before, ProcessCpuUse());
    VF_RETURN_IF_ERROR(RunRestore(source.get(), restored.devices(), restored.Resolver(), pipeline, &run->restore)
                           .WithContext("restore"));
    VF_ASSIGN_OR_RETURN(CpuUse after, ProcessCpuUse());
    run->restore_cpu = after - before;
    run->restore_rss_anon = rss.peak_bytes();
  }
  // Against the source process's bytes, which the dump only read: as strict
  // as regenerating them from the specs, and a fraction of the time.
  return restored.Compare(original).WithContext("verify");
}

// The bench's simulated BOs: the demo's model layout, or one zero-filled BO per GPU.
Result<std::vector<SimBoSpec>> BenchLayout(const PipelineBenchOptions& options) {
  std::vector<SimBoSpec> layout;
  if (options.layout == "model") {
    layout = DemoLayout(options.gpus, options.bytes_per_gpu);
  } else if (options.layout == "zeros") {
    for (uint32_t g = 0; g < options.gpus; ++g)
      layout.push_back({"gpu" + std::to_string(g) + "/zeros", g, options.bytes_per_gpu, DataKind::kZeros, 0});
  } else {
    return Status::InvalidArgument("unknown layout '" + options.layout + "' (use model or zeros)");
  }
  return layout;
}

// The simulated devices' options: --dma-cpus, each a CPU of this machine.
Result<SimDeviceOptions> BenchDeviceOptions(const PipelineBenchOptions& options) {
  SimDeviceOptions device_options;
  const long cpus_configured = ::sysconf(_SC_NPROCESSORS_CONF);
  for (int cpu : options.dma_cpus)
    if (cpu < 0 || cpu >= cpus_configured)
      return Status::InvalidArgument("--dma-cpus: no CPU " + std::to_string(cpu) + " on this machine (0.." +
                                     std::to_string(cpus_configured - 1) + ")");
  device_options.ring_cpus = options.dma_cpus;
  return device_options;
}

// --export-raw: every BO's bytes, one after another, for the peer tools.
Status ExportRaw(SimProcess& process, size_t bos, const std::string& path) {
  FileSinkOptions sink_options;
  sink_options.overwrite = true;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenFileSink(path, sink_options));
  for (size_t i = 0; i < bos; ++i) VF_RETURN_IF_ERROR(sink->Write(process.bytes(i)));
  return sink->Commit();
}

// Where the stream goes: --work-dir, else /dev/shm where writable, else $TMPDIR or /tmp.
std::string BenchWorkDir(const PipelineBenchOptions& options) {
  if (!options.work_dir.empty()) return options.work_dir;
  const char* tmp = std::getenv("TMPDIR");
  return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp && *tmp ? tmp : "/tmp");
}

// Keeps in `best` the faster dump and the faster restore of `run` and `best`
// (`first`: `best` holds nothing yet).
void KeepBest(const Run& run, bool first, Run* best) {
  if (first || run.dump.seconds < best->dump.seconds) {
    best->dump = run.dump;
    best->dump_rss_anon = run.dump_rss_anon;
    best->dump_cpu = run.dump_cpu;
  }
  if (first || run.restore.seconds < best->restore.seconds) {
    best->restore = run.restore;
    best->restore_rss_anon = run.restore_rss_anon;
    best->restore_cpu = run.restore_cpu;
  }
}

// The best of --repeat runs with 1 thread (unless --no-scaling) and with N:
// one Run per thread count, in that order.
Result<std::vector<Run>> MeasureBest(const std::vector<SimBoSpec>& layout, SimProcess& original,
                                     const SimDeviceOptions& device_options, const PipelineBenchOptions& options,
                                     const std::string& path) {
  std::vector<unsigned> thread_counts;
  unsigned threads = options.pipeline.threads ? options.pipeline.threads : std::thread::hardware_concurrency();
  if (options.single_thread_too && threads > 1) thread_counts.push_back(1);
  thread_counts.push_back(threads);
  // The thread counts take turns, run by run, so that a machine whose speed
  // drifts (other tenants, clocks) affects them alike and the scaling figure
  // compares like with like.
  std::vector<Run> runs(thread_counts.size());
  for (unsigned i = 0; i < std::max(1u, options.repeat); ++i) {
    for (size_t k = 0; k < thread_counts.size(); ++k) {
      PipelineOptions pipeline = options.pipeline;
      pipeline.threads = thread_counts[k];
      pipeline.producer = ProducerString();
      pipeline.measure_serial_cpu = true;  // the serial stages' CPU, for their bounds
      Run run;
      VF_RETURN_IF_ERROR(MeasureOnce(layout, original, device_options, pipeline, path, &run));
      KeepBest(run, i == 0, &runs[k]);
      runs[k].threads = thread_counts[k];
    }
  }
  return runs;
}

double Gbps(uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0; }

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr unsigned kBoundCores[] = {16, 64, 128};

// CPU seconds per GiB of raw bytes.
double PerGib(double seconds, uint64_t raw_bytes) {
  return raw_bytes ? seconds / (static_cast<double>(raw_bytes) / kGiB) : 0.0;
}
// The throughput (GB/s, decimal) that `cores` cores give at `s_per_gib` CPU
// seconds per GiB; 0 where nothing was measured.
double BoundGbps(double s_per_gib, unsigned cores = 1) { return s_per_gib > 0 ? cores * kGiB / s_per_gib / 1e9 : 0.0; }

// One graph's CPU per GiB: the whole process's, the simulated rings' part,
// and each serial stage's; what is left is the parallel stages' (and
// oneTBB's, the DMA completers', the main thread's).
struct GraphCpu {
  const char* graph;
  double total = 0, dma = 0, serial = 0;  // CPU s per GiB
  std::vector<SerialStageCpu> stages;     // cpu_seconds per GiB
  double without_dma() const { return std::max(0.0, total - dma); }
  double parallel() const { return std::max(0.0, without_dma() - serial); }
  // The graph's bound on `cores` cores: the lower of the parallel stages'
  // and every serial stage's.
  std::pair<double, std::string> Bound(unsigned cores) const {
    std::pair<double, std::string> bound{BoundGbps(parallel(), cores), "parallel"};
    for (const SerialStageCpu& s : stages)
      if (s.cpu_seconds > 0 && BoundGbps(s.cpu_seconds) < bound.first) bound = {BoundGbps(s.cpu_seconds), s.name};
    return bound;
  }
};

GraphCpu GraphCpuOf(const char* graph, const PipelineStats& stats, const CpuUse& cpu) {
  GraphCpu g;
  g.graph = graph;
  g.total = PerGib(cpu.total_seconds, stats.raw_bytes);
  g.dma = PerGib(cpu.dma_ring_seconds, stats.raw_bytes);
  for (const SerialStageCpu& s : stats.serial_stages) {
    g.stages.push_back({s.name, PerGib(s.cpu_seconds, stats.raw_bytes)});
    g.serial += g.stages.back().cpu_seconds;
  }
  return g;
}

// A graph's CPU per GiB for the JSON report: the totals, each serial stage
// and its bound, and the graph's bounds on 16, 64 and 128 cores.
nlohmann::ordered_json GraphCpuJson(const GraphCpu& g) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const SerialStageCpu& s : g.stages)
    stages.push_back({{"stage", s.name}, {"cpu_s_per_gib", s.cpu_seconds}, {"bound_gbps", BoundGbps(s.cpu_seconds)}});
  nlohmann::ordered_json bounds = nlohmann::ordered_json::object();
  for (unsigned cores : kBoundCores) {
    const auto [gbps, limit] = g.Bound(cores);
    bounds[std::to_string(cores)] = {{"gbps", gbps}, {"limited_by", limit}};
  }
  return {{"cpu_s_per_gib", g.total},
          {"dma_cpu_s_per_gib", g.dma},
          {"cpu_s_per_gib_without_dma", g.without_dma()},
          {"gib_per_s_per_core", g.without_dma() > 0 ? 1.0 / g.without_dma() : 0.0},
          {"gib_per_s_per_core_with_dma", g.total > 0 ? 1.0 / g.total : 0.0},
          {"serial_stages", stages},
          {"parallel_cpu_s_per_gib", g.parallel()},
          {"bounds_on_cores", bounds}};
}

// The heading, then one line of throughput, ratio and memory per run; the
// same figures (and the CPU ones) as the JSON report's "runs".
nlohmann::ordered_json PrintThroughput(const PipelineBenchOptions& options, uint64_t raw_bytes, const std::string& dir,
                                       const std::vector<Run>& runs, std::ostream& out) {
  char line[200];
  out << "vramflow pipeline on " << options.gpus << " simulated GPUs, layout " << options.layout << ", "
      << FormatSize(raw_bytes) << " of VRAM, codec " << DescribeOptions(options.pipeline.encoder) << ", budget "
      << FormatSize(options.pipeline.max_memory) << ", stream in " << dir << "; best of "
      << std::max(1u, options.repeat) << " runs\n";
  if (!options.dma_cpus.empty()) {
    std::string list;
    for (int cpu : options.dma_cpus) {
      if (!list.empty()) list += ',';
      list += std::to_string(cpu);
    }
    out << "the simulated rings run on CPU " << list
        << " only (--dma-cpus): their copies cost the pipeline's CPUs "
           "nothing, as with SDMA\n";
  }
  std::snprintf(line, sizeof(line), "%-8s %10s %10s %8s %12s %12s %14s %14s\n", "threads", "dump", "restore", "ratio",
                "dedup", "zero", "rss-anon dump", "rss-anon rest.");
  out << line;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Run& r : runs) {
    std::snprintf(line, sizeof(line), "%-8u %5.2f GB/s %5.2f GB/s %8s %12s %12s %14s %14s\n", r.threads,
                  Gbps(r.dump.raw_bytes, r.dump.seconds), Gbps(r.restore.raw_bytes, r.restore.seconds),
                  FormatRatio(r.dump.raw_bytes, r.dump.stream_bytes).c_str(), FormatSize(r.dump.dedup_bytes).c_str(),
                  FormatSize(r.dump.zero_bytes).c_str(), FormatSize(r.dump_rss_anon).c_str(),
                  FormatSize(r.restore_rss_anon).c_str());
    out << line;
    rows.push_back({{"threads", r.threads},
                    {"raw_bytes", r.dump.raw_bytes},
                    {"stream_bytes", r.dump.stream_bytes},
                    {"dump_seconds", r.dump.seconds},
                    {"restore_seconds", r.restore.seconds},
                    {"dump_gbps", Gbps(r.dump.raw_bytes, r.dump.seconds)},
                    {"restore_gbps", Gbps(r.restore.raw_bytes, r.restore.seconds)},
                    {"dedup_bytes", r.dump.dedup_bytes},
                    {"zero_bytes", r.dump.zero_bytes},
                    {"dump_rss_anon", r.dump_rss_anon},
                    {"restore_rss_anon", r.restore_rss_anon},
                    {"budget_peak", std::max(r.dump.budget_peak, r.restore.budget_peak)},
                    {"dump_cpu_seconds", r.dump_cpu.total_seconds},
                    {"dump_dma_cpu_seconds", r.dump_cpu.dma_ring_seconds},
                    {"restore_cpu_seconds", r.restore_cpu.total_seconds},
                    {"restore_dma_cpu_seconds", r.restore_cpu.dma_ring_seconds},
                    {"dump_writer_seconds", r.dump.serial_seconds},
                    {"restore_reader_seconds", r.restore.serial_seconds},
                    {"dump_cpu", GraphCpuJson(GraphCpuOf("dump", r.dump, r.dump_cpu))},
                    {"restore_cpu", GraphCpuJson(GraphCpuOf("restore", r.restore, r.restore_cpu))}});
  }
  return rows;
}

// Where the CPU went: the simulated device's DMA rings copy with CPU
// threads (real SDMA would not), and they run beside the worker threads.
void PrintCpu(const std::vector<Run>& runs, std::ostream& out) {
  char line[200];
  out << "CPU seconds (user + system) of the fastest runs; DMA: the simulated rings' copy threads, which real SDMA "
         "does not need\n";
  out << "and how busy each graph's serial stage was (dump: the ordered writer; restore: the frame reader)\n";
  std::snprintf(line, sizeof(line), "%-8s %10s %10s %10s %8s %12s %10s %10s %8s\n", "threads", "dump CPU", "of it DMA",
                "cores busy", "writer", "restore CPU", "of it DMA", "cores busy", "reader");
  out << line;
  auto percent = [](double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
  for (const Run& r : runs) {
    std::snprintf(line, sizeof(line), "%-8u %10.2f %10.2f %10.2f %7.0f%% %12.2f %10.2f %10.2f %7.0f%%\n", r.threads,
                  r.dump_cpu.total_seconds, r.dump_cpu.dma_ring_seconds, r.dump_cpu.cores_busy(),
                  percent(r.dump.serial_seconds, r.dump.seconds), r.restore_cpu.total_seconds,
                  r.restore_cpu.dma_ring_seconds, r.restore_cpu.cores_busy(),
                  percent(r.restore.serial_seconds, r.restore.seconds));
    out << line;
  }
}

// CPU per GiB of every run, with and without the simulated rings' copies,
// and the throughput per core that implies.
void PrintCpuPerGib(const std::vector<Run>& runs, std::ostream& out) {
  char line[200];
  out << "CPU seconds per GiB of VRAM (user + system); DMA: of it the simulated rings' copies; per core: GiB/s "
         "one core gives\nwithout them (1 / CPU s per GiB less DMA), as with SDMA, which costs the host no CPU\n";
  std::snprintf(line, sizeof(line), "%-8s %10s %10s %10s %10s %13s %10s %10s %10s\n", "threads", "dump s/GiB",
                "of it DMA", "less DMA", "per core", "restore s/GiB", "of it DMA", "less DMA", "per core");
  out << line;
  for (const Run& r : runs) {
    const GraphCpu d = GraphCpuOf("dump", r.dump, r.dump_cpu), x = GraphCpuOf("restore", r.restore, r.restore_cpu);
    auto per_core = [](double s) { return s > 0 ? 1.0 / s : 0.0; };
    std::snprintf(line, sizeof(line), "%-8u %10.3f %10.3f %10.3f %5.2f GiB/s %13.3f %10.3f %10.3f %5.2f GiB/s\n",
                  r.threads, d.total, d.dma, d.without_dma(), per_core(d.without_dma()), x.total, x.dma,
                  x.without_dma(), per_core(x.without_dma()));
    out << line;
  }
}

// The serial stages of the run with the most threads: each one's CPU per
// GiB and the throughput it caps the graph at, then each graph's bound on
// 16, 64 and 128 cores (the parallel stages' cores / CPU s per GiB, or a
// serial stage's, whichever is lower).
void PrintSerialStages(const Run& r, std::ostream& out) {
  char line[200];
  out << "serial stages (" << r.threads
      << "-thread run): each caps its graph at 1 / its CPU s per GiB, whatever the cores\n";
  std::snprintf(line, sizeof(line), "%-8s %-10s %12s %14s\n", "graph", "stage", "CPU s/GiB", "bound");
  out << line;
  const GraphCpu graphs[] = {GraphCpuOf("dump", r.dump, r.dump_cpu), GraphCpuOf("restore", r.restore, r.restore_cpu)};
  for (const GraphCpu& g : graphs)
    for (const SerialStageCpu& s : g.stages) {
      std::snprintf(line, sizeof(line), "%-8s %-10s %12.4f %9.1f GB/s\n", g.graph, s.name.c_str(), s.cpu_seconds,
                    BoundGbps(s.cpu_seconds));
      out << line;
    }
  out << "bounds on many cores, without the rings' copies (parallel: the rest of the CPU, spread over the cores)\n";
  std::snprintf(line, sizeof(line), "%-8s %14s %22s %22s %22s\n", "graph", "parallel s/GiB", "16 cores", "64 cores",
                "128 cores");
  out << line;
  for (const GraphCpu& g : graphs) {
    std::string cells;
    for (unsigned cores : kBoundCores) {
      const auto [gbps, limit] = g.Bound(cores);
      char cell[64];
      std::snprintf(cell, sizeof(cell), " %8.1f GB/s (%s)", gbps, limit.c_str());
      cells += cell;
    }
    std::snprintf(line, sizeof(line), "%-8s %14.3f%s\n", g.graph, g.parallel(), cells.c_str());
    out << line;
  }
}

// With a 1-thread run and an N-thread one: the speed-up, and the room the
// N-thread run's CPU costs leave on `cpus` CPUs; the JSON report's "scaling"
// (null without the 1-thread run).
nlohmann::ordered_json PrintScaling(const std::vector<Run>& runs, unsigned cpus, std::ostream& out) {
  if (runs.size() != 2) return nullptr;
  char line[200];
  // With N threads on `cpus` CPUs a run takes about its CPU seconds /
  // cpus, so the 1-thread time over that estimates the scaling these CPU
  // costs leave room for; without the rings' CPU, with hardware DMA. An
  // estimate, not a bound: the CPU window also holds oneTBB's workers
  // spinning before they sleep, which the graph's own clock does not.
  const Run& one = runs[0];
  const Run& many = runs[1];
  auto room = [&](double one_seconds, double cpu_seconds) {
    return cpu_seconds > 0 ? one_seconds * cpus / cpu_seconds : 0.0;
  };
  const double dump_x = one.dump.seconds / many.dump.seconds;
  const double restore_x = one.restore.seconds / many.restore.seconds;
  const double dump_room = room(one.dump.seconds, many.dump_cpu.total_seconds);
  const double restore_room = room(one.restore.seconds, many.restore_cpu.total_seconds);
  const double dump_room_hw = room(one.dump.seconds, many.dump_cpu.total_seconds - many.dump_cpu.dma_ring_seconds);
  const double restore_room_hw =
      room(one.restore.seconds, many.restore_cpu.total_seconds - many.restore_cpu.dma_ring_seconds);
  std::snprintf(line, sizeof(line), "scaling 1 -> %u threads: dump x%.2f, restore x%.2f\n", many.threads, dump_x,
                restore_x);
  out << line;
  std::snprintf(line, sizeof(line),
                "  room these CPU costs leave on %u CPUs (1-thread seconds x CPUs / N-thread CPU seconds, "
                "approximate): dump x%.2f, restore x%.2f; without the rings' copying (hardware DMA): dump x%.2f, "
                "restore x%.2f\n",
                cpus, dump_room, restore_room, dump_room_hw, restore_room_hw);
  out << line;
  return {{"threads", many.threads},
          {"usable_cpus", cpus},
          {"dump", dump_x},
          {"restore", restore_x},
          {"dump_cpu_estimate", dump_room},
          {"restore_cpu_estimate", restore_room},
          {"dump_cpu_estimate_without_dma", dump_room_hw},
          {"restore_cpu_estimate_without_dma", restore_room_hw}};
}

// --json: the options, every run's figures and the scaling, to options.json_path.
Status WriteJsonReport(const PipelineBenchOptions& options, uint64_t raw_bytes, const nlohmann::ordered_json& rows,
                       const nlohmann::ordered_json& scaling) {
  nlohmann::ordered_json j = {{"gpus", options.gpus},
                              {"layout", options.layout},
                              {"raw_bytes", raw_bytes},
                              {"max_memory", options.pipeline.max_memory},
                              {"chunk_size", options.pipeline.chunk_size},
                              {"dma_cpus", options.dma_cpus},
                              {"runs", rows},
                              {"scaling", scaling}};
  std::ofstream f(options.json_path);
  f << j.dump(2) << "\n";
  if (!f) return Status::IoError("writing '" + options.json_path + "'");
  return Status::Ok();
}

}  // namespace

Status RunPipelineBench(const PipelineBenchOptions& options, std::ostream& out) {
  VF_ASSIGN_OR_RETURN(std::vector<SimBoSpec> layout, BenchLayout(options));
  VF_ASSIGN_OR_RETURN(SimDeviceOptions device_options, BenchDeviceOptions(options));
  SimProcess original(options.gpus, device_options);
  VF_RETURN_IF_ERROR(original.Allocate(layout));
  original.Fill();
  if (!options.export_raw.empty()) VF_RETURN_IF_ERROR(ExportRaw(original, layout.size(), options.export_raw));

  const std::string dir = BenchWorkDir(options);
  const std::string path = dir + "/vramflow-bench-" + std::to_string(::getpid()) + ".vfs";
  struct RemoveTemp {
    std::string path;
    ~RemoveTemp() { ::unlink(path.c_str()); }
  } remove_temp{path};
  VF_ASSIGN_OR_RETURN(std::vector<Run> runs, MeasureBest(layout, original, device_options, options, path));

  const nlohmann::ordered_json rows = PrintThroughput(options, original.total_bytes(), dir, runs, out);
  const unsigned cpus = UsableCpus();
  PrintCpu(runs, out);
  PrintCpuPerGib(runs, out);
  PrintSerialStages(runs.back(), out);
  const nlohmann::ordered_json scaling = PrintScaling(runs, cpus, out);
  if (!options.json_path.empty()) VF_RETURN_IF_ERROR(WriteJsonReport(options, original.total_bytes(), rows, scaling));
  return Status::Ok();
}

}  // namespace vramflow
