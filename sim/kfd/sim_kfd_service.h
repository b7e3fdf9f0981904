// SPDX-License-Identifier: MIT
// The simulated KFD as a service, as the kernel is one: a process that owns
// a SimKfd serves it on a UNIX stream socket (SimKfdServer), and every
// process that uses it (the plugin in CRIU's dumper, in each forked restored
// task, in the main restore process; the tests) is a client through a
// GpuBackend (ConnectSimGpuBackend). A SimKfd in one process's memory could
// not be shared by processes that fork and exec on their own.
//
// Files cross the socket as fds (SCM_RIGHTS): KFD files, render nodes and
// the dma-buf memfds of Checkpoint and Restore, so they keep their inodes,
// which is how SimKfd recognises them. The wire format is in sim_kfd_wire.h.
//
// Thread safety: the server serves each connection on its own thread, one
// request at a time, in order; SimKfd does the locking. A client backend may
// be used from several threads (requests are serialized on its connection)
// and survives fork(): a process that inherited it opens its own connection
// on its first call. (Do not fork while another thread is inside a call.)
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/kfd/gpu_backend.h"
#include "sim/gpu/sim_device.h"
#include "sim/kfd/sim_kfd.h"
#include "transport/net/socket.h"

namespace vramflow {

// How long either side waits for progress on a message: a client for its
// reply (Restore zero-fills every BO's memfd first, seconds for many GiB),
// the server for the rest of a request it has started to receive. A peer
// that stalls longer is an error (client) or dropped (server). An idle
// connection may wait for its next request for ever.
inline constexpr std::chrono::milliseconds kSimKfdIoTimeout{30000};

class SimKfdServer {
 public:
  // Listens on `socket_path` (a stale socket file there is replaced) and
  // serves `kfd`, which must outlive the server.
  static Result<std::unique_ptr<SimKfdServer>> Start(SimKfd* kfd, const std::string& socket_path,
                                                     std::chrono::milliseconds io_timeout = kSimKfdIoTimeout);
  // Stops accepting, closes every connection, joins the threads and removes
  // the socket file.
  ~SimKfdServer();
  SimKfdServer(const SimKfdServer&) = delete;
  SimKfdServer& operator=(const SimKfdServer&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  // Connections accepted so far (for tests: one per client process).
  uint64_t connections_accepted() const { return accepted_; }

 private:
  struct Connection {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  SimKfdServer(SimKfd* kfd, Listener listener, UniqueFd stop, std::string socket_path,
               std::chrono::milliseconds io_timeout);
  void AcceptLoop();
  void Serve(Connection* connection);
  // Waits until `fd` is readable (true) or the server stops (false).
  bool WaitReadable(int fd) const;

  SimKfd* const kfd_;
  const std::unique_ptr<KfdOps> ops_;
  Listener listener_;
  const UniqueFd stop_;  // an eventfd, readable once the server stops
  const std::string socket_path_;
  const std::chrono::milliseconds io_timeout_;
  std::list<std::unique_ptr<Connection>> connections_;  // owned by the accept thread until it is joined
  std::atomic<uint64_t> accepted_{0};
  std::thread accept_thread_;
};

// A GpuBackend on the simulated KFD served at `socket_path`:
//   Kfd()               each op forwarded to the server (fds as fds)
//   Classify, OpenKfd,  asked of the server (OpenKfd for the calling
//   OpenRenderNode      process's pid)
//   LocalTopology       ParseTopology(topology_root): the harness writes it
//                       with SimKfd::WriteSysfsTopology beforehand
//   RenderNodePath      "/dev/dri/renderD<minor>"
//   OpenDevice          a local SimDevice (device_options) that imports the
//                       dma-buf memfds Checkpoint and Restore return
// Connects once here, so a missing server is an error now; later calls
// reconnect after fork() or a broken connection.
Result<std::unique_ptr<GpuBackend>> ConnectSimGpuBackend(const std::string& socket_path, std::string topology_root,
                                                         SimDeviceOptions device_options = {});

}  // namespace vramflow
