// SPDX-License-Identifier: MIT
#include "tools/demo.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "common/owner_tag.h"
#include "common/progress.h"
#include "common/units.h"
#include "sim/gpu/sim_process.h"
#include "sim/gpu/training_step.h"
#include "streamer/base/base_opener.h"
#include "streamer/base/base_store.h"
#include "streamer/budget_plan.h"
#include "streamer/pipeline_fit.h"
#include "tools/cli/cli_util.h"
#include "tools/json_report.h"
#include "transport/core/fd_stream.h"
#include "transport/core/uri.h"
#include "transport/net/net_source.h"

namespace vramflow {

namespace {

bool IsLocalFile(const std::string& uri) {
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  return endpoint.ok() && endpoint->kind == Endpoint::Kind::kPath;
}

bool IsS3(const std::string& uri) {
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  return endpoint.ok() && endpoint->kind == Endpoint::Kind::kS3;
}

double Gbps(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }

// "2.51 GB/s (0.43 s)": `bytes` moved in `seconds`.
std::string Rate(uint64_t bytes, double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f GB/s (%.2f s)", Gbps(bytes, seconds), seconds);
  return text;
}

// One "  NAME  VALUE" line of the text report.
void Row(std::ostream& out, const char* name, const std::string& value) {
  char line[64];
  std::snprintf(line, sizeof line, "  %-28s ", name);
  out << line << value << "\n";
}

// The JSON report's fields that say what ran: after the head, before the
// run's own.
nlohmann::ordered_json JsonShape(const DemoOptions& options, size_t bos, const PipelineOptions& pipeline,
                                 const DemoReport& report) {
  return nlohmann::ordered_json{{"gpus", options.gpus},
                                {"bos", bos},
                                {"threads", report.threads},
                                {"codec", DescribeOptions(pipeline.encoder)},
                                {"chunk_size", pipeline.chunk_size},
                                {"max_memory", pipeline.max_memory}};
}

// The JSON report's timings and memory, after the run's own fields.
nlohmann::ordered_json JsonTimings(const DemoReport& report) {
  return nlohmann::ordered_json{{"dump_seconds", report.seconds},
                                {"restore_seconds", report.restore_seconds},
                                {"dump_gbps", Gbps(report.raw_bytes, report.seconds)},
                                {"restore_gbps", Gbps(report.raw_bytes, report.restore_seconds)},
                                {"dump_peak_rss_anon", report.dump_peak_anon},
                                {"restore_peak_rss_anon", report.restore_peak_anon},
                                {"budget_peak", report.budget_peak}};
}

// The report's figures from the dump and the restore that ran.
void TakeFigures(const PipelineStats& dump, const PipelineStats& restore, DemoReport* report) {
  static_cast<StreamFigures&>(*report) = FiguresOf(dump);
  report->restore_seconds = restore.seconds;
  report->budget_peak = std::max(dump.budget_peak, restore.budget_peak);
  report->threads = dump.threads;
}

double Ratio(const DemoReport& report) {
  return report.stream_bytes ? static_cast<double>(report.raw_bytes) / report.stream_bytes : 0.0;
}

// The receiving half of a live migration: fresh simulated GPUs of the same
// layout, filled from the network as frames arrive, then checked.
Status RunDemoReceiver(const DemoOptions& options, const SimDeviceOptions& device_options, std::ostream& out,
                       DemoReport* report) {
  std::vector<SimBoSpec> layout = DemoLayout(options.gpus, options.bytes_per_gpu);
  SimProcess restored(options.gpus, device_options);
  VF_RETURN_IF_ERROR(restored.Allocate(layout));
  PipelineOptions pipeline = options.pipeline;
  TransportOptions transport = options.transport;
  const BudgetPlan budget = PlanPipelineBudget(&pipeline, options.listen, &transport);
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(options.listen));
  if (!endpoint.is_network()) return Status::InvalidArgument("--listen needs tcp://HOST:PORT, unix:PATH or systemd:");
  VF_ASSIGN_OR_RETURN(pipeline.open_base, OfferStore(options.base_store, {}, /*stores=*/false, &transport,
                                                     StderrLog("demo"), budget.base_index));
  VF_ASSIGN_OR_RETURN(std::unique_ptr<NetReceiver> receiver, NetReceiver::Listen(endpoint, transport.net));
  std::string security = endpoint.kind == Endpoint::Kind::kUnix ? "unix socket, mode 0600"
                         : receiver->uri().starts_with("unix:") ? "unix socket (passed by systemd)"
                         : transport.net.insecure               ? "no TLS (--insecure)"
                         : transport.net.tls.key                ? "TLS, shared key " + transport.net.tls.key->origin
                                                                : "TLS, certificate " + transport.net.tls.cert_file;
  std::fprintf(stderr, "waiting on %s for a sender (%u GPUs, %s of VRAM to restore; %s)\n", receiver->uri().c_str(),
               options.gpus, FormatSize(restored.total_bytes()).c_str(), security.c_str());
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, receiver->Accept(transport.accept_timeout));
  PipelineStats restore;
  Status status = [&]() -> Status {
    ProgressBar bar("receive", restored.total_bytes(), options.progress);
    pipeline.progress = [&](uint64_t done) { bar.Update(done); };
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    VF_RETURN_IF_ERROR(
        RunRestore(source.get(), restored.devices(), restored.Resolver(), pipeline, &restore).WithContext("restore"));
    bar.Update(restore.raw_bytes);
    report->restore_peak_anon = rss.peak_bytes();
    return restored.VerifyAgainstSpecs().WithContext("verify");
  }();
  Status told = source->Finish(status);
  VF_RETURN_IF_ERROR(status);
  VF_RETURN_IF_ERROR(told.WithContext("restored and verified, but telling the sender failed"));
  report->raw_bytes = restore.raw_bytes;
  report->restore_seconds = restore.seconds;
  report->budget_peak = restore.budget_peak;
  report->threads = restore.threads;
  report->restored_here = true;
  char line[256];
  std::snprintf(line, sizeof(line),
                "\nvramflow demo --listen: restored %s into %u simulated GPUs from %s in %.2f s (%.2f GB/s, "
                "transfer and restore overlapped), peak RSS private %s; every byte of every BO matches\n",
                FormatSize(restore.raw_bytes).c_str(), options.gpus, source->Describe().c_str(), restore.seconds,
                Gbps(restore.raw_bytes, restore.seconds), FormatSize(report->restore_peak_anon).c_str());
  out << line;
  return Status::Ok();
}

// What a stream needs beyond the raw bytes of a chunk stored raw, at most:
// its frame header, its seek index record, and room for the rest.
constexpr uint64_t kFramingBytesPerChunk = 256;

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs fs;
  if (::access(dir.c_str(), W_OK) != 0 || ::statvfs(dir.c_str(), &fs) != 0) return 0;
  return uint64_t{fs.f_bavail} * fs.f_frsize;
}

// Where the demo's temporary stream goes: /dev/shm, memory, when it has room
// for `largest` bytes (the demo measures the pipeline, not a disk); else
// $TMPDIR or /var/tmp, with a note (a container's /dev/shm is often 64 MB).
std::string DemoStreamDirectory(uint64_t largest) {
  const uint64_t shm_free = FreeBytes("/dev/shm");
  if (shm_free >= largest) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  const std::string fallback = tmp && *tmp ? tmp : "/var/tmp";
  if (::access("/dev/shm", W_OK) == 0)
    std::fprintf(stderr,
                 "vramflow demo: note: /dev/shm has %s free, less than the %s the stream may take; writing it "
                 "to %s instead\n",
                 FormatSize(shm_free).c_str(), FormatSize(largest).c_str(), fallback.c_str());
  return fallback;
}

// A temporary stream file of the demo, removed when done or interrupted.
class DemoTemporary {
 public:
  DemoTemporary(std::string path, CleanupRegistry* cleanup)
      : path_(std::move(path)), entry_(cleanup, [p = path_] { ::unlink(p.c_str()); }) {}
  ~DemoTemporary() { ::unlink(path_.c_str()); }
  DemoTemporary(const DemoTemporary&) = delete;
  DemoTemporary& operator=(const DemoTemporary&) = delete;
  bool registered() const { return entry_.registered(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  CleanupEntry entry_;
};

// Dumps `process` into the file `path` with `pipeline`.
Status DumpToFile(SimProcess& process, const std::string& path, const PipelineOptions& pipeline,
                  const TransportOptions& transport_options, const ProgressStyle& progress, const char* label,
                  PipelineStats* stats, uint64_t* peak_anon) {
  VF_ASSIGN_OR_RETURN(std::vector<DumpSource> sources, process.DumpSources());
  TransportOptions transport = transport_options;
  transport.file.overwrite = true;  // our own temporary file
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(path, transport));
  PipelineOptions run = pipeline;
  ProgressBar bar(label, process.total_bytes(), progress);
  run.progress = [&](uint64_t done) { bar.Update(done); };
  RssAnonSampler rss;
  VF_RETURN_IF_ERROR(rss.status());
  VF_RETURN_IF_ERROR(RunDump(sources, sink.get(), run, stats));
  VF_RETURN_IF_ERROR(sink->Commit());
  bar.Update(stats->raw_bytes);
  *peak_anon = std::max(*peak_anon, rss.peak_bytes());
  return Status::Ok();
}

// `vramflow demo --base`: see demo.h.
Status RunIncrementalDemo(const DemoOptions& options, const SimDeviceOptions& device_options, std::ostream& out,
                          DemoReport* report) {
  if (!options.listen.empty() || !options.destination.empty())
    return Status::InvalidArgument(
        "--base keeps both checkpoints here, in temporary files: it does not combine with "
        "--to or --listen");
  std::vector<SimBoSpec> layout = DemoLayout(options.gpus, options.bytes_per_gpu);
  SimProcess original(options.gpus, device_options);
  VF_RETURN_IF_ERROR(original.Allocate(layout));
  if (options.progress)
    std::fprintf(stderr, "building a simulated process: %u GPUs, %zu BOs, %s of model-like VRAM\n", options.gpus,
                 layout.size(), FormatSize(original.total_bytes()).c_str());
  original.Fill();

  (void)SweepDeadTemporaries("/dev/shm", "vramflow-demo-");
  const uint64_t chunks = (original.total_bytes() + options.pipeline.chunk_size - 1) / options.pipeline.chunk_size;
  const uint64_t largest = original.total_bytes() + chunks * kFramingBytesPerChunk + (1ull << 20);
  const std::string dir = DemoStreamDirectory(2 * largest);  // the base, and at most as much again
  if (dir != "/dev/shm") (void)SweepDeadTemporaries(dir, "vramflow-demo-");
  CleanupRegistry* cleanup = options.transport.file.cleanup;
  DemoTemporary base_file(dir + "/vramflow-demo-" + OwnerTag() + "-base.vfs", cleanup);
  DemoTemporary file(dir + "/vramflow-demo-" + OwnerTag() + "-incremental.vfs", cleanup);
  if (!base_file.registered() || !file.registered()) return InterruptedStatus("the demo");

  PipelineOptions pipeline = options.pipeline;
  pipeline.producer = ProducerString();
  // The full checkpoint, with digests: the next one matches its unchanged
  // chunks without reading them.
  PipelineStats full;
  PipelineOptions first = pipeline;
  first.chunk_digests = true;
  VF_RETURN_IF_ERROR(DumpToFile(original, base_file.path(), first, options.transport, options.progress, "full dump",
                                &full, &report->dump_peak_anon)
                         .WithContext("the full dump"));

  const TrainingStepReport step = ApplyTrainingStep(original, /*seed=*/1);
  if (options.progress)
    std::fprintf(stderr, "training step: %s perturbed in their low mantissa bits, %s rewritten\n",
                 FormatSize(step.perturbed_bytes).c_str(), FormatSize(step.rewritten_bytes).c_str());

  const std::vector<std::string> base_location = {base_file.path()};
  PipelineStats dump;
  PipelineOptions second = pipeline;
  // The base's index within the budget, as pack and unpack hold theirs.
  const uint64_t index_budget = WithMachineDefaults(pipeline).max_memory;
  VF_ASSIGN_OR_RETURN(second.base, OpenCliBase(base_location, options.transport, index_budget));
  VF_RETURN_IF_ERROR(DumpToFile(original, file.path(), second, options.transport, options.progress, "incremental dump",
                                &dump, &report->dump_peak_anon)
                         .WithContext("the incremental dump"));
  second.base.reset();  // the restore opens the base itself, as any reader does

  SimProcess restored(options.gpus, device_options);
  VF_RETURN_IF_ERROR(restored.Allocate(layout));
  PipelineStats restore;
  {
    PipelineOptions run = pipeline;
    run.open_base = BaseOpenerFor(base_location, file.path(), options.transport, index_budget);
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenFileSource(file.path()));
    ProgressBar bar("restore", original.total_bytes(), options.progress);
    run.progress = [&](uint64_t done) { bar.Update(done); };
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    VF_RETURN_IF_ERROR(RunRestore(source.get(), restored.devices(), restored.Resolver(), run, &restore)
                           .WithContext("restoring the incremental checkpoint"));
    bar.Update(restore.raw_bytes);
    report->restore_peak_anon = rss.peak_bytes();
  }
  VF_RETURN_IF_ERROR(original.Compare(restored).WithContext("verify"));

  report->restored_here = true;
  TakeFigures(dump, restore, report);
  report->budget_peak = std::max(report->budget_peak, full.budget_peak);
  report->base_stream_bytes = full.stream_bytes;
  report->base_dump_seconds = full.seconds;
  report->changed_bytes = step.perturbed_bytes + step.rewritten_bytes;

  if (options.json) {
    nlohmann::ordered_json j = JsonReportHead("demo", Status::Ok());
    j.update(JsonShape(options, layout.size(), pipeline, *report));
    j.update(nlohmann::ordered_json{{"incremental", true},
                                    {"raw_bytes", report->raw_bytes},
                                    {"changed_bytes", report->changed_bytes},
                                    {"base_stream_bytes", report->base_stream_bytes},
                                    {"base_dump_seconds", report->base_dump_seconds},
                                    {"stream_bytes", report->stream_bytes},
                                    {"ratio", Ratio(*report)},
                                    {"base_ref_bytes", report->base_ref_bytes},
                                    {"base_delta_bytes", report->base_delta_bytes},
                                    {"zero_bytes", report->zero_bytes},
                                    {"dedup_bytes", report->dedup_bytes}});
    j.update(JsonTimings(*report));
    j.update(nlohmann::ordered_json{{"restored_here", true}, {"verified", "here"}});
    out << j.dump(2) << "\n";
    return Status::Ok();
  }
  auto row = [&](const char* name, const std::string& value) { Row(out, name, value); };
  out << "\nvramflow demo --base: " << options.gpus << " simulated GPUs, " << layout.size() << " BOs, "
      << report->threads << " threads, codec " << DescribeOptions(pipeline.encoder) << "\n";
  row("raw VRAM", FormatSize(report->raw_bytes));
  row("full checkpoint", FormatSize(report->base_stream_bytes) + " (ratio " +
                             FormatRatio(report->raw_bytes, report->base_stream_bytes) + "), dump " +
                             Rate(full.raw_bytes, full.seconds));
  row("training step", FormatSize(step.perturbed_bytes) + " perturbed in low mantissa bits, " +
                           FormatSize(step.rewritten_bytes) + " rewritten");
  row("incremental checkpoint", FormatSize(report->stream_bytes) + " (ratio " +
                                    FormatRatio(report->raw_bytes, report->stream_bytes) + "), dump " +
                                    Rate(dump.raw_bytes, dump.seconds));
  row("  taken from the base",
      FormatSize(report->base_ref_bytes) + " as references, " + FormatSize(report->base_delta_bytes) + " as deltas");
  row("restore (with the base)", Rate(restore.raw_bytes, restore.seconds));
  row("peak RSS, private (dump)", FormatSize(report->dump_peak_anon));
  row("peak RSS, private (restore)", FormatSize(report->restore_peak_anon));
  row("memory budget", FormatSize(pipeline.max_memory) + ", peak use " + FormatSize(report->budget_peak));
  row("verified", "every byte of every BO matches");
  return Status::Ok();
}

}  // namespace

Status RunDemo(const DemoOptions& options, std::ostream& out, DemoReport* report) {
  if (options.gpus == 0) return Status::InvalidArgument("--gpus must be at least 1");
  if (!options.listen.empty() && !options.destination.empty())
    return Status::InvalidArgument("--listen (receive) and --to (send) exclude each other");
  SimDeviceOptions device_options;
  device_options.rings = options.rings;
  device_options.bytes_per_second = options.ring_bytes_per_second;
  if (options.incremental) return RunIncrementalDemo(options, device_options, out, report);
  if (!options.listen.empty()) return RunDemoReceiver(options, device_options, out, report);
  if (!options.base_store.empty()) return Status::InvalidArgument("--base-store is for the receiving end (--listen)");

  std::vector<SimBoSpec> layout = DemoLayout(options.gpus, options.bytes_per_gpu);
  SimProcess original(options.gpus, device_options);
  VF_RETURN_IF_ERROR(original.Allocate(layout));
  if (options.progress)
    std::fprintf(stderr, "building a simulated process: %u GPUs, %zu BOs, %s of model-like VRAM\n", options.gpus,
                 layout.size(), FormatSize(original.total_bytes()).c_str());
  original.Fill();

  std::string path = options.destination;
  if (path.empty()) {
    // A SIGKILLed demo's stream (named after its process) is removed by the next.
    (void)SweepDeadTemporaries("/dev/shm", "vramflow-demo-");
    const uint64_t chunks = (original.total_bytes() + options.pipeline.chunk_size - 1) / options.pipeline.chunk_size;
    const uint64_t largest = original.total_bytes() + chunks * kFramingBytesPerChunk + (1ull << 20);
    const std::string dir = DemoStreamDirectory(largest);
    if (dir != "/dev/shm") (void)SweepDeadTemporaries(dir, "vramflow-demo-");
    path = dir + "/vramflow-demo-" + OwnerTag() + ".vfs";
  }
  struct RemoveTemp {
    std::string path;
    bool remove;
    ~RemoveTemp() {
      if (remove) ::unlink(path.c_str());
    }
  } remove_temp{path, options.destination.empty()};
  CleanupEntry remove_if_interrupted;
  if (options.destination.empty()) {
    remove_if_interrupted = CleanupEntry(options.transport.file.cleanup, [path] { ::unlink(path.c_str()); });
    if (!remove_if_interrupted.registered()) return InterruptedStatus("the demo");
  }
  // A file or an S3 object (read back from the store) is restored here;
  // anything else (a receiver, a pipe) is the other side's to restore.
  const bool restore_here =
      options.destination.empty() || IsLocalFile(options.destination) || IsS3(options.destination);

  // Dump.
  PipelineOptions pipeline = options.pipeline;
  pipeline.producer = ProducerString();
  PipelineStats dump;
  {
    VF_ASSIGN_OR_RETURN(std::vector<DumpSource> sources, original.DumpSources());
    PipelineOptions run = pipeline;  // less the transport's share (S3 part buffers, a send window)
    TransportOptions transport = options.transport;
    transport.file.overwrite = options.destination.empty() || options.force;  // our own temporary file
    transport.s3.overwrite = options.force;
    const BudgetPlan budget = PlanPipelineBudget(&run, path, &transport);
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(path, transport));
    ProgressBar bar(restore_here ? "dump" : "send", original.total_bytes(), options.progress);
    run.progress = [&](uint64_t done) { bar.Update(done); };
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    Stopwatch delivered;
    VF_RETURN_IF_ERROR(budget.Explain(RunDump(sources, sink.get(), run, &dump)).WithContext("dump"));
    VF_RETURN_IF_ERROR(sink->Commit());
    // Sent elsewhere or uploaded, the dump is done when the receiver or the store has everything.
    if (!IsLocalFile(path)) dump.seconds = delivered.Seconds();
    bar.Update(dump.raw_bytes);
    report->dump_peak_anon = rss.peak_bytes();
  }

  // Restore into fresh GPUs.
  SimProcess restored(options.gpus, device_options);
  PipelineStats restore;
  if (restore_here) {
    VF_RETURN_IF_ERROR(restored.Allocate(layout));
    // An S3 object is read back (parallel ranged GETs within a share of the budget).
    PipelineOptions run = pipeline;
    TransportOptions transport = options.transport;
    const BudgetPlan budget = PlanPipelineBudget(&run, path, &transport);
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source,
                        IsS3(path) ? OpenSource(path, transport) : OpenFileSource(path));
    ProgressBar bar("restore", original.total_bytes(), options.progress);
    run.progress = [&](uint64_t done) { bar.Update(done); };
    RssAnonSampler rss;
    VF_RETURN_IF_ERROR(rss.status());
    VF_RETURN_IF_ERROR(budget.Explain(RunRestore(source.get(), restored.devices(), restored.Resolver(), run, &restore))
                           .WithContext("restore"));
    bar.Update(restore.raw_bytes);
    report->restore_peak_anon = rss.peak_bytes();
    VF_RETURN_IF_ERROR(original.Compare(restored).WithContext("verify"));
  }
  report->restored_here = restore_here;
  TakeFigures(dump, restore, report);

  if (options.json) {
    nlohmann::ordered_json j = JsonReportHead("demo", Status::Ok());
    j.update(JsonShape(options, layout.size(), pipeline, *report));
    j.update(nlohmann::ordered_json{{"raw_bytes", report->raw_bytes},
                                    {"stream_bytes", report->stream_bytes},
                                    {"ratio", Ratio(*report)},
                                    {"zero_bytes", report->zero_bytes},
                                    {"dedup_bytes", report->dedup_bytes}});
    j.update(JsonTimings(*report));
    j.update(nlohmann::ordered_json{{"destination", path},
                                    {"restored_here", restore_here},
                                    {"verified", restore_here ? "here" : "by the receiver"}});
    out << j.dump(2) << "\n";
    return Status::Ok();
  }
  auto row = [&](const char* name, const std::string& value) { Row(out, name, value); };
  out << "\nvramflow demo: " << options.gpus << " simulated GPUs, " << layout.size() << " BOs, " << report->threads
      << " threads, codec " << DescribeOptions(pipeline.encoder) << "\n";
  row("raw VRAM", FormatSize(report->raw_bytes));
  row("stream",
      FormatSize(report->stream_bytes) + " (" + path + (options.destination.empty() ? ", removed" : "") + ")");
  if (!restore_here) {
    row("dump and send", Rate(report->raw_bytes, report->seconds));
    row("ratio", FormatRatio(report->raw_bytes, report->stream_bytes));
    row("dedup savings", FormatSize(report->dedup_bytes));
    row("peak RSS, private (dump)", FormatSize(report->dump_peak_anon));
    row("delivered", IsLocalFile(path) || path == "-" || path.rfind("fd:", 0) == 0
                         ? "written"
                         : "the receiver restored and verified every byte");
    return Status::Ok();
  }
  row("ratio", FormatRatio(report->raw_bytes, report->stream_bytes));
  row("zero runs", FormatSize(report->zero_bytes));
  row("dedup savings", FormatSize(report->dedup_bytes) + " (replicated chunks written once)");
  row("dump", Rate(report->raw_bytes, report->seconds));
  row("restore", Rate(report->raw_bytes, report->restore_seconds));
  row("peak RSS, private (dump)", FormatSize(report->dump_peak_anon));
  row("peak RSS, private (restore)", FormatSize(report->restore_peak_anon));
  row("memory budget", FormatSize(pipeline.max_memory) + ", peak use " + FormatSize(report->budget_peak));
  row("verified", "every byte of every BO matches");
  return Status::Ok();
}

}  // namespace vramflow
