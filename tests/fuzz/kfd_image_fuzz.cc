// SPDX-License-Identifier: MIT
// libFuzzer target: the CRIU plugin's metadata images, as restore reads them
// from a checkpoint it did not write: the 8-byte size header and protobuf
// body (plugin/kfd_image.h), then the topology rebuilt from a criu_kfd
// message (plugin/kfd/kfd_devinfo.h), and the dump's KFD file list
// (plugin/kfd_file_list.h). The first byte picks which, modulo 3.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR the binary writes valid images of
// both kinds into DIR and exits.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "criu_amdgpu.pb.h"
#include "plugin/kfd/kfd_devinfo.h"
#include "plugin/kfd_file_list.h"
#include "plugin/kfd_image.h"

namespace vramflow {
namespace {

void WriteSeed(const std::string& path, uint8_t kind, const google::protobuf::MessageLite& msg) {
  Result<std::vector<uint8_t>> image = EncodeImage(msg, path);
  if (!image.ok()) std::abort();
  std::ofstream out(path, std::ios::binary);
  out.put(static_cast<char>(kind));
  out.write(reinterpret_cast<const char*>(image->data()), static_cast<std::streamsize>(image->size()));
}

void WriteSeeds(const std::string& dir) {
  Topology t;
  KfdNode cpu;
  cpu.node_id = 0;
  cpu.cpu_cores_count = 16;
  t.nodes.push_back(cpu);
  for (uint32_t i = 1; i <= 2; ++i) {
    KfdNode gpu;
    gpu.node_id = i;
    gpu.gpu_id = 0x1000 * i;
    gpu.simd_count = 304;
    gpu.hive_id = 7;
    gpu.vram_size = 64ull << 30;
    gpu.iolinks = {IoLink{kIoLinkTypePcie, 0}, IoLink{kIoLinkTypeXgmi, 3 - i}};
    t.nodes.push_back(gpu);
  }
  criu::CriuKfd kfd;
  TopologyToImage(t, {}, &kfd);
  kfd.set_pid(1);
  kfd.set_num_of_bos(1);
  criu::KfdBoEntry* bo = kfd.add_bo_entries();
  bo->set_addr(0x7f0000000000);
  bo->set_size(1 << 20);
  bo->set_offset(0x100000000);
  bo->set_alloc_flags(1);
  bo->set_gpu_id(0x1000);
  bo->set_handle(1);
  kfd.set_num_of_objects(2);
  kfd.set_shared_mem_size(0);
  kfd.set_shared_mem_magic(0);
  kfd.set_priv_data(std::string(64, 'p'));
  WriteSeed(dir + "/kfd", 0, kfd);
  criu::CriuRenderNode render;
  render.set_gpu_id(0x1000);
  render.set_id(101);
  render.set_drm_render_minor(128);
  render.set_num_of_bos(0);
  WriteSeed(dir + "/render", 1, render);
  std::ofstream list(dir + "/kfd-file-list", std::ios::binary);
  list << '\x02' << "vramflow kfd files 1\n19\n23\n";
}

}  // namespace
}  // namespace vramflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    vramflow::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vramflow;
  if (size == 0) return 0;
  std::span<const uint8_t> image(data + 1, size - 1);
  if (data[0] % 3 == 0) {
    criu::CriuKfd kfd;
    if (DecodeImage(image, &kfd, "fuzz").ok()) (void)TopologyFromImage(kfd, "fuzz");
  } else if (data[0] % 3 == 2) {
    (void)ParseKfdFileList(std::string_view(reinterpret_cast<const char*>(image.data()), image.size()));
  } else {
    criu::CriuRenderNode render;
    (void)DecodeImage(image, &render, "fuzz");
  }
  return 0;
}
