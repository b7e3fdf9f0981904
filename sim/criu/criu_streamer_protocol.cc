// SPDX-License-Identifier: MIT
#include "sim/criu/criu_streamer_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "common/endian.h"
#include "common/thread_start.h"
#include "image_streamer/criu_image_socket.h"
#include "transport/net/fd_passing.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

constexpr std::chrono::milliseconds kTimeout{30000};

std::string SocketPath(const std::string& dir, bool dump) { return ImageStreamerSocketPath(dir, dump); }

Status SendMessage(int fd, const std::vector<uint8_t>& body) { return SendImageMessage(fd, body, kTimeout); }

// One message; an empty optional at a clean end of the connection.
Result<std::optional<std::vector<uint8_t>>> RecvMessage(int fd) {
  return RecvImageMessage(fd, std::chrono::minutes(10), kTimeout);
}

std::vector<uint8_t> EncodeRequest(const std::string& filename) { return EncodeImageRequest(filename); }
Result<std::string> DecodeRequest(const std::vector<uint8_t>& body) { return DecodeImageRequest(body); }

// Writes all of `data` into a (blocking) pipe.
Status WriteAll(int fd, const std::vector<uint8_t>& data, const std::string& what) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(what, errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status SendFd(int socket, int fd) {
  const uint8_t dummy = 0;
  const int fds[1] = {fd};
  return SendWithFds(socket, std::span<const uint8_t>(&dummy, 1), fds, kTimeout, "image streamer pipe");
}

Result<UniqueFd> RecvFd(int socket) {
  uint8_t dummy;
  std::vector<UniqueFd> fds;
  VF_RETURN_IF_ERROR(RecvWithFds(socket, std::span<uint8_t>(&dummy, 1), &fds, kTimeout, "image streamer pipe"));
  if (fds.size() != 1)
    return Status::Corruption("image streamer: expected one pipe, got " + std::to_string(fds.size()));
  return std::move(fds[0]);
}

}  // namespace

// ---- CRIU's side ---------------------------------------------------------------

Result<std::unique_ptr<CriuStreamerClient>> CriuStreamerClient::Connect(const std::string& images_dir, bool dump) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = SocketPath(images_dir, dump);
  if (path.size() >= sizeof addr.sun_path) return Status::InvalidArgument("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::FromErrno("connecting to the image streamer at " + path, errno);
  void* shared = ::mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return Status::FromErrno("mmap", errno);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutex_init(static_cast<pthread_mutex_t*>(shared), &attr);
  pthread_mutexattr_destroy(&attr);
  return std::unique_ptr<CriuStreamerClient>(new CriuStreamerClient(std::move(fd), dump, shared));
}

CriuStreamerClient::CriuStreamerClient(UniqueFd socket, bool dump, void* shared_mutex)
    : socket_(std::move(socket)), dump_(dump), shared_mutex_(shared_mutex) {}

CriuStreamerClient::~CriuStreamerClient() { ::munmap(shared_mutex_, sizeof(pthread_mutex_t)); }

void CriuStreamerClient::MovedTo(int fd) {
  static_cast<void>(socket_.Release());  // closed with the task's inherited fds
  socket_.Reset(fd);
}

int CriuStreamerClient::Open(const std::string& filename) {
  auto* mu = static_cast<pthread_mutex_t*>(shared_mutex_);
  pthread_mutex_lock(mu);
  int fd = -1;
  Status s = OpenLocked(filename, &fd);
  pthread_mutex_unlock(mu);
  if (!s.ok()) {
    std::fprintf(stderr, "criu (host): img_streamer_open(%s): %s\n", filename.c_str(), s.ToString().c_str());
    return -1;
  }
  return fd;
}

Status CriuStreamerClient::OpenLocked(const std::string& filename, int* fd) {
  VF_RETURN_IF_ERROR(SendMessage(socket_.get(), EncodeRequest(filename)));
  if (!dump_) {
    VF_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> reply, RecvMessage(socket_.get()));
    if (!reply || reply->size() != 2 || (*reply)[0] != 0x08)
      return Status::Corruption("image streamer: bad reply to the request for " + filename);
    if ((*reply)[1] == 0) {
      *fd = -ENOENT;
      return Status::Ok();
    }
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  UniqueFd read_end(p[0]), write_end(p[1]);
  VF_RETURN_IF_ERROR(SendFd(socket_.get(), dump_ ? read_end.get() : write_end.get()));
  *fd = dump_ ? write_end.Release() : read_end.Release();
  return Status::Ok();
}

// ---- the streamer's side ----------------------------------------------------

Result<std::unique_ptr<ImageStreamer>> ImageStreamer::Start(const std::string& images_dir, bool capture,
                                                            std::map<std::string, std::vector<uint8_t>> files) {
  std::unique_ptr<ImageStreamer> s(new ImageStreamer());
  s->capture_ = capture;
  s->files_ = std::move(files);
  s->socket_path_ = SocketPath(images_dir, capture);
  ::unlink(s->socket_path_.c_str());
  s->listener_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, s->socket_path_.c_str(), s->socket_path_.size() + 1);
  if (!s->listener_.valid() || ::bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s->listener_.get(), 1) != 0)
    return Status::FromErrno("image streamer: listening on " + s->socket_path_, errno);
  s->stop_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->stop_.valid()) return Status::FromErrno("image streamer: eventfd", errno);
  VF_RETURN_IF_ERROR(StartThread(&s->thread_, "the image streamer on " + s->socket_path_, [p = s.get()] { p->Run(); }));
  return s;
}

void ImageStreamer::Run() {
  pollfd pfd[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
  Status status;
  if (::poll(pfd, 2, static_cast<int>(kTimeout.count() * 4)) < 1 || pfd[0].revents == 0) {
    status = Status::TimedOut("image streamer: CRIU never connected to " + socket_path_);
  } else {
    UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    listener_.Reset();  // one CRIU connection, as criu-image-streamer
    status = !connection.valid() ? Status::FromErrno("image streamer: accept", errno)
             : capture_          ? Capture(connection.get())
                                 : Serve(connection.get());
  }
  std::lock_guard lock(mu_);
  if (status_.ok()) status_ = status;
}

Status ImageStreamer::Capture(int connection) {
  for (;;) {
    VF_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> request, RecvMessage(connection));
    if (!request) return Status::Ok();  // CRIU is done
    VF_ASSIGN_OR_RETURN(std::string name, DecodeRequest(*request));
    VF_ASSIGN_OR_RETURN(UniqueFd pipe, RecvFd(connection));
    {
      std::lock_guard lock(mu_);
      if (files_.count(name)) return Status::Corruption("image streamer: CRIU wrote " + name + " twice");
      files_[name];
    }
    // Files may be written concurrently: each is drained on its own thread.
    std::thread reader;
    VF_RETURN_IF_ERROR(StartThread(&reader, "reading the image " + name,
                                   [this, name, fd = std::make_shared<UniqueFd>(std::move(pipe))] {
                                     std::vector<uint8_t> bytes;
                                     uint8_t buf[1 << 16];
                                     for (;;) {
                                       const ssize_t n = ::read(fd->get(), buf, sizeof buf);
                                       if (n > 0) bytes.insert(bytes.end(), buf, buf + n);
                                       if (n == 0) break;
                                       if (n < 0 && errno != EINTR) {
                                         std::lock_guard lock(mu_);
                                         if (status_.ok())
                                           status_ = Status::FromErrno("image streamer: reading " + name, errno);
                                         return;
                                       }
                                     }
                                     std::lock_guard lock(mu_);
                                     files_[name] = std::move(bytes);
                                   }));
    readers_.push_back(std::move(reader));
  }
}

Status ImageStreamer::Serve(int connection) {
  std::map<std::string, bool> served;
  for (;;) {
    VF_ASSIGN_OR_RETURN(std::optional<std::vector<uint8_t>> request, RecvMessage(connection));
    if (!request) return Status::Ok();
    VF_ASSIGN_OR_RETURN(std::string name, DecodeRequest(*request));
    if (served[name])
      return Status::Corruption("image streamer: CRIU is requesting the image file " + name + " multiple times");
    auto it = files_.find(name);
    const bool exists = it != files_.end();
    VF_RETURN_IF_ERROR(SendMessage(connection, {0x08, static_cast<uint8_t>(exists ? 1 : 0)}));
    if (!exists) continue;
    VF_ASSIGN_OR_RETURN(UniqueFd pipe, RecvFd(connection));
    // The whole file goes into the pipe before the next request is read.
    Status s = WriteAll(pipe.get(), it->second, "image streamer: serving " + name);
    served[name] = true;
    files_.erase(it);
    if (!s.ok()) return s;
  }
}

Result<std::map<std::string, std::vector<uint8_t>>> ImageStreamer::Finish() {
  if (thread_.joinable()) thread_.join();
  for (std::thread& t : readers_) t.join();
  readers_.clear();
  std::lock_guard lock(mu_);
  if (!status_.ok()) return status_;
  return std::move(files_);
}

ImageStreamer::~ImageStreamer() {
  // The thread owns listener_: it is only told to stop waiting for CRIU.
  const uint64_t one = 1;
  if (stop_.valid() && ::write(stop_.get(), &one, sizeof one) < 0) std::perror("image streamer: waking the thread");
  if (thread_.joinable()) thread_.join();
  for (std::thread& t : readers_) t.join();
  ::unlink(socket_path_.c_str());
}

}  // namespace vramflow
