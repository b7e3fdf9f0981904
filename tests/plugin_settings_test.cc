// SPDX-License-Identifier: MIT
// The plugin's environment settings (plugin/plugin_options.h) read as
// upstream's amdgpu plugin reads them (getenv_size_t, getenv_bool), and no
// value fatal: a bad one becomes a warning and the default stays, because
// CRIU initialises every plugin for every dump on the host.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "plugin/plugin_options.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using Env = std::map<std::string, std::string>;

PluginOptions Read(const Env& env) {
  Result<PluginOptions> o = PluginOptionsFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(o.ok()) << o.status().ToString();  // never an error: see the top of plugin_options.h
  return o.ok() ? std::move(*o) : PluginOptions{};
}

bool AnyLineHas(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

//! KFD_MAX_BUFFER_SIZE takes what getenv_size_t takes: strtoul base 0 and a
//! k/K, M or G suffix.
TEST(PluginSettings, BufferSizeReadAsUpstream) {
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"268435456", 256ull << 20}, {"0x10000000", 256ull << 20},
      {"0X8000000", 128ull << 20}, {"01000000000", 128ull << 20},  // octal
      {"64M", 64ull << 20},        {"65536k", 64ull << 20},
      {"65536K", 64ull << 20},     {"1G", 1ull << 30},
      {"0x40M", 64ull << 20},      {"020M", 16ull << 20},
      {"64MB", 64ull << 20},       {"64MiB", 64ull << 20},
      {" 32M", 32ull << 20},
  };
  for (const auto& [value, bytes] : cases) {
    PluginOptions o = Read({{"KFD_MAX_BUFFER_SIZE", value}});
    EXPECT_EQ(o.pipeline.max_memory, bytes) << value;
    EXPECT_TRUE(o.warnings.empty()) << value << ": " << Joined(o.warnings);
  }
  // 0 is upstream's "no cap": the budget is fitted to the machine, quietly.
  PluginOptions zero = Read({{"KFD_MAX_BUFFER_SIZE", "0"}});
  EXPECT_EQ(zero.pipeline.max_memory, 0u);
  EXPECT_TRUE(zero.warnings.empty()) << Joined(zero.warnings);
  // Upstream ignores what follows the suffix; so do we, saying so.
  PluginOptions trailing = Read({{"KFD_MAX_BUFFER_SIZE", "32Mx"}});
  EXPECT_EQ(trailing.pipeline.max_memory, 32ull << 20);
  EXPECT_TRUE(AnyLineHas(trailing.warnings, "'x' after the suffix ignored")) << Joined(trailing.warnings);
}

TEST(PluginSettings, BufferSizeBelowTheMinimumIsRaised) {
  for (const char* small : {"1M", "4096", "1k", "0x1"}) {
    PluginOptions o = Read({{"KFD_MAX_BUFFER_SIZE", small}});
    EXPECT_EQ(o.pipeline.max_memory, kMinPluginBudget) << small;
    ASSERT_EQ(o.warnings.size(), 1u) << small << ": " << Joined(o.warnings);
    EXPECT_NE(o.warnings[0].find(std::string("KFD_MAX_BUFFER_SIZE='") + small + "'"), std::string::npos)
        << o.warnings[0];
    EXPECT_NE(o.warnings[0].find("using 16.00 MiB"), std::string::npos) << o.warnings[0];
  }
}

//! Every variable: a value that does not parse is one warning naming the
//! variable and the value, and the default stays.
TEST(PluginSettings, BadValuesAreWarningsAndKeepTheDefault) {
  const PluginOptions defaults = Read({});
  EXPECT_TRUE(defaults.warnings.empty()) << Joined(defaults.warnings);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"KFD_MAX_BUFFER_SIZE", "lots"},
      {"KFD_MAX_BUFFER_SIZE", "64 apples"},
      {"KFD_MAX_BUFFER_SIZE", "64m"},  // upstream takes k or K, but only M and G
      {"KFD_MAX_BUFFER_SIZE", "-1"},
      {"KFD_MAX_BUFFER_SIZE", "99999999999999999999999"},  // strtoul: ERANGE
      {"KFD_MAX_BUFFER_SIZE", "0x1000000000000G"},         // past 2^64 once shifted
      {"VRAMFLOW_CODEC", "gzip"},
      {"VRAMFLOW_CODEC", "lz4:3"},  // lz4 takes no level: not even "lz4" is kept
      {"VRAMFLOW_THREADS", "two"},
      {"VRAMFLOW_THREADS", "-3"},
      {"VRAMFLOW_THREADS", "5000"},
      {"VRAMFLOW_PARALLEL_RESTORE", "sometimes"},
      {"VRAMFLOW_CRIU_STREAM", "2"},
      {"KFD_FW_VER_CHECK", "maybe"},
  };
  for (const auto& [name, value] : bad) {
    PluginOptions o = Read({{name, value}});
    ASSERT_EQ(o.warnings.size(), 1u) << name << "=" << value << ": " << Joined(o.warnings);
    EXPECT_NE(o.warnings[0].find("ignoring " + name + "='" + value + "'"), std::string::npos) << o.warnings[0];
    EXPECT_EQ(o.pipeline.max_memory, defaults.pipeline.max_memory) << name << "=" << value;
    EXPECT_EQ(o.pipeline.encoder.codec, defaults.pipeline.encoder.codec) << name << "=" << value;
    EXPECT_EQ(o.pipeline.encoder.zstd_level, defaults.pipeline.encoder.zstd_level) << name << "=" << value;
    EXPECT_EQ(o.pipeline.threads, defaults.pipeline.threads) << name << "=" << value;
    EXPECT_EQ(o.parallel_restore, Tristate::kAuto) << name << "=" << value;
    EXPECT_EQ(o.criu_stream, Tristate::kAuto) << name << "=" << value;
    EXPECT_TRUE(o.checks.fw_version) << name << "=" << value;
    EXPECT_TRUE(o.key_error.ok()) << name << "=" << value;
  }
  // Several at once: one warning each, the good ones applied.
  PluginOptions mixed = Read({{"VRAMFLOW_CODEC", "gzip"}, {"VRAMFLOW_THREADS", "3"}, {"KFD_NUMA_CHECK", "off"}});
  EXPECT_EQ(mixed.warnings.size(), 2u) << Joined(mixed.warnings);
  EXPECT_EQ(mixed.pipeline.threads, 3u);
}

//! KFD_*_CHECK read exactly as getenv_bool: "0"/"no" and "1"/"yes" (case
//! aside); anything else leaves the check on, with a warning.
TEST(PluginSettings, CheckSwitchesReadExactlyAsUpstream) {
  const std::vector<std::pair<std::string, bool MapChecks::*>> vars = {
      {"KFD_FW_VER_CHECK", &MapChecks::fw_version},         {"KFD_SDMA_FW_VER_CHECK", &MapChecks::sdma_fw_version},
      {"KFD_CACHES_COUNT_CHECK", &MapChecks::caches_count}, {"KFD_NUM_GWS_CHECK", &MapChecks::num_gws},
      {"KFD_VRAM_SIZE_CHECK", &MapChecks::vram_size},       {"KFD_NUMA_CHECK", &MapChecks::numa},
      {"KFD_CAPABILITY_CHECK", &MapChecks::capability},
  };
  auto on_count = [](const MapChecks& c) {
    return c.fw_version + c.sdma_fw_version + c.caches_count + c.num_gws + c.vram_size + c.numa + c.capability;
  };
  for (const auto& [name, field] : vars) {
    for (const char* off : {"0", "no", "NO", "No"}) {
      PluginOptions o = Read({{name, off}});
      EXPECT_FALSE(o.checks.*field) << name << "=" << off;
      EXPECT_EQ(on_count(o.checks), 6) << name << "=" << off << " switched another check too";
      EXPECT_TRUE(o.warnings.empty()) << Joined(o.warnings);
    }
    for (const char* on : {"1", "yes", "YES", ""}) {
      PluginOptions o = Read({{name, on}});
      EXPECT_TRUE(o.checks.*field) << name << "=" << on;
      EXPECT_TRUE(o.warnings.empty()) << Joined(o.warnings);
    }
    for (const char* other : {"false", "off", "true", "on", "2", " 0", "n", "y", "disable"}) {
      PluginOptions o = Read({{name, other}});
      EXPECT_TRUE(o.checks.*field) << name << "=" << other << " must leave the check on";
      ASSERT_EQ(o.warnings.size(), 1u) << name << "=" << other;
      EXPECT_NE(o.warnings[0].find("ignoring " + name + "='" + other + "'"), std::string::npos) << o.warnings[0];
    }
  }
}

//! A key file that cannot be loaded does not stop init, but is kept as an
//! error for the network transport instead of silently meaning "no key".
TEST(PluginSettings, UnusableKeyFileIsDeferredNotDropped) {
  PluginOptions o = Read({{"VRAMFLOW_KEY_FILE", "/nonexistent/vramflow.key"}});
  EXPECT_FALSE(o.transport.net.tls.key.has_value());
  ASSERT_FALSE(o.key_error.ok());
  EXPECT_NE(o.key_error.message().find("VRAMFLOW_KEY_FILE"), std::string::npos) << o.key_error.ToString();
  EXPECT_TRUE(AnyLineHas(o.warnings, "ignoring VRAMFLOW_KEY_FILE='/nonexistent/vramflow.key'")) << Joined(o.warnings);
  EXPECT_TRUE(AnyLineHas(o.ParamLines(), "param: VRAMFLOW_KEY_FILE: (unusable)")) << Joined(o.ParamLines());
}

TEST(PluginSettings, ParamLinesShowTheEffectiveSettings) {
  const std::vector<std::string> defaults = Read({}).ParamLines();
  for (const std::string& line : defaults) EXPECT_EQ(line.rfind("param: ", 0), 0u) << line;
  for (const char* name : {"KFD_MAX_BUFFER_SIZE",
                           "KFD_FW_VER_CHECK",
                           "KFD_SDMA_FW_VER_CHECK",
                           "KFD_CACHES_COUNT_CHECK",
                           "KFD_NUM_GWS_CHECK",
                           "KFD_VRAM_SIZE_CHECK",
                           "KFD_NUMA_CHECK",
                           "KFD_CAPABILITY_CHECK",
                           "VRAMFLOW_CODEC",
                           "VRAMFLOW_THREADS",
                           "VRAMFLOW_TARGET",
                           "VRAMFLOW_KEY_FILE",
                           "VRAMFLOW_TLS_CERT",
                           "VRAMFLOW_TLS_KEY",
                           "VRAMFLOW_TLS_CA",
                           "VRAMFLOW_INSECURE",
                           "VRAMFLOW_PARALLEL_RESTORE",
                           "VRAMFLOW_CRIU_STREAM",
                           "VRAMFLOW_KFD_TOPOLOGY",
                           "VRAMFLOW_BASE",
                           "VRAMFLOW_BASE_REFS_ONLY",
                           "VRAMFLOW_S3_SSE",
                           "VRAMFLOW_S3_SSE_KMS_KEY_ID",
                           "VRAMFLOW_S3_SSE_C_KEY_FILE"}) {
    EXPECT_TRUE(AnyLineHas(defaults, std::string("param: ") + name + ": ")) << name << "\n" << Joined(defaults);
  }
  EXPECT_TRUE(AnyLineHas(defaults, "param: KFD_MAX_BUFFER_SIZE: 0 (auto: ")) << Joined(defaults);
  EXPECT_TRUE(AnyLineHas(defaults, "param: KFD_NUMA_CHECK: Y")) << Joined(defaults);
  EXPECT_TRUE(AnyLineHas(defaults, "param: VRAMFLOW_KEY_FILE: (none)")) << Joined(defaults);

  testing::TempDir dir;
  const std::string secret = "not-to-be-logged-0123456789";
  testing::WriteFileBytes(dir.File("key"), std::vector<uint8_t>(secret.begin(), secret.end()));
  ASSERT_EQ(::chmod(dir.File("key").c_str(), 0600), 0);
  PluginOptions o = Read({{"KFD_MAX_BUFFER_SIZE", "0x4000000"},
                          {"KFD_NUMA_CHECK", "NO"},
                          {"VRAMFLOW_THREADS", "2"},
                          {"VRAMFLOW_PARALLEL_RESTORE", "0"},
                          {"VRAMFLOW_KEY_FILE", dir.File("key")}});
  ASSERT_TRUE(o.warnings.empty()) << Joined(o.warnings);
  const std::vector<std::string> lines = o.ParamLines();
  EXPECT_TRUE(AnyLineHas(lines, "param: KFD_MAX_BUFFER_SIZE: 0x4000000 (64.00 MiB)")) << Joined(lines);
  EXPECT_TRUE(AnyLineHas(lines, "param: KFD_NUMA_CHECK: N")) << Joined(lines);
  EXPECT_TRUE(AnyLineHas(lines, "param: KFD_VRAM_SIZE_CHECK: Y")) << Joined(lines);
  EXPECT_TRUE(AnyLineHas(lines, "param: VRAMFLOW_THREADS: 2")) << Joined(lines);
  EXPECT_TRUE(AnyLineHas(lines, "param: VRAMFLOW_PARALLEL_RESTORE: 0")) << Joined(lines);
  EXPECT_TRUE(AnyLineHas(lines, "param: VRAMFLOW_KEY_FILE: key file '" + dir.File("key") + "'")) << Joined(lines);
  EXPECT_FALSE(AnyLineHas(lines, secret)) << Joined(lines);
}

//! Mutual TLS and --insecure for a tcp:// target come from the environment;
//! a value of VRAMFLOW_INSECURE that does not parse keeps TLS required.
TEST(PluginSettings, TlsFilesAndInsecureComeFromTheEnvironment) {
  PluginOptions o = Read({{"VRAMFLOW_TLS_CERT", "/etc/vf/node.pem"},
                          {"VRAMFLOW_TLS_KEY", "/etc/vf/node.key"},
                          {"VRAMFLOW_TLS_CA", "/etc/vf/ca.pem"}});
  ASSERT_TRUE(o.warnings.empty()) << Joined(o.warnings);
  EXPECT_EQ(o.transport.net.tls.cert_file, "/etc/vf/node.pem");
  EXPECT_EQ(o.transport.net.tls.key_file, "/etc/vf/node.key");
  EXPECT_EQ(o.transport.net.tls.ca_file, "/etc/vf/ca.pem");
  EXPECT_FALSE(o.transport.net.insecure);
  EXPECT_TRUE(AnyLineHas(o.ParamLines(), "param: VRAMFLOW_TLS_CERT: /etc/vf/node.pem")) << Joined(o.ParamLines());
  EXPECT_TRUE(Read({{"VRAMFLOW_INSECURE", "1"}}).transport.net.insecure);
  PluginOptions bad = Read({{"VRAMFLOW_INSECURE", "maybe"}});
  EXPECT_FALSE(bad.transport.net.insecure);
  EXPECT_TRUE(AnyLineHas(bad.warnings, "ignoring VRAMFLOW_INSECURE='maybe'")) << Joined(bad.warnings);
}

//! Server-side encryption of s3:// targets and bases: the modes as given
//! (the transport checks them when it opens), the SSE-C key from its file
//! (never in the log); a key file that cannot be used is a warning and an
//! error kept for when an s3:// target or base is used.
TEST(PluginSettings, S3EncryptionComesFromTheEnvironment) {
  PluginOptions kms = Read({{"VRAMFLOW_S3_SSE", "aws:kms"}, {"VRAMFLOW_S3_SSE_KMS_KEY_ID", "alias/ckpt"}});
  ASSERT_TRUE(kms.warnings.empty()) << Joined(kms.warnings);
  EXPECT_EQ(kms.transport.s3.encryption.sse, "aws:kms");
  EXPECT_EQ(kms.transport.s3.encryption.kms_key_id, "alias/ckpt");
  EXPECT_TRUE(AnyLineHas(kms.ParamLines(), "param: VRAMFLOW_S3_SSE: aws:kms")) << Joined(kms.ParamLines());
  EXPECT_TRUE(AnyLineHas(Read({}).ParamLines(), "param: VRAMFLOW_S3_SSE_C_KEY_FILE: (none)"));

  testing::TempDir dir;
  const std::string secret = "not-to-be-logged-0123456789abcde";  // 32 bytes
  ASSERT_EQ(secret.size(), 32u);
  testing::WriteFileBytes(dir.File("sse-c.key"), std::vector<uint8_t>(secret.begin(), secret.end()));
  PluginOptions customer = Read({{"VRAMFLOW_S3_SSE_C_KEY_FILE", dir.File("sse-c.key")}});
  ASSERT_TRUE(customer.warnings.empty()) << Joined(customer.warnings);
  EXPECT_TRUE(customer.sse_c_key_error.ok());
  EXPECT_EQ(customer.transport.s3.encryption.customer_key, secret);
  const std::vector<std::string> lines = customer.ParamLines();
  EXPECT_TRUE(AnyLineHas(lines, "param: VRAMFLOW_S3_SSE_C_KEY_FILE: " + dir.File("sse-c.key"))) << Joined(lines);
  EXPECT_FALSE(AnyLineHas(lines, secret)) << Joined(lines);

  PluginOptions unusable = Read({{"VRAMFLOW_S3_SSE_C_KEY_FILE", "/nonexistent/sse-c.key"}});
  EXPECT_TRUE(unusable.transport.s3.encryption.customer_key.empty());
  ASSERT_FALSE(unusable.sse_c_key_error.ok());
  EXPECT_NE(unusable.sse_c_key_error.message().find("VRAMFLOW_S3_SSE_C_KEY_FILE"), std::string::npos)
      << unusable.sse_c_key_error.ToString();
  EXPECT_TRUE(AnyLineHas(unusable.warnings, "ignoring VRAMFLOW_S3_SSE_C_KEY_FILE='/nonexistent/sse-c.key'"))
      << Joined(unusable.warnings);
  EXPECT_TRUE(AnyLineHas(unusable.ParamLines(), "param: VRAMFLOW_S3_SSE_C_KEY_FILE: (unusable)"));
}

//! Incremental checkpoints (issue 21): VRAMFLOW_BASE as given (a pattern as
//! VRAMFLOW_TARGET), VRAMFLOW_BASE_REFS_ONLY read as upstream's booleans.
TEST(PluginSettings, BaseAndRefsOnly) {
  PluginOptions none = Read({});
  EXPECT_TRUE(none.base.empty());
  EXPECT_FALSE(none.pipeline.base_refs_only);
  EXPECT_TRUE(AnyLineHas(none.ParamLines(), "param: VRAMFLOW_BASE: (none: full dumps)")) << Joined(none.ParamLines());

  PluginOptions o = Read({{"VRAMFLOW_BASE", "s3://bucket/ckpt1/{name}"}, {"VRAMFLOW_BASE_REFS_ONLY", "yes"}});
  ASSERT_TRUE(o.warnings.empty()) << Joined(o.warnings);
  EXPECT_EQ(o.base, "s3://bucket/ckpt1/{name}");
  EXPECT_TRUE(o.pipeline.base_refs_only);
  EXPECT_TRUE(AnyLineHas(o.ParamLines(), "param: VRAMFLOW_BASE: s3://bucket/ckpt1/{name}")) << Joined(o.ParamLines());
  EXPECT_TRUE(AnyLineHas(o.ParamLines(), "param: VRAMFLOW_BASE_REFS_ONLY: Y")) << Joined(o.ParamLines());

  PluginOptions bad = Read({{"VRAMFLOW_BASE_REFS_ONLY", "sometimes"}});
  EXPECT_FALSE(bad.pipeline.base_refs_only);
  EXPECT_TRUE(AnyLineHas(bad.warnings, "VRAMFLOW_BASE_REFS_ONLY='sometimes'")) << Joined(bad.warnings);
}

}  // namespace
}  // namespace vramflow
