// SPDX-License-Identifier: MIT
// `vramflow streamer`'s command line (criu-image-streamer's options, parsed
// as it parses them, plus vramflow's own) and the messages of CRIU's
// --stream socket (image_streamer/criu_image_socket.h), decoded as hostile input.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "image_streamer/criu_image_socket.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "tools/streamer_command.h"

namespace vramflow {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;
using testing::VramflowBinary;
constexpr auto& Q = testing::ShellQuote;

CommandResult RunLine(const std::string& line) {
  CommandResult r;
  r.code = RunCommand("timeout 20 " + line + " 2>&1", &r.output);
  return r;
}

TEST(StreamerCommand, ParsesCriuImageStreamersOptionValues) {
  auto fds = ParseShardFds("10,11,12");
  ASSERT_TRUE(fds.ok());
  EXPECT_EQ(*fds, (std::vector<int>{10, 11, 12}));
  EXPECT_FALSE(ParseShardFds("").ok());
  EXPECT_FALSE(ParseShardFds("3,").ok());
  EXPECT_FALSE(ParseShardFds("-1").ok());
  EXPECT_FALSE(ParseShardFds("99999999999999999999").ok());

  auto ext = ParseExtFileFds("fs.tar:20,other:21");
  ASSERT_TRUE(ext.ok());
  ASSERT_EQ(ext->size(), 2u);
  EXPECT_EQ((*ext)[0], (std::pair<std::string, int>("fs.tar", 20)));
  EXPECT_FALSE(ParseExtFileFds("fs.tar").ok());
  EXPECT_FALSE(ParseExtFileFds(":20").ok());
  EXPECT_FALSE(ParseExtFileFds("../up:20").ok()) << "a name that leaves the images directory";
  EXPECT_FALSE(ParseExtFileFds("a:20,a:21").ok()) << "a name given twice";

  auto remap = ParsePortRemap("80:8080,443:8443");
  ASSERT_TRUE(remap.ok());
  EXPECT_EQ((*remap)[1], (std::pair<uint16_t, uint16_t>(443, 8443)));
  EXPECT_FALSE(ParsePortRemap("80").ok());
  EXPECT_FALSE(ParsePortRemap("80:65536").ok());
}

// Called as criu-image-streamer (a link), vramflow is `vramflow streamer`:
// -V answers, options go before the subcommand as criu-image-streamer wants
// (and after it too), several shard fds and a misplaced option are refused
// with exit status 2 and a message saying why.
TEST(StreamerCommand, RunsAsCriuImageStreamer) {
  TempDir dir;
  const std::string link = dir.File("criu-image-streamer");
  std::filesystem::create_symlink(VramflowBinary(), link);
  CommandResult r = RunLine(Q(link) + " -V");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("vramflow"), std::string::npos) << r.output;
  r = RunLine(Q(link) + " --help");
  EXPECT_EQ(r.code, 0);
  for (const char* option : {"--images-dir", "--shard-fds", "--ext-file-fds", "--progress-fd", "--tcp-listen-remap",
                             "capture", "serve", "extract"})
    EXPECT_NE(r.output.find(option), std::string::npos) << option << " missing from:\n" << r.output;

  r = RunLine(Q(link) + " -D " + Q(dir.File("img")) + " --shard-fds 0,1 serve");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("one fd"), std::string::npos) << r.output;
  r = RunLine(Q(link) + " -D " + Q(dir.File("img")) + " --tcp-listen-remap 80:81 extract");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("serve only"), std::string::npos) << r.output;
  r = RunLine(Q(VramflowBinary()) + " streamer -D " + Q(dir.File("img")) + " capture --from x.vfs");
  EXPECT_EQ(r.code, 2) << r.output;
  r = RunLine(Q(VramflowBinary()) + " streamer capture");
  EXPECT_EQ(r.code, 2) << "no --images-dir: " << r.output;
  r = RunLine(Q(VramflowBinary()) + " streamer -D " + Q(dir.File("img")) + " serve --listen localhost:7000");
  EXPECT_EQ(r.code, 2) << "an address without its scheme: " << r.output;
}

// --base and its companions (issue 21): where they apply and what a base
// can be, refused with exit status 2 before anything starts; a base that
// cannot be opened fails capture before it binds its socket.
TEST(StreamerCommand, BaseFlagsAreChecked) {
  TempDir dir;
  const std::string streamer = Q(VramflowBinary()) + " streamer -D " + Q(dir.File("img"));
  struct Case {
    std::string args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{{"--base-refs-only capture", "--base-refs-only"},
                                         {"--base " + Q(dir.File("b.vfs")) + " --base-refs-only serve", "capture"},
                                         {"--digests serve", "--digests"},
                                         {"--base tcp://127.0.0.1:7000 capture", "read by ranges"},
                                         {"--base - capture", "read by ranges"}}) {
    CommandResult r = RunLine(streamer + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << ": " << r.output;
  }
  CommandResult missing =
      RunLine(streamer + " -o " + Q(dir.File("out.vfs")) + " --base " + Q(dir.File("no-such.vfs")) + " capture");
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("--base " + dir.File("no-such.vfs")), std::string::npos) << missing.output;
  EXPECT_EQ(missing.output.find("socket-init"), std::string::npos) << missing.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("out.vfs")));
}

TEST(CriuImageSocket, MessagesRoundTrip) {
  auto name = DecodeImageRequest(EncodeImageRequest("pages-1.img"));
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(*name, "pages-1.img");
  const std::string long_name(300, 'x');  // a two-byte length
  name = DecodeImageRequest(EncodeImageRequest(long_name));
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(*name, long_name);
  auto exists = DecodeImageReply(EncodeImageReply(true));
  ASSERT_TRUE(exists.ok());
  EXPECT_TRUE(*exists);
  exists = DecodeImageReply(EncodeImageReply(false));
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE(*exists);
}

// Whatever CRIU's peer sends is checked: names must be plain file names of
// 1 to 4096 bytes, lengths must match, the varint must end.
TEST(CriuImageSocket, RefusesHostileRequests) {
  for (const std::string& bad : {std::string("../etc/passwd"), std::string("a/b"), std::string(".."),
                                 std::string("a\0b", 3), std::string(4097, 'x')}) {
    auto name = DecodeImageRequest(EncodeImageRequest(bad));
    EXPECT_FALSE(name.ok()) << "accepted '" << bad.substr(0, 40) << "'";
  }
  EXPECT_FALSE(DecodeImageRequest({}).ok());
  EXPECT_FALSE(DecodeImageRequest({0x0a}).ok());
  EXPECT_FALSE(DecodeImageRequest({0x12, 0x01, 'a'}).ok()) << "field 2";
  EXPECT_FALSE(DecodeImageRequest({0x0a, 0x05, 'a'}).ok()) << "length beyond the message";
  EXPECT_FALSE(DecodeImageRequest({0x0a, 0x01, 'a', 'b'}).ok()) << "bytes after the name";
  EXPECT_FALSE(DecodeImageRequest({0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}).ok()) << "a varint that does not end";
  EXPECT_FALSE(DecodeImageReply({0x08, 0x02}).ok());
  EXPECT_FALSE(DecodeImageReply({0x08}).ok());
}

// The socket file's removal is registered in the same step as the bind: an
// interrupt's cleanup, run while the socket is still held, removes the
// file; once the cleanup has begun, no socket file is made at all. (Bound
// first and registered after, a SIGTERM in between left the file, once in
// CI under ASan: StreamerCaptureCli.SigtermRemovesTheSocket.)
TEST(CriuImageSocket, ItsFileIsRemovedByAnInterruptAtAnyMoment) {
  TempDir dir;
  const std::string path = ImageStreamerSocketPath(dir.path(), /*capture=*/true);
  {
    CleanupRegistry cleanup;
    Result<CriuImageSocket> socket = CriuImageSocket::Listen(dir.path(), /*capture=*/true, &cleanup);
    ASSERT_TRUE(socket.ok()) << socket.status().ToString();
    EXPECT_TRUE(std::filesystem::exists(path));
    cleanup.Run("interrupted by SIGTERM");
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  CleanupRegistry cleanup;
  cleanup.Run("interrupted by SIGTERM");
  Result<CriuImageSocket> late = CriuImageSocket::Listen(dir.path(), /*capture=*/true, &cleanup);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Status::Code::kCancelled) << late.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace vramflow
