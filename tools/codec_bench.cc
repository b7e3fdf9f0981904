// SPDX-License-Identifier: MIT
#include "tools/codec_bench.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "tools/cli/cli_util.h"

namespace vramflow {
namespace {

constexpr uint64_t kFrameOverhead = 64;  // one frame header per chunk

struct Encoded {
  bool zero = false;
  CodecId codec = CodecId::kRaw;
  TransformId transform = TransformId::kNone;
  uint64_t hash = 0;
  std::vector<uint8_t> payload;
};

// Best-of-N timing: repeats `work` until min_seconds have passed (at least
// twice) and returns the fastest pass, as zstd -b and lz4 -b do.
template <typename Fn>
Result<double> BestSeconds(double min_seconds, Fn&& work) {
  double best = 1e30, total = 0;
  for (int pass = 0; pass < 2 || total < min_seconds; ++pass) {
    Stopwatch clock;
    VF_RETURN_IF_ERROR(work());
    double s = clock.Seconds();
    best = std::min(best, s);
    total += s;
    if (pass > 1000) break;
  }
  return best;
}

Result<CodecBenchRow> BenchOurs(const std::string& spec, const std::vector<uint8_t>& data, uint32_t chunk_size,
                                double min_seconds) {
  EncoderOptions options;
  VF_RETURN_IF_ERROR(ParseCodecSpec(spec, &options));
  if (options.codec != CodecChoice::kAuto) options.transform = TransformChoice::kNone;
  ChunkEncoder encoder(options);
  const size_t chunks = (data.size() + chunk_size - 1) / chunk_size;
  std::vector<Encoded> encoded(chunks);
  auto chunk_at = [&](size_t i) {
    size_t begin = i * chunk_size;
    return std::span<const uint8_t>(data.data() + begin, std::min<size_t>(chunk_size, data.size() - begin));
  };

  auto encode_all = [&]() -> Status {
    EncodedChunk out;
    for (size_t i = 0; i < chunks; ++i) {
      VF_RETURN_IF_ERROR(encoder.Encode(chunk_at(i), &out));
      Encoded& e = encoded[i];
      e.zero = out.zero_run;
      e.codec = out.codec;
      e.transform = out.transform;
      e.hash = out.raw_hash;
      e.payload.assign(out.payload.begin(), out.payload.end());  // the write stage's copy to the sink
    }
    return Status::Ok();
  };
  VF_ASSIGN_OR_RETURN(double encode_s, BestSeconds(min_seconds, encode_all));

  ChunkDecoder decoder;
  std::vector<uint8_t> restored(data.size());
  auto decode_all = [&]() -> Status {
    for (size_t i = 0; i < chunks; ++i) {
      const Encoded& e = encoded[i];
      std::span<uint8_t> dst(restored.data() + i * chunk_size, chunk_at(i).size());
      if (e.zero) {
        std::memset(dst.data(), 0, dst.size());
        continue;
      }
      VF_RETURN_IF_ERROR(decoder.Decode(e.codec, e.transform, e.payload, dst));
      if (Hash64(dst.data(), dst.size()) != e.hash) return Status::Internal("decoded chunk hash mismatch");
    }
    return Status::Ok();
  };
  VF_ASSIGN_OR_RETURN(double decode_s, BestSeconds(min_seconds, decode_all));
  if (restored != data) return Status::Internal("codec " + spec + " did not round-trip");

  CodecBenchRow row;
  row.tool = "vramflow " + spec;
  row.raw_bytes = data.size();
  for (const Encoded& e : encoded) row.stored_bytes += kFrameOverhead + (e.zero ? 0 : e.payload.size());
  row.compress_mbps = data.size() / encode_s / 1e6;
  row.decompress_mbps = data.size() / decode_s / 1e6;
  return row;
}

Result<std::string> RunCapture(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return Status::FromErrno("pipe", errno);
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    // The peer tool takes signals as usual: the command blocks them in its
    // threads (tools/cli/interrupt.h), and a blocked mask survives exec.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(pipefd[1]);
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) output.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::IoError("'" + argv[0] + "' failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
  return output;
}

}  // namespace

bool ParsePeerBenchOutput(const std::string& output, uint64_t* raw, uint64_t* stored, double* compress_mbps,
                          double* decompress_mbps) {
  static const std::regex kLine(R"((\d+) +-> +(\d+) +\([x0-9.]+\), *([0-9.]+) MB/s *, *([0-9.]+) MB/s)");
  bool found = false;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find_first_of("\r\n", start);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(start, end - start);
    std::smatch m;
    if (std::regex_search(line, m, kLine)) {
      *raw = std::stoull(m[1]);
      *stored = std::stoull(m[2]);
      *compress_mbps = std::stod(m[3]);
      *decompress_mbps = std::stod(m[4]);
      found = true;  // keep the last: the final result
    }
    start = end + 1;
  }
  return found;
}

Status RunCodecBench(const CodecBenchOptions& options, std::ostream& out, std::vector<CodecBenchRow>* rows) {
  if (options.size == 0) return Status::InvalidArgument("benchmark size must not be zero");
  std::string temp_dir = options.temp_dir;
  if (temp_dir.empty()) temp_dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const int peer_seconds = std::max(1, static_cast<int>(options.min_seconds + 0.5));
  const std::vector<std::pair<std::string, std::vector<std::string>>> peers = {
      {"zstd -1", {"zstd", "-b1", "-B1M", "-i" + std::to_string(peer_seconds)}},
      {"zstd --fast=1", {"zstd", "--fast=1", "-b", "-B1M", "-i" + std::to_string(peer_seconds)}},
      {"lz4 -1", {"lz4", "-b1", "-B1M", "-i" + std::to_string(peer_seconds)}},
  };

  char line[256];
  std::snprintf(line, sizeof(line), "%-8s %-18s %8s %14s %14s\n", "data", "codec", "ratio", "compress", "decompress");
  out << "single core, " << (options.size >> 20) << " MiB per data kind, " << (options.chunk_size >> 10)
      << " KiB chunks; vramflow ratios include 64-byte frame headers, its speeds include XXH3 hashing and checks\n"
      << line;
  for (DataKind kind : options.kinds) {
    std::vector<uint8_t> data(options.size);
    GenerateModelData(kind, options.seed, 0, data);
    std::vector<CodecBenchRow> kind_rows;
    for (const std::string& spec : options.codecs) {
      VF_ASSIGN_OR_RETURN(CodecBenchRow row, BenchOurs(spec, data, options.chunk_size, options.min_seconds));
      kind_rows.push_back(row);
    }
    if (options.peers) {
      std::string path = temp_dir + "/vramflow-bench-" + std::to_string(::getpid()) + "-" + DataKindName(kind);
      {
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
        if (!f) return Status::IoError("writing benchmark data to '" + path + "'");
      }
      for (const auto& [name, args] : peers) {
        std::vector<std::string> argv = args;
        argv.push_back(path);
        Result<std::string> output = RunCapture(argv);
        CodecBenchRow row;
        row.tool = name;
        row.raw_bytes = data.size();
        if (!output.ok() || !ParsePeerBenchOutput(*output, &row.raw_bytes, &row.stored_bytes, &row.compress_mbps,
                                                  &row.decompress_mbps)) {
          out << "  (" << name << " unavailable: " << (output.ok() ? "unrecognised output" : output.status().ToString())
              << ")\n";
          continue;
        }
        kind_rows.push_back(row);
      }
      ::unlink(path.c_str());
    }
    for (CodecBenchRow& row : kind_rows) {
      row.kind = DataKindName(kind);
      std::snprintf(line, sizeof(line), "%-8s %-18s %8s %9.0f MB/s %9.0f MB/s\n", row.kind.c_str(), row.tool.c_str(),
                    FormatRatio(row.raw_bytes, row.stored_bytes).c_str(), row.compress_mbps, row.decompress_mbps);
      out << line;
      rows->push_back(row);
    }
    out.flush();
  }
  if (!options.json_path.empty()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const CodecBenchRow& r : *rows)
      j.push_back({{"data", r.kind},
                   {"codec", r.tool},
                   {"raw_bytes", r.raw_bytes},
                   {"stored_bytes", r.stored_bytes},
                   {"ratio", r.stored_bytes ? static_cast<double>(r.raw_bytes) / r.stored_bytes : 0.0},
                   {"compress_mbps", r.compress_mbps},
                   {"decompress_mbps", r.decompress_mbps}});
    std::ofstream f(options.json_path);
    f << j.dump(2) << "\n";
    if (!f) return Status::IoError("writing '" + options.json_path + "'");
  }
  return Status::Ok();
}

}  // namespace vramflow
