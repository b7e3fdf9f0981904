// SPDX-License-Identifier: MIT
// Loading and making the shared key (transport/net/shared_key.h).
#include "transport/net/shared_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using testing::TempDir;

void WriteKey(const std::string& path, const std::string& contents, mode_t mode) {
  testing::WriteFileBytes(path, std::vector<uint8_t>(contents.begin(), contents.end()));
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

// Sets (or unsets, with nullopt) an environment variable for one test and
// puts the old value back afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// --- Keys ---

const std::string kGoodKey = "0123456789abcdef0123456789abcdef";

TEST(SharedKey, LoadsGoodFileAndStripsTrailingWhitespace) {
  TempDir dir;
  WriteKey(dir.File("k"), kGoodKey + " \t\r\n\n", 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(std::string(key->secret.begin(), key->secret.end()), kGoodKey);
  EXPECT_EQ(key->origin, "key file '" + dir.File("k") + "'");
}

TEST(SharedKey, KeepsLeadingAndInnerBytes) {
  TempDir dir;
  WriteKey(dir.File("k"), " abc def ghi jkl mno\n", 0400);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(std::string(key->secret.begin(), key->secret.end()), " abc def ghi jkl mno");
}

TEST(SharedKey, RefusesFileOthersCanRead) {
  TempDir dir;
  for (mode_t mode : {0644, 0640, 0604, 0602, 0620}) {
    WriteKey(dir.File("k"), kGoodKey, mode);
    auto key = LoadKeyFile(dir.File("k"));
    ASSERT_FALSE(key.ok()) << std::oct << mode;
    EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("chmod 600"), std::string::npos) << key.status().message();
    EXPECT_NE(key.status().message().find(dir.File("k")), std::string::npos) << key.status().message();
  }
}

TEST(SharedKey, RefusesShortFile) {
  TempDir dir;
  // 15 bytes once the newline is stripped.
  WriteKey(dir.File("k"), kGoodKey.substr(0, kMinKeyBytes - 1) + "\n", 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(key.status().message().find(dir.File("k")), std::string::npos) << key.status().message();
  EXPECT_NE(key.status().message().find("15"), std::string::npos) << key.status().message();

  WriteKey(dir.File("k"), kGoodKey.substr(0, kMinKeyBytes), 0600);
  EXPECT_TRUE(LoadKeyFile(dir.File("k")).ok());
}

TEST(SharedKey, MissingFileIsIoError) {
  TempDir dir;
  auto key = LoadKeyFile(dir.File("absent"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Status::Code::kIoError);
  EXPECT_NE(key.status().message().find(dir.File("absent")), std::string::npos) << key.status().message();
}

TEST(SharedKey, ResolveKeyPrecedence) {
  TempDir dir;
  WriteKey(dir.File("flag"), "flag-key-0123456789", 0600);
  WriteKey(dir.File("env"), "env-file-key-0123456789\n", 0600);

  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", std::nullopt), k("VRAMFLOW_KEY", std::nullopt);
    auto none = ResolveKey("");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", dir.File("env")), k("VRAMFLOW_KEY", "env-secret-0123456789\n");
    // The flag wins over both variables.
    auto key = ResolveKey(dir.File("flag"));
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "flag-key-0123456789");
    EXPECT_EQ((*key)->origin, "key file '" + dir.File("flag") + "'");
    // Then $VRAMFLOW_KEY_FILE over $VRAMFLOW_KEY.
    key = ResolveKey("");
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "env-file-key-0123456789");
    EXPECT_EQ((*key)->origin, "key file '" + dir.File("env") + "'");
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", ""), k("VRAMFLOW_KEY", "env-secret-0123456789 \n");
    auto key = ResolveKey("");
    ASSERT_TRUE(key.ok() && key->has_value()) << key.status().ToString();
    EXPECT_EQ(std::string((*key)->secret.begin(), (*key)->secret.end()), "env-secret-0123456789");
    EXPECT_EQ((*key)->origin, "VRAMFLOW_KEY");
  }
  {
    ScopedEnv f("VRAMFLOW_KEY_FILE", std::nullopt), k("VRAMFLOW_KEY", "short\n");
    auto key = ResolveKey("");
    ASSERT_FALSE(key.ok());
    EXPECT_EQ(key.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("VRAMFLOW_KEY"), std::string::npos);
  }
  {
    // A bad file named by the variable is an error, not a fall-through.
    ScopedEnv f("VRAMFLOW_KEY_FILE", dir.File("absent")), k("VRAMFLOW_KEY", "env-secret-0123456789");
    EXPECT_FALSE(ResolveKey("").ok());
  }
}

TEST(SharedKey, GenerateKeyTextIs64LowercaseHexAndRandom) {
  auto a = GenerateKeyText();
  auto b = GenerateKeyText();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);

  // Usable as a key file as written.
  TempDir dir;
  WriteKey(dir.File("k"), *a, 0600);
  auto key = LoadKeyFile(dir.File("k"));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->secret.size(), 64u);
}

TEST(SharedKey, RandomBytesFillsBuffer) {
  std::vector<uint8_t> a(64, 0), b(64, 0);
  ASSERT_TRUE(RandomBytes(a).ok());
  ASSERT_TRUE(RandomBytes(b).ok());
  EXPECT_NE(a, b);
  EXPECT_NE(a, std::vector<uint8_t>(64, 0));
  EXPECT_TRUE(RandomBytes({}).ok());
}

}  // namespace
}  // namespace vramflow
