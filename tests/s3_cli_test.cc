// SPDX-License-Identifier: MIT
// The `vramflow` command line against a real Ceph RGW (S3Rgw.*, see
// s3_rgw_fixture.h): pack, unpack, inspect, verify and demo with s3:// URIs,
// checked against the `aws` CLI (Debian's awscli) on the same bucket. They
// run the built binary through a shell, as cli_test.cc does, and skip with
// the reason when no RGW is configured.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "tests/support/s3_fault_proxy.h"
#include "tests/support/s3_rgw_fixture.h"
#include "tests/support/shell.h"
#include "transport/aws/xml.h"
#include "transport/s3/s3_client.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;

using testing::CommandResult;
constexpr auto& Q = testing::ShellQuote;  // short: it quotes every word below

CommandResult Sh(const std::string& line) { return testing::RunShell(line); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

#define EXPECT_CODE(result, expected) EXPECT_EQ((result).code, (expected)) << (result).output
#define ASSERT_CODE(result, expected) ASSERT_EQ((result).code, (expected)) << (result).output

// Debian's awscli (/usr/bin/aws: a pip-installed aws may come first on PATH), else any aws.
std::string AwsCli() {
  if (::access("/usr/bin/aws", X_OK) == 0) return "/usr/bin/aws";
  return Sh("command -v aws").code == 0 ? "aws" : "";
}

// `vramflow ARGS` (shell words), with `env` (shell assignments, or a `cd DIR &&`) before it.
CommandResult Vf(const std::string& args, const std::string& env = "") {
  return Sh(env + (env.empty() ? "" : " ") + Q(VRAMFLOW_BINARY) + " " + args);
}

// `AWS --endpoint-url $AWS_ENDPOINT_URL ARGS` (Debian's awscli 2.9 ignores AWS_ENDPOINT_URL).
CommandResult Aws(const std::string& aws, const std::string& args) {
  return Sh(aws + " --endpoint-url \"$AWS_ENDPOINT_URL\" " + args);
}

// A fresh directory with two model-like inputs of two word sizes (a stream of
// a few 5 MiB parts), removed with its contents when destroyed.
class Work {
 public:
  Work() {
    char tmpl[] = "/tmp/vf-s3cli-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  ~Work() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  // Call with ASSERT_NO_FATAL_FAILURE.
  void MakeInputs() const {
    ASSERT_FALSE(dir_.empty());
    ASSERT_CODE(Vf("gen -k bf16 -s 9M --seed 3 -o " + Q(File("weights.bin"))), 0);
    ASSERT_CODE(Vf("gen -k adam-v -s 5M --seed 4 -o " + Q(File("optimizer.bin"))), 0);
  }
  const std::string& dir() const { return dir_; }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string Inputs() const { return Q(File("weights.bin")) + " " + Q(File("optimizer.bin")); }

 private:
  std::string dir_;
};

#define NEED_AWS(aws)               \
  const std::string aws = AwsCli(); \
  if (aws.empty()) GTEST_SKIP() << "no aws CLI (scripts/setup.sh installs Debian's awscli)"

//! pack -o s3:// writes exactly the bytes pack -o FILE writes (streams are
//! deterministic), as the aws CLI downloads them; verify s3:// passes.
TEST_F(S3Rgw, PackToS3EqualsPackToFileAndVerifies) {
  NEED_AWS(aws);
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  const std::string options = "-c auto --chunk-size 1M -j 2 --max-memory 64M -q";
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(Uri("ckpt.vfs")) + " " + options), 0);
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(w.File("local.vfs")) + " " + options), 0);
  ASSERT_CODE(Aws(aws, "s3 cp --only-show-errors " + Q(Uri("ckpt.vfs")) + " " + Q(w.File("downloaded.vfs"))), 0);
  const std::string local = ReadFile(w.File("local.vfs"));
  ASSERT_GT(local.size(), 10u << 20) << "meant to span several 5 MiB parts";
  EXPECT_TRUE(ReadFile(w.File("downloaded.vfs")) == local) << "the uploaded object differs from pack -o FILE";

  CommandResult v = Vf("verify " + Q(Uri("ckpt.vfs")));
  EXPECT_CODE(v, 0);
  EXPECT_TRUE(Contains(v.output, "OK: " + Uri("ckpt.vfs") + ": 2 objects")) << v.output;
}

//! A stream the aws CLI uploaded is unpacked from s3:// into identical files.
TEST_F(S3Rgw, UnpackReadsAStreamTheAwsCliUploaded) {
  NEED_AWS(aws);
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(w.File("local.vfs")) + " -q"), 0);
  ASSERT_CODE(Aws(aws, "s3 cp --only-show-errors " + Q(w.File("local.vfs")) + " " + Q(Uri("uploaded.vfs"))), 0);
  CommandResult u = Vf("unpack " + Q(Uri("uploaded.vfs")) + " -o " + Q(w.File("out") + "/") + " --max-memory 64M");
  ASSERT_CODE(u, 0);
  EXPECT_TRUE(Contains(u.output, "unpacked 2 object(s)")) << u.output;
  for (const char* name : {"weights.bin", "optimizer.bin"}) {
    const std::string original = ReadFile(w.File(name));
    ASSERT_FALSE(original.empty());
    EXPECT_TRUE(ReadFile(w.File(std::string("out/") + name)) == original) << name;
  }
  // One object to stdout, as it is read.
  CommandResult one =
      Sh(Q(VRAMFLOW_BINARY) + " pack " + Q(w.File("weights.bin")) + " -q -o " + Q(Uri("one.vfs")) + " && " +
         Q(VRAMFLOW_BINARY) + " unpack -q " + Q(Uri("one.vfs")) + " -o - | cmp - " + Q(w.File("weights.bin")));
  EXPECT_CODE(one, 0);
}

//! inspect s3:// shows the objects (text and JSON); a missing key is a clear
//! error with a non-zero exit from inspect, verify and unpack.
TEST_F(S3Rgw, InspectWorksAndAMissingKeyFailsClearly) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(Uri("ckpt.vfs")) + " -q"), 0);
  CommandResult text = Vf("inspect " + Q(Uri("ckpt.vfs")));
  EXPECT_CODE(text, 0);
  for (const char* m : {"objects:  2", "weights.bin", "optimizer.bin", "status:   complete"})
    EXPECT_TRUE(Contains(text.output, m)) << m << "\n" << text.output;
  CommandResult json = Vf("inspect --json " + Q(Uri("ckpt.vfs")));
  EXPECT_CODE(json, 0);
  EXPECT_TRUE(Contains(json.output, "\"name\": \"weights.bin\"")) << json.output;

  const std::string missing = Uri("no-such-key.vfs");
  for (const std::string& command :
       {"inspect " + Q(missing), "verify " + Q(missing), "unpack " + Q(missing) + " -o " + Q(w.File("never"))}) {
    CommandResult r = Vf(command);
    EXPECT_CODE(r, 1);
    EXPECT_TRUE(Contains(r.output, missing + ": HeadObject: HTTP 404")) << command << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(w.File("never")));
}

//! Wrong credentials: a clear error naming the setting to check, exit 4, and
//! no object (nor a half-done upload) under the key.
TEST_F(S3Rgw, WrongCredentialsFailClearlyAndLeaveNoObject) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  const std::string wrong_secret = "AWS_SECRET_ACCESS_KEY=not-the-secret-key-at-all-000000000000000";
  CommandResult pack = Vf("pack " + w.Inputs() + " -o " + Q(Uri("denied.vfs")), wrong_secret);
  EXPECT_CODE(pack, 4);
  EXPECT_TRUE(Contains(pack.output, "vramflow pack: error:")) << pack.output;
  EXPECT_TRUE(Contains(pack.output, "HTTP 403 SignatureDoesNotMatch")) << pack.output;
  EXPECT_TRUE(Contains(pack.output, "check AWS_SECRET_ACCESS_KEY")) << pack.output;

  CommandResult small = Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(Uri("denied-small.vfs")),
                           "AWS_ACCESS_KEY_ID=NOSUCHACCESSKEY00000");
  EXPECT_CODE(small, 4);
  EXPECT_TRUE(Contains(small.output, "InvalidAccessKeyId")) << small.output;
  EXPECT_TRUE(Contains(small.output, "check AWS_ACCESS_KEY_ID")) << small.output;
  auto keys = Client()->ListKeys(prefix_);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_TRUE(keys->empty()) << (*keys)[0];

  // Reading: HEAD has no body to name the error, the hint still says what to check.
  ASSERT_CODE(Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(Uri("readable.vfs")) + " -q"), 0);
  CommandResult inspect = Vf("inspect " + Q(Uri("readable.vfs")), wrong_secret);
  EXPECT_CODE(inspect, 4);
  EXPECT_TRUE(Contains(inspect.output, "HTTP 403")) << inspect.output;
  EXPECT_TRUE(Contains(inspect.output, "AWS_SECRET_ACCESS_KEY")) << inspect.output;
}

//! demo --to s3:// uploads, reads the object back and restores every byte here.
TEST_F(S3Rgw, DemoToS3RestoresFromTheObject) {
  CommandResult d = Vf("demo --gpus 1 --size 16M --to " + Q(Uri("demo.vfs")) + " --max-memory 64M -q");
  EXPECT_CODE(d, 0);
  EXPECT_TRUE(Contains(d.output, "every byte of every BO matches")) << d.output;
  EXPECT_FALSE(Contains(d.output, "the receiver restored")) << d.output;
  EXPECT_CODE(Vf("verify -q " + Q(Uri("demo.vfs"))), 0);
}

//! unpack writes files: -o s3:// is a bad command line, not a local path.
TEST_F(S3Rgw, UnpackToS3IsAUsageError) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(w.File("local.vfs")) + " -q"), 0);
  CommandResult r = Vf("unpack " + Q(w.File("local.vfs")) + " -o " + Q(Uri("out/")), "cd " + Q(w.dir()) + " &&");
  EXPECT_CODE(r, 2);
  EXPECT_TRUE(Contains(r.output, "vramflow send")) << r.output;
  EXPECT_FALSE(fs::exists(w.File("s3:")));
  auto keys = Client()->ListKeys(prefix_);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_TRUE(keys->empty()) << (*keys)[0];
}

//! An existing object is refused as an existing file is: pack -o s3:// says
//! so, names the object and suggests --force, and leaves the object as it
//! was; with --force it is replaced. demo --to follows the same rule.
TEST_F(S3Rgw, PackRefusesAnExistingObjectUnlessForced) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  const std::string uri = Uri("existing.vfs");
  ASSERT_CODE(Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(uri) + " -q"), 0);
  auto holds = [&](const char* name) {
    return Sh(Q(VRAMFLOW_BINARY) + " unpack -q " + Q(uri) + " -o - | cmp - " + Q(w.File(name))).code == 0;
  };
  ASSERT_TRUE(holds("optimizer.bin"));

  CommandResult refused = Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(uri));
  EXPECT_CODE(refused, 1);
  EXPECT_TRUE(
      Contains(refused.output, "vramflow pack: error: already exists: " + uri + " exists (use --force to overwrite)"))
      << refused.output;
  EXPECT_TRUE(holds("optimizer.bin")) << "a refused pack changed the object";
  // The same rule for a file, for comparison.
  ASSERT_CODE(Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(w.File("local.vfs")) + " -q"), 0);
  CommandResult file = Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(w.File("local.vfs")));
  EXPECT_CODE(file, 1);
  EXPECT_TRUE(Contains(file.output, "exists (use --force to overwrite)")) << file.output;

  ASSERT_CODE(Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(uri) + " --force -q"), 0);
  EXPECT_TRUE(holds("weights.bin")) << "--force did not replace the object";

  CommandResult unforced = Vf("demo --gpus 1 --size 8M --to " + Q(uri) + " --max-memory 64M -q");
  EXPECT_CODE(unforced, 1);
  EXPECT_TRUE(Contains(unforced.output, "exists (use --force to overwrite)")) << unforced.output;
  EXPECT_TRUE(holds("weights.bin")) << "a refused demo changed the object";
  CommandResult demo = Vf("demo --gpus 1 --size 8M --to " + Q(uri) + " --max-memory 64M -q --force");
  EXPECT_CODE(demo, 0);
  EXPECT_TRUE(Contains(demo.output, "every byte of every BO matches")) << demo.output;
}

//! pack -o s3:// through a proxy that fails some UploadParts (500
//! InternalError twice, 503 SlowDown once) retries them: exit 0, and the
//! object is the stream pack -o FILE writes, which verify s3:// accepts.
TEST_F(S3Rgw, PackRetriesFailedPartsAndTheObjectVerifies) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  auto proxy = testing::FaultProxy::Start(std::getenv("AWS_ENDPOINT_URL"));
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  using Fault = testing::FaultProxy::Fault;
  (*proxy)->Arm(testing::FaultProxy::UploadPartNumber(2), Fault::kInternalError500, 2);
  (*proxy)->Arm(testing::FaultProxy::UploadPartNumber(1), Fault::kSlowDown503, 1);

  const std::string options = "-c auto --chunk-size 1M -j 2 --max-memory 64M -q";  // 5 MiB parts
  CommandResult pack = Vf("pack " + w.Inputs() + " -o " + Q(Uri("retried.vfs")) + " " + options,
                          "AWS_ENDPOINT_URL=" + Q((*proxy)->endpoint()));
  ASSERT_CODE(pack, 0);
  int part2 = 0, injected = 0;
  for (const auto& seen : (*proxy)->Log()) {
    part2 += testing::FaultProxy::UploadPartNumber(2)(seen);
    injected += seen.injected;
  }
  EXPECT_EQ(part2, 3);
  EXPECT_EQ(injected, 3);

  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(w.File("local.vfs")) + " " + options), 0);
  const std::string local = ReadFile(w.File("local.vfs"));
  ASSERT_GT(local.size(), 10u << 20) << "meant to span three 5 MiB parts";
  auto source = OpenSource(Uri("retried.vfs"), options_);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::string object(local.size() + 1, '\0');
  auto n = ReadFully(**source, std::span(reinterpret_cast<uint8_t*>(object.data()), object.size()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  object.resize(*n);
  EXPECT_TRUE(object == local) << "the uploaded object differs from pack -o FILE";
  CommandResult v = Vf("verify " + Q(Uri("retried.vfs")));
  EXPECT_CODE(v, 0);
  EXPECT_TRUE(Contains(v.output, "OK: " + Uri("retried.vfs") + ": 2 objects")) << v.output;
}

// A pack killed with SIGKILL mid-upload cannot abort its multipart upload,
// but S3 shows nothing under the key until CompleteMultipartUpload: no
// listing, HEAD or GET sees a partial checkpoint. Its parts stay stored
// until the upload is aborted (docs/S3.md, "Interrupted and killed uploads").
TEST_F(S3Rgw, PackKilledMidUploadLeavesNoVisibleObject) {
  Work w;
  ASSERT_FALSE(w.dir().empty());
  ASSERT_CODE(Vf("gen -k adam-v -s 24M --seed 5 -o " + Q(w.File("big.bin"))), 0);
  const std::string fifo = w.File("input");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The packer reads the fifo, so it uploads what it is given and then waits.
  // Its upload journal of its own: no other test's upload (which aborts
  // the journaled uploads of dead writers first) takes this one away.
  CommandResult started =
      Sh("XDG_STATE_HOME=" + Q(w.File("state")) + " " + Q(VRAMFLOW_BINARY) + " pack -c raw -q " + Q(fifo) + " -o " +
         Q(Uri("killed.vfs")) + " > " + Q(w.File("pack.log")) + " 2>&1 & echo $!");
  ASSERT_CODE(started, 0);
  const pid_t pid = static_cast<pid_t>(std::stol(started.output));
  int fd = ::open(fifo.c_str(), O_WRONLY);  // returns once the packer has opened it
  ASSERT_GE(fd, 0);
  const std::string bytes = ReadFile(w.File("big.bin"));
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));

  // Wait until parts of the upload are stored, then kill the packer.
  auto client = Client();
  const std::string key = prefix_ + "killed.vfs";
  std::string upload_id;
  size_t parts = 0;
  for (int i = 0; i < 200 && parts < 2; ++i) {
    auto uploads = OpenUploads(*client, key);
    ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
    if (!uploads->empty()) {
      upload_id = (*uploads)[0];
      s3::Request list_parts;
      list_parts.method = "GET";
      list_parts.key = key;
      list_parts.query = {{"uploadId", upload_id}};
      list_parts.what = "ListParts";
      auto listed = client->Send(list_parts);
      ASSERT_TRUE(listed.ok()) << listed.status().ToString();
      parts = s3::XmlFields(listed->body, "PartNumber").size();
    }
    if (parts < 2) ::usleep(100 * 1000);
  }
  ASSERT_GE(parts, 2u) << "the packer never stored two parts: " << ReadFile(w.File("pack.log"));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ::close(fd);
  int status = 0;
  (void)::waitpid(pid, &status, 0);  // not our child when a shell started it: then it is simply gone

  // Nothing under the key: not in a listing, not to HEAD (inspect), not to aws.
  auto keys = client->ListKeys(prefix_);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_TRUE(keys->empty()) << (*keys)[0];
  CommandResult inspect = Vf("inspect " + Q(Uri("killed.vfs")));
  EXPECT_CODE(inspect, 1);
  EXPECT_TRUE(Contains(inspect.output, "404")) << inspect.output;
  if (const std::string aws = AwsCli(); !aws.empty()) {
    CommandResult ls = Aws(aws, "s3 ls " + Q(Uri("")));
    EXPECT_FALSE(Contains(ls.output, "killed.vfs")) << ls.output;
  }

  // The parts are still stored under the pending upload; aborting it (what a
  // bucket lifecycle rule or `aws s3api abort-multipart-upload` does) frees them.
  s3::Request abort;
  abort.method = "DELETE";
  abort.key = key;
  abort.query = {{"uploadId", upload_id}};
  abort.what = "AbortMultipartUpload";
  auto aborted = client->Send(abort);
  EXPECT_TRUE(aborted.ok()) << aborted.status().ToString();
}

//! A base store on S3 (docs/NETWORK.md, "Bases"): unpack --listen offers the
//! streams under s3://BUCKET/PREFIX, the sender builds on the one it holds
//! too, only the changed file travels, and the restore reads the base's
//! referenced chunks from the object.
TEST_F(S3Rgw, IncrementalNetBaseStoreOnS3) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(
      Sh("mkdir -p " + Q(w.File("v2")) + " && cp " + Q(w.File("weights.bin")) + " " + Q(w.File("v2/weights.bin"))), 0);
  ASSERT_CODE(Vf("gen -k adam-v -s 5M --seed 5 -o " + Q(w.File("v2/optimizer.bin"))), 0);
  const std::string options = " -c auto --chunk-size 1M -q";
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(w.File("ck1.vfs")) + options), 0);
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(Uri("store/ck1.vfs")) + options), 0);
  const std::string sock = w.File("sock");
  const std::string line =
      Q(VRAMFLOW_BINARY) + " unpack --listen unix:" + Q(sock) + " -o " + Q(w.File("out")) + " --base-store " +
      Q(Uri("store/")) + " -q --accept-timeout 30 > " + Q(w.File("unpack.log")) + " 2>&1 & pid=$!; " +
      "for i in $(seq 400); do python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' " +
      Q(sock) + " 2>/dev/null && break; sleep 0.05; done; " + Q(VRAMFLOW_BINARY) + " pack " +
      Q(w.File("v2/weights.bin")) + " " + Q(w.File("v2/optimizer.bin")) + " --to unix:" + Q(sock) + " --base " +
      Q(w.File("ck1.vfs")) + options + " --json; sent=$?; wait $pid; echo \"sent=$sent restored=$?\"; cat " +
      Q(w.File("unpack.log"));
  CommandResult r = Sh(line);
  EXPECT_CODE(r, 0);
  EXPECT_TRUE(Contains(r.output, "sent=0 restored=0")) << r.output;
  EXPECT_TRUE(Contains(r.output, "the receiver holds " + w.File("ck1.vfs"))) << r.output;
  EXPECT_TRUE(ReadFile(w.File("out/weights.bin")) == ReadFile(w.File("weights.bin")));
  EXPECT_TRUE(ReadFile(w.File("out/optimizer.bin")) == ReadFile(w.File("v2/optimizer.bin")));
  // Only the optimizer state (5 MiB, compressed) travelled, not the 9 MiB of weights.
  const std::string key = "\"stream_bytes\": ";
  const size_t at = r.output.find(key);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::stoull(r.output.substr(at + key.size())), 6ull << 20) << r.output;
}

//! An incremental checkpoint whose base is an S3 object, and which is an S3
//! object itself: pack reads the base by ranges (references only: its index
//! and digests, and the chunk frames it references, to prove them), the
//! stream records the base's URI, and
//! unpack and verify fetch the referenced chunks from it.
TEST_F(S3Rgw, IncrementalPackAndUnpackAgainstABaseOnS3) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(
      Sh("mkdir -p " + Q(w.File("v2")) + " && cp " + Q(w.File("weights.bin")) + " " + Q(w.File("v2/weights.bin"))), 0);
  ASSERT_CODE(Vf("gen -k adam-v -s 5M --seed 6 -o " + Q(w.File("v2/optimizer.bin"))), 0);
  const std::string options = " -c auto --chunk-size 1M -q";
  ASSERT_CODE(Vf("pack " + w.Inputs() + " --digests -o " + Q(Uri("inc/ck1.vfs")) + options), 0);
  const std::string v2 = Q(w.File("v2/weights.bin")) + " " + Q(w.File("v2/optimizer.bin"));
  CommandResult packed = Vf("pack " + v2 + " --base " + Q(Uri("inc/ck1.vfs")) + " --base-refs-only --json -o " +
                            Q(Uri("inc/ck2.vfs")) + options);
  ASSERT_CODE(packed, 0);
  EXPECT_TRUE(Contains(packed.output, "\"base_ref_bytes\"")) << packed.output;
  CommandResult listed = Vf("inspect --json " + Q(Uri("inc/ck2.vfs")));
  ASSERT_CODE(listed, 0);
  EXPECT_TRUE(Contains(listed.output, Uri("inc/ck1.vfs"))) << listed.output;  // the base as recorded
  ASSERT_CODE(Vf("verify -q " + Q(Uri("inc/ck2.vfs"))), 0);
  ASSERT_CODE(Vf("unpack -q " + Q(Uri("inc/ck2.vfs")) + " -o " + Q(w.File("out") + "/")), 0);
  EXPECT_TRUE(ReadFile(w.File("out/weights.bin")) == ReadFile(w.File("weights.bin")));
  EXPECT_TRUE(ReadFile(w.File("out/optimizer.bin")) == ReadFile(w.File("v2/optimizer.bin")));
  // A base given that is not the one the stream was built on: refused.
  ASSERT_CODE(Vf("pack " + v2 + " -o " + Q(Uri("inc/other.vfs")) + options), 0);
  CommandResult wrong = Vf("unpack -q " + Q(Uri("inc/ck2.vfs")) + " --base " + Q(Uri("inc/other.vfs")) + " -o " +
                           Q(w.File("wrong") + "/"));
  EXPECT_NE(wrong.code, 0);
  EXPECT_TRUE(Contains(wrong.output, "wrong base")) << wrong.output;
  EXPECT_FALSE(std::filesystem::exists(w.File("wrong")));
}

// --- Server-side encryption (scripts/rgw.sh sets RGW up for SSE-C over the
// loopback's plain HTTP and for SSE-KMS with its "testing" key backend) ---

// "--bucket B --key K" of `uri` (an s3:// URI of this bucket), for aws s3api.
std::string AwsObject(const std::string& bucket, const std::string& uri) {
  const std::string key = uri.substr(("s3://" + bucket + "/").size());
  return "--bucket " + Q(bucket) + " --key " + Q(key);
}

//! --sse-c-key: pack writes the object encrypted with the key, as the aws
//! CLI sees it (only when it sends the key too); verify, unpack and inspect
//! read it with the key. Without it, or with another, S3 refuses, and the
//! error says what to check. A multipart upload and a single PutObject.
TEST_F(S3Rgw, SseCObjectsAreWrittenAndReadWithTheirKeyOnly) {
  NEED_AWS(aws);
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Sh("openssl rand 32 > " + Q(w.File("key")) + " && openssl rand -base64 32 > " + Q(w.File("other"))), 0);
  const std::string key = " --sse-c-key " + Q(w.File("key"));
  const std::string big = Uri("ssec/big.vfs"), small = Uri("ssec/small.vfs");
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(big) + key + " -q"), 0);  // parts of 5 MiB and more
  ASSERT_CODE(Vf("gen -k fp32 -s 256K -o " + Q(w.File("small.bin"))), 0);
  ASSERT_CODE(Vf("pack " + Q(w.File("small.bin")) + " -o " + Q(small) + key + " -q"), 0);  // one PutObject
  for (const std::string& uri : {big, small}) {
    CommandResult head = Aws(aws, "s3api head-object " + AwsObject(bucket_, uri) +
                                      " --sse-customer-algorithm AES256 --sse-customer-key fileb://" +
                                      Q(w.File("key")) + " --query SSECustomerAlgorithm --output text");
    EXPECT_CODE(head, 0);
    EXPECT_TRUE(Contains(head.output, "AES256")) << head.output;
    EXPECT_NE(Aws(aws, "s3api head-object " + AwsObject(bucket_, uri)).code, 0) << "readable without the key";
    EXPECT_CODE(Vf("verify -q " + Q(uri) + key), 0);
    CommandResult keyless = Vf("verify -q " + Q(uri));
    EXPECT_CODE(keyless, 1);
    EXPECT_TRUE(Contains(keyless.output, "only with its key, --sse-c-key")) << keyless.output;
    // RGW answers 400 ("is the object encrypted with --sse-c-key's key?"),
    // AWS 403 ("... the object's SSE-C key is not --sse-c-key's").
    CommandResult other = Vf("verify -q " + Q(uri) + " --sse-c-key " + Q(w.File("other")));
    EXPECT_NE(other.code, 0);
    EXPECT_TRUE(Contains(other.output, "--sse-c-key's")) << other.output;
  }
  ASSERT_CODE(Vf("unpack -q " + Q(big) + key + " -o " + Q(w.File("out") + "/")), 0);
  EXPECT_TRUE(ReadFile(w.File("out/weights.bin")) == ReadFile(w.File("weights.bin")));
  EXPECT_TRUE(ReadFile(w.File("out/optimizer.bin")) == ReadFile(w.File("optimizer.bin")));
  CommandResult listed = Vf("inspect " + Q(small) + key);
  EXPECT_CODE(listed, 0);
  EXPECT_TRUE(Contains(listed.output, "status:   complete")) << listed.output;
}

//! An object encrypted with SSE-C is no destination without --force,
//! whether pack has no key or another: S3 answers HEAD with 400 or 403 for
//! both, and a GET of its first byte says why. (Before, a pack without a
//! key replaced it.)
TEST_F(S3Rgw, PackRefusesAnSseCObjectUnlessForced) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Sh("openssl rand 32 > " + Q(w.File("key")) + " && openssl rand 32 > " + Q(w.File("other"))), 0);
  const std::string uri = Uri("ssec/existing.vfs");
  const std::string key = " --sse-c-key " + Q(w.File("key")), other = " --sse-c-key " + Q(w.File("other"));
  ASSERT_CODE(Vf("pack " + Q(w.File("optimizer.bin")) + " -o " + Q(uri) + key + " -q"), 0);
  auto holds = [&](const std::string& with, const char* name) {
    return Sh(Q(VRAMFLOW_BINARY) + " unpack -q " + Q(uri) + with + " -o - | cmp - " + Q(w.File(name))).code == 0;
  };
  CommandResult keyless = Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(uri));
  EXPECT_CODE(keyless, 1);
  EXPECT_TRUE(Contains(keyless.output, uri + " exists, encrypted with SSE-C (read with --sse-c-key) (use --force"))
      << keyless.output;
  CommandResult another = Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(uri) + other);
  EXPECT_CODE(another, 1);
  EXPECT_TRUE(Contains(another.output, uri + " exists, encrypted with another SSE-C key (use --force"))
      << another.output;
  EXPECT_TRUE(holds(key, "optimizer.bin")) << "a refused pack changed the object";
  ASSERT_CODE(Vf("pack " + Q(w.File("weights.bin")) + " -o " + Q(uri) + other + " --force -q"), 0);
  EXPECT_TRUE(holds(other, "weights.bin")) << "--force did not replace the object";
}

//! --sse aws:kms --sse-kms-key-id: S3 encrypts the object under that key,
//! as the aws CLI's head-object shows; reading it needs no key of ours. A
//! mode S3 does not know is a bad command line.
TEST_F(S3Rgw, SseKmsObjectsAreEncryptedUnderTheKeyAskedFor) {
  NEED_AWS(aws);
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  const std::string uri = Uri("kms/ck.vfs");
  ASSERT_CODE(Vf("pack " + w.Inputs() + " -o " + Q(uri) + " --sse aws:kms --sse-kms-key-id vramflow-test-kms-1 -q"), 0);
  CommandResult head = Aws(aws, "s3api head-object " + AwsObject(bucket_, uri) +
                                    " --query '[ServerSideEncryption,SSEKMSKeyId]' --output text");
  EXPECT_CODE(head, 0);
  EXPECT_TRUE(Contains(head.output, "aws:kms") && Contains(head.output, "vramflow-test-kms-1")) << head.output;
  EXPECT_CODE(Vf("verify -q " + Q(uri)), 0);
  CommandResult bad = Vf("pack " + w.Inputs() + " -o " + Q(Uri("kms/bad.vfs")) + " --sse kms");
  EXPECT_CODE(bad, 2);
  EXPECT_TRUE(Contains(bad.output, "--sse: 'kms' is neither AES256 (SSE-S3) nor aws:kms (SSE-KMS)")) << bad.output;
}

//! --sse AES256 is never reported done while the object is stored without
//! it. Ceph RGW 16 ignores the header (its replies do not echo it): pack
//! then fails, and leaves neither the object nor an upload. An S3 that
//! applies it echoes it, and the object says so.
TEST_F(S3Rgw, SseS3IsAppliedOrNothingIsLeft) {
  NEED_AWS(aws);
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Vf("gen -k fp32 -s 256K -o " + Q(w.File("small.bin"))), 0);
  for (const std::string& inputs : {w.Inputs(), Q(w.File("small.bin"))}) {
    const std::string uri = Uri(inputs == w.Inputs() ? "sse-s3/big.vfs" : "sse-s3/small.vfs");
    CommandResult packed = Vf("pack " + inputs + " -o " + Q(uri) + " --sse AES256 -q");
    CommandResult head =
        Aws(aws, "s3api head-object " + AwsObject(bucket_, uri) + " --query ServerSideEncryption --output text");
    if (packed.code == 0) {
      EXPECT_CODE(head, 0);
      EXPECT_TRUE(Contains(head.output, "AES256")) << head.output;
    } else {
      EXPECT_CODE(packed, 1);
      EXPECT_TRUE(Contains(packed.output,
                           "did not confirm the server-side encryption asked for: its reply has no "
                           "'x-amz-server-side-encryption: AES256'"))
          << packed.output;
      EXPECT_NE(head.code, 0) << "the object stored without encryption is still there: " << head.output;
    }
  }
  std::shared_ptr<s3::Client> client = Client();
  Result<std::vector<std::string>> open = OpenUploads(*client, prefix_);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_TRUE(open->empty()) << open->size() << " uploads left open";
}

//! One --sse-c-key serves every object a command reads: an incremental
//! stream's base on S3 too.
TEST_F(S3Rgw, AnIncrementalStreamsBaseOnS3IsReadWithTheSseCKey) {
  Work w;
  ASSERT_NO_FATAL_FAILURE(w.MakeInputs());
  ASSERT_CODE(Sh("openssl rand 32 > " + Q(w.File("key"))), 0);
  const std::string key = " --sse-c-key " + Q(w.File("key"));
  ASSERT_CODE(Sh("mkdir -p " + Q(w.File("v2")) + " && cp " + Q(w.File("weights.bin")) + " " + Q(w.File("v2"))), 0);
  ASSERT_CODE(Vf("gen -k adam-v -s 5M --seed 6 -o " + Q(w.File("v2/optimizer.bin"))), 0);
  ASSERT_CODE(Vf("pack " + w.Inputs() + " --digests -o " + Q(Uri("ssec-inc/ck1.vfs")) + key + " -q"), 0);
  const std::string v2 = Q(w.File("v2/weights.bin")) + " " + Q(w.File("v2/optimizer.bin"));
  ASSERT_CODE(Vf("pack " + v2 + " --base " + Q(Uri("ssec-inc/ck1.vfs")) + " --base-refs-only -o " +
                 Q(Uri("ssec-inc/ck2.vfs")) + key + " -q"),
              0);
  ASSERT_CODE(Vf("unpack -q " + Q(Uri("ssec-inc/ck2.vfs")) + key + " -o " + Q(w.File("out") + "/")), 0);
  EXPECT_TRUE(ReadFile(w.File("out/weights.bin")) == ReadFile(w.File("weights.bin")));
  EXPECT_TRUE(ReadFile(w.File("out/optimizer.bin")) == ReadFile(w.File("v2/optimizer.bin")));
}

}  // namespace
}  // namespace vramflow
