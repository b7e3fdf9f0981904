// SPDX-License-Identifier: MIT
// Names a peer sends (a stream's name, stored by `recv --output-dir`) are
// checked as one plain file name, and printed only escaped.
#include <gtest/gtest.h>

#include <string>

#include "common/printable.h"
#include "common/safe_path.h"

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

//! EscapedText keeps UTF-8 text and escapes control bytes (C0, DEL, C1),
//! backslashes and invalid UTF-8 (issue 18, defects 7 and 13).
TEST(Printable, EscapedTextKeepsUtf8AndEscapesControls) {
  EXPECT_EQ(EscapedText("mod\xc3\xa8le.bin"), "mod\xc3\xa8le.bin");
  EXPECT_EQ(EscapedText(std::string("a\x1b[1m\r\n\x7f\\", 9)), "a\\x1b[1m\\x0d\\x0a\\x7f\\\\");
  EXPECT_EQ(EscapedText("\xc2\x9b"), "\\xc2\\x9b");  // C1 CSI
  EXPECT_EQ(EscapedText("caf\xe9"), "caf\\xe9");
  EXPECT_TRUE(IsValidUtf8("mod\xc3\xa8le"));
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_EQ(HexBytes("a\xff"), "61ff");
}

TEST(Printable, EscapesWhatIsNotPrintableAscii) {
  EXPECT_EQ(Printable("plain.img"), "'plain.img'");
  EXPECT_EQ(Printable(std::string("a\0\n\x1b'\\\xff", 7)), "'a\\x00\\x0a\\x1b\\x27\\x5c\\xff'");
  EXPECT_EQ(Printable("abcdef", 3), "'abc...'");
}

}  // namespace
}  // namespace vramflow
