// SPDX-License-Identifier: MIT
// CRIU's image-streamer protocol (CRIU's criu/img-streamer.c and
// criu-image-streamer; /work/shared/context/criu-image-streamer.md, section
// 2), both sides, so vramflow-criu-host can run the plugin under --stream:
//
//   CriuStreamerClient  CRIU's side: one connection to
//                       <images>/streamer-{capture,serve}.sock, shared by
//                       forked processes and serialised by a mutex in
//                       shared memory; Open() asks for a file and returns our
//                       end of a pipe, handing the other end over.
//   ImageStreamer       the streamer's side, faithful to criu-image-streamer
//                       where the plugin can tell: one CRIU connection;
//                       capture keeps every file in memory; serve answers
//                       `exists`, pushes a whole file into CRIU's pipe before
//                       it reads the next request, serves each file once
//                       (a second request is fatal), and says exists=false
//                       for names it never had.
//
// Messages: a 4-byte little-endian length, then the packed protobuf
// img_streamer_request_entry {required string filename = 1} (CRIU) or
// img_streamer_reply_entry {required bool exists = 1} (streamer, restore
// only). Pipes travel as one fd with one dummy byte (SCM_RIGHTS).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

class CriuStreamerClient {
 public:
  // Connects as CRIU's open_image_dir() does, before any process forks.
  static Result<std::unique_ptr<CriuStreamerClient>> Connect(const std::string& images_dir, bool dump);
  ~CriuStreamerClient();
  // img_streamer_open: our end of the file's pipe (dump: write end; restore:
  // read end), -ENOENT when the streamer has no such file, -1 on errors.
  int Open(const std::string& filename);
  // Its connection's fd. A restored task moves it among CRIU's service fds
  // (sim/criu/criu_task_fds.h) and says where with MovedTo; the old number is
  // closed by then.
  int fd() const { return socket_.get(); }
  void MovedTo(int fd);

 private:
  CriuStreamerClient(UniqueFd socket, bool dump, void* shared_mutex);
  Status OpenLocked(const std::string& filename, int* fd);
  UniqueFd socket_;
  bool dump_;
  void* shared_mutex_;  // a pthread_mutex_t in MAP_SHARED memory
};

class ImageStreamer {
 public:
  // Listens on <images_dir>/streamer-capture.sock (capture) or
  // streamer-serve.sock (serve, with `files`) and serves one CRIU
  // connection on a thread of its own.
  static Result<std::unique_ptr<ImageStreamer>> Start(const std::string& images_dir, bool capture,
                                                      std::map<std::string, std::vector<uint8_t>> files = {});
  // Waits for CRIU to close the connection and every file to end; returns
  // the files (capture) and the first protocol error.
  Result<std::map<std::string, std::vector<uint8_t>>> Finish();
  ~ImageStreamer();

 private:
  ImageStreamer() = default;
  void Run();
  Status Capture(int connection);
  Status Serve(int connection);

  bool capture_ = true;
  UniqueFd listener_;  // the thread's alone once it runs
  UniqueFd stop_;      // an eventfd: the destructor wakes a thread still waiting for CRIU
  std::string socket_path_;
  std::mutex mu_;
  std::map<std::string, std::vector<uint8_t>> files_;  // GUARDED_BY(mu_) during capture
  std::vector<std::thread> readers_;                   // capture: one per open file
  Status status_;                                      // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace vramflow
