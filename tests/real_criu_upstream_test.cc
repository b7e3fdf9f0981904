// SPDX-License-Identifier: MIT
// RealCriu.Upstream*: this plugin and upstream CRIU's image layout, under
// the real CRIU 4.2 (see real_criu_test.cc for the test bed).
//
// No AMD GPU here can produce upstream's images, so the fixtures are written
// the way upstream's plugin writes them (plugins/amdgpu/amdgpu_plugin.c and
// amdgpu_plugin_util.c in the CRIU snapshot), with upstream's own schema:
// criu-amdgpu.proto from the snapshot, compiled for the tests only
// (tests/CMakeLists.txt), never our plugin/criu_amdgpu.proto. That means
//   amdgpu-kfd-<id>.img          a native size_t with the body's size, then
//                                criu_kfd (write_img_file);
//   amdgpu-pages-<id>-<gpu>.img  for every device entry with a gpu_id: a
//                                native size_t N, then the bytes of every BO
//                                of that GPU with VRAM or GTT in its flags,
//                                in bo_entries order, N bytes in all
//                                (dump_bo_contents); none for other BOs.
// The checks go the other way too: `vramflow criu export-upstream` writes
// that layout from our streams, and `protoc --decode` with upstream's
// schema parses our metadata image.
#include <cstring>

#include "criu-amdgpu.pb.h"  // upstream's schema (no package: criu_kfd, kfd_bo_entry, ...)
#include "plugin/kfd/kfd_ops.h"
#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

std::vector<uint8_t> ReadAll(const std::string& path) { return testing::ReadFileBytes(path); }

// The body of an image written by upstream's write_img_file: the native
// size_t first, then exactly that many bytes.
std::string UpstreamImageBody(const std::string& path) {
  const std::vector<uint8_t> bytes = ReadAll(path);
  size_t size = 0;
  EXPECT_GE(bytes.size(), sizeof size) << path;
  if (bytes.size() < sizeof size) return "";
  std::memcpy(&size, bytes.data(), sizeof size);
  EXPECT_EQ(size, bytes.size() - sizeof size) << path << ": the size header does not match the body";
  return std::string(bytes.begin() + sizeof size, bytes.end());
}

// Writes `body` as upstream's write_img_file does.
void WriteUpstreamImage(const std::string& path, const std::string& body) {
  std::vector<uint8_t> bytes(sizeof(size_t) + body.size());
  const size_t size = body.size();
  std::memcpy(bytes.data(), &size, sizeof size);
  std::memcpy(bytes.data() + sizeof size, body.data(), body.size());
  testing::WriteFileBytes(path, bytes);
}

std::string PagesName(int id, uint32_t gpu_id) {
  char name[64];
  std::snprintf(name, sizeof name, "amdgpu-pages-%d-%04x.img", id, gpu_id);  // IMG_KFD_PAGES_FILE
  return name;
}

bool HasContents(uint32_t alloc_flags) { return alloc_flags & (kKfdBoVram | kKfdBoGtt); }

class RealCriuUpstream : public RealCriu {
 protected:
  // A process whose BOs include doorbells, which have no contents and so no
  // bytes in upstream's pages files, between BOs that do. contents_[pid]
  // holds an empty vector for them.
  pid_t StartProcessWithDoorbells(uint64_t seed = 7) {
    const std::string node = dir_.File("nodes/app-" + std::to_string(seed));
    MakeKfdNode(node);
    const pid_t pid = StartSleeper(node, dir_.File("app.log"));
    started_.push_back(pid);
    std::vector<SimKfdBoSpec> bos;
    uint64_t addr = 0x7f0000000000ull;
    for (uint32_t gpu : kfd_->GpuIds()) {
      bos.push_back(SimKfdBoSpec{addr, 2ull << 20, kKfdBoVram, gpu});
      addr += 4ull << 20;
      bos.push_back(SimKfdBoSpec{addr, 8ull << 10, kKfdBoDoorbell, gpu});
      addr += 1ull << 20;
      bos.push_back(SimKfdBoSpec{addr, 256ull << 10, kKfdBoGtt, gpu});
      addr += 1ull << 20;
      bos.push_back(SimKfdBoSpec{addr, 64ull << 10, kKfdBoVram, gpu});
      addr += 1ull << 20;
    }
    EXPECT_TRUE(kfd_->AddProcess(pid, bos).ok());
    EXPECT_TRUE(kfd_->AdoptKfdFile(pid, node).ok());
    std::vector<std::vector<uint8_t>>& contents = contents_[pid];
    for (size_t i = 0; i < bos.size(); ++i) {
      contents.emplace_back();
      if (!HasContents(bos[i].alloc_flags)) continue;
      auto bytes = kfd_->BoBytes(pid, i);
      EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
      contents.back() = testing::ModelBytes(DataKind::kBf16Weights, bytes->size(), seed * 100 + i);
      std::copy(contents.back().begin(), contents.back().end(), bytes->begin());
    }
    return pid;
  }

  // Check() for processes with BOs without contents: those are skipped.
  void CheckBytes(pid_t pid) {
    ASSERT_TRUE(ProcessExists(pid)) << "restored process " << pid << " is not running";
    auto state = kfd_->ProcessState(pid);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(*state, SimKfdProcessState::kRunning) << "KFD did not resume the restored process";
    const std::vector<std::vector<uint8_t>>& contents = contents_.at(pid);
    size_t checked = 0;
    for (size_t i = 0; i < contents.size(); ++i) {
      if (contents[i].empty()) continue;
      auto bytes = kfd_->BoBytes(pid, i);
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      ASSERT_EQ(bytes->size(), contents[i].size());
      EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), contents[i].begin())) << "BO " << i << " differs";
      ++checked;
    }
    EXPECT_GT(checked, 0u);
  }

  // The one KFD image's id in images_.
  int KfdImageId() {
    int id = -1, count = 0;
    for (const auto& e : std::filesystem::directory_iterator(images_)) {
      const std::string name = e.path().filename();
      if (name.rfind("amdgpu-kfd-", 0) == 0) {
        id = std::atoi(name.c_str() + std::strlen("amdgpu-kfd-"));
        ++count;
      }
    }
    EXPECT_EQ(count, 1);
    return id;
  }

  // The upstream pages file of `gpu_id` for process `pid`'s image, as
  // upstream's dump_bo_contents writes it.
  std::vector<uint8_t> ExpectedPages(pid_t pid, const criu_kfd& image, uint32_t gpu_id) {
    std::vector<uint8_t> out(sizeof(size_t));
    for (int i = 0; i < image.bo_entries_size(); ++i) {
      const kfd_bo_entry& bo = image.bo_entries(i);
      if (bo.gpu_id() != gpu_id || !HasContents(bo.alloc_flags())) continue;
      const std::vector<uint8_t>& bytes = contents_.at(pid).at(i);
      EXPECT_EQ(bytes.size(), bo.size()) << "BO " << i;
      out.insert(out.end(), bytes.begin(), bytes.end());
    }
    const size_t size = out.size() - sizeof(size_t);
    std::memcpy(out.data(), &size, sizeof size);
    return out;
  }

  // Replaces this plugin's images of `pid` by the ones upstream's plugin
  // would have written for the same process: the KFD image rebuilt with
  // upstream's schema (BOs carrying GEM handles, which repeat across GPUs
  // as each GPU's DRM file numbers its own), and a raw pages file per GPU.
  void ReplaceWithUpstreamImages(pid_t pid) {
    const int id = KfdImageId();
    const std::string kfd_path = images_ + "/amdgpu-kfd-" + std::to_string(id) + ".img";
    criu_kfd dumped;
    ASSERT_TRUE(dumped.ParseFromString(UpstreamImageBody(kfd_path))) << "upstream's schema cannot parse " << kfd_path;

    criu_kfd image;
    image.set_pid(dumped.pid());
    image.set_num_of_gpus(dumped.num_of_gpus());
    image.set_num_of_cpus(dumped.num_of_cpus());
    for (const kfd_device_entry& device : dumped.device_entries()) *image.add_device_entries() = device;
    image.set_num_of_bos(dumped.bo_entries_size());
    std::map<uint32_t, uint32_t> next_gem_handle;
    for (const kfd_bo_entry& from : dumped.bo_entries()) {
      kfd_bo_entry* bo = image.add_bo_entries();
      bo->set_addr(from.addr());
      bo->set_size(from.size());
      bo->set_offset(from.offset());
      bo->set_alloc_flags(from.alloc_flags());
      bo->set_gpu_id(from.gpu_id());
      bo->set_handle(++next_gem_handle[from.gpu_id()]);
    }
    image.set_num_of_objects(dumped.num_of_objects());
    image.set_shared_mem_size(dumped.shared_mem_size());
    image.set_shared_mem_magic(dumped.shared_mem_magic());
    image.set_priv_data(dumped.priv_data());
    ASSERT_TRUE(image.IsInitialized()) << image.InitializationErrorString();

    size_t removed = 0;
    for (const auto& e : std::filesystem::directory_iterator(images_)) {
      const std::string name = e.path().filename();
      if (name.rfind("amdgpu-vram-", 0) == 0 || name.rfind("amdgpu-kfd-", 0) == 0) {
        std::filesystem::remove(e.path());
        ++removed;
      }
    }
    ASSERT_EQ(removed, 3u);  // the KFD image and a stream per GPU

    WriteUpstreamImage(kfd_path, image.SerializeAsString());
    size_t gpus = 0;
    for (const kfd_device_entry& device : image.device_entries()) {
      if (device.gpu_id() == 0) continue;
      testing::WriteFileBytes(images_ + "/" + PagesName(id, device.gpu_id()),
                              ExpectedPages(pid, image, device.gpu_id()));
      ++gpus;
    }
    ASSERT_EQ(gpus, 2u);
  }
};

//! Images in upstream's layout, written with upstream's schema, restore
//! with this plugin in CRIU 4.2: every byte back, through parallel restore
//! (the main CRIU process reads the pages files).
TEST_F(RealCriuUpstream, UpstreamImagesRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartProcessWithDoorbells();
  Dump(pid);
  ReplaceWithUpstreamImages(pid);
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  CheckBytes(pid);
}

//! The same, restored in the task itself (no parallel restore).
TEST_F(RealCriuUpstream, UpstreamImagesRestoreInTask) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartProcessWithDoorbells(8);
  Dump(pid);
  ReplaceWithUpstreamImages(pid);
  testing::CommandResult r = Restore("VRAMFLOW_PARALLEL_RESTORE=0");
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  CheckBytes(pid);
}

//! A pages file one byte short of its header's promise fails the restore,
//! as upstream's would ("size mismatch"), instead of restoring garbage.
//! In the task (VRAMFLOW_PARALLEL_RESTORE=0), as RealCriu.CorruptStreamFailsRestore:
//! with parallel restore the failure surfaces in RESUME_DEVICES_LATE, whose
//! result CRIU 4.2 only logs (criu/cr-restore.c), so `criu restore` exits 0.
TEST_F(RealCriuUpstream, UpstreamPagesOfWrongSizeFailRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartProcessWithDoorbells(9);
  Dump(pid);
  ReplaceWithUpstreamImages(pid);
  const std::string short_pages = PagesName(KfdImageId(), kfd_->GpuIds()[1]);
  std::vector<uint8_t> bytes = ReadAll(images_ + "/" + short_pages);
  ASSERT_GT(bytes.size(), sizeof(size_t));
  bytes.pop_back();
  testing::WriteFileBytes(images_ + "/" + short_pages, bytes);
  testing::CommandResult r = Restore("VRAMFLOW_PARALLEL_RESTORE=0");
  EXPECT_NE(r.code, 0) << r.output << RestoreLog();
  EXPECT_NE(RestoreLog().find(short_pages), std::string::npos) << "the restore log does not name the short pages file\n"
                                                               << RestoreLog();
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(5))) << "the task of a failed restore is running";
}

//! A vramflow dump, exported with `vramflow criu export-upstream
//! --remove-streams`: the pages files are exactly what upstream's plugin
//! would have written, upstream's schema (protoc --decode, upstream's
//! .proto) parses the KFD image, and with only the pages files left the
//! process restores with every byte.
TEST_F(RealCriuUpstream, ExportUpstreamThenRestoreFromPages) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartProcessWithDoorbells(10);
  Dump(pid);
  const int id = KfdImageId();

  testing::CommandResult r =
      RunShell(std::string(VRAMFLOW_BINARY) + " criu export-upstream --remove-streams " + ShellQuote(images_));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + PagesName(id, kfd_->GpuIds()[0])), std::string::npos) << r.output;

  const std::string kfd_path = images_ + "/amdgpu-kfd-" + std::to_string(id) + ".img";
  const std::string body_path = dir_.File("kfd-body.bin");
  const std::string body = UpstreamImageBody(kfd_path);
  testing::WriteFileBytes(body_path, std::vector<uint8_t>(body.begin(), body.end()));
  testing::CommandResult decoded = RunShell(
      std::string(VRAMFLOW_PROTOC) + " --decode=criu_kfd -I " + ShellQuote(VRAMFLOW_UPSTREAM_PROTO_DIR) + " " +
      ShellQuote(std::string(VRAMFLOW_UPSTREAM_PROTO_DIR) + "/criu-amdgpu.proto") + " < " + ShellQuote(body_path));
  ASSERT_EQ(decoded.code, 0) << "protoc with upstream's criu-amdgpu.proto cannot decode our image:\n" << decoded.output;
  size_t bo_entries = 0;
  for (size_t at = 0; (at = decoded.output.find("bo_entries {", at)) != std::string::npos; ++at) ++bo_entries;
  EXPECT_EQ(bo_entries, contents_.at(pid).size()) << decoded.output.substr(0, 2000);

  criu_kfd image;
  ASSERT_TRUE(image.ParseFromString(body));
  size_t pages_files = 0;
  for (const kfd_device_entry& device : image.device_entries()) {
    if (device.gpu_id() == 0) continue;
    const std::string pages = images_ + "/" + PagesName(id, device.gpu_id());
    EXPECT_TRUE(ReadAll(pages) == ExpectedPages(pid, image, device.gpu_id()))
        << pages << " is not what upstream's plugin writes";
    ++pages_files;
  }
  EXPECT_EQ(pages_files, 2u);
  for (const auto& e : std::filesystem::directory_iterator(images_)) {
    EXPECT_NE(e.path().filename().string().rfind("amdgpu-vram-", 0), 0u) << e.path() << " was not removed";
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path() << ": a temporary file was left";
  }

  r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  CheckBytes(pid);
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
