// Names a peer sends (a stream's name, stored by `recv --output-dir`) are
// checked as one plain file name, and printed only escaped.
#include <gtest/gtest.h>

#include <string>

#include "common/printable.h"
#include "tools/safe_path.h"

namespace vramflow {
namespace {

TEST(SafeFileName, ImageNamesAndPlainNamesPass) {
  for (const char* name : {"amdgpu-vram-1234-4096.img", "a", "ckpt_2.vfs", "A.B-c_9"})
    EXPECT_TRUE(CheckSafeFileName(name).ok()) << name << ": " << CheckSafeFileName(name).ToString();
  EXPECT_TRUE(CheckSafeFileName(std::string(200, 'x')).ok());
}

TEST(SafeFileName, HostileNamesAreRefusedSayingWhy) {
  struct Case {
    std::string name;
    std::string why;
  };
  const Case cases[] = {
      {"", "empty"},
      {"..", "starts with '.'"},
      {".", "starts with '.'"},
      {"../etc/passwd", "starts with '.'"},
      {".bashrc", "starts with '.'"},
      {"-rf", "starts with '-'"},
      {"a/b", "contains '/'"},
      {"/etc/passwd", "contains '/'"},
      {"x/../../y", "contains '/'"},
      {std::string("a\0b", 3), "other than"},
      {"a\nb", "other than"},
      {"a\x1b[2Jb", "other than"},
      {"a b", "other than"},
      {"caf\xc3\xa9", "other than"},
      {std::string(201, 'x'), "longer than 200 bytes"},
  };
  for (const Case& c : cases) {
    Status s = CheckSafeFileName(c.name);
    ASSERT_FALSE(s.ok()) << Printable(c.name);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.ToString();
    // The message shows the name without a raw control byte in it.
    for (char ch : s.message()) EXPECT_TRUE(static_cast<unsigned char>(ch) >= 0x20) << s.ToString();
  }
}

TEST(Printable, EscapesWhatIsNotPrintableAscii) {
  EXPECT_EQ(Printable("plain.img"), "'plain.img'");
  EXPECT_EQ(Printable(std::string("a\0\n\x1b'\\\xff", 7)), "'a\\x00\\x0a\\x1b\\x27\\x5c\\xff'");
  EXPECT_EQ(Printable("abcdef", 3), "'abc...'");
}

}  // namespace
}  // namespace vramflow
