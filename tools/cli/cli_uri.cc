// SPDX-License-Identifier: MIT
#include "tools/cli/cli_uri.h"

#include <sys/stat.h>

#include "transport/core/uri.h"

namespace vramflow {

Status CheckReadUri(const std::string& uri, const std::string& receiver) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (endpoint.is_network())
    return Status::InvalidArgument("'" + uri +
                                   "' is a network address, and a source here never listens: to receive "
                                   "a stream there, use `" +
                                   receiver + " --listen " + uri + "`");
  return Status::Ok();
}

Status CheckListenUri(const std::string& uri) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (!endpoint.is_network())
    return Status::InvalidArgument("--listen '" + uri +
                                   "': give the address to listen on, tcp://HOST:PORT (HOST may "
                                   "be empty for every address), unix:PATH, or systemd: (the socket systemd passes)");
  return Status::Ok();
}

Status CheckWriteUri(const std::string& uri) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (endpoint.kind == Endpoint::Kind::kSystemd)
    return Status::InvalidArgument("'" + uri + "' is a socket to listen on (--listen systemd:), not a destination");
  return Status::Ok();
}

Status CheckDestination(const std::string& uri, bool force) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (endpoint.kind != Endpoint::Kind::kPath) return Status::Ok();
  struct stat st;
  if (::stat(endpoint.path.c_str(), &st) != 0) return Status::Ok();
  if (S_ISDIR(st.st_mode))
    return Status::InvalidArgument("'" + uri + "' is a directory: the stream goes to a file (give a file name)");
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return Status::Ok();
  if (!force) return Status::AlreadyExists("'" + uri + "' exists (use --force to overwrite)");
  return Status::Ok();
}

Status RefuseDash(const std::string& flag, const std::string& value) {
  if (value == "-")
    return Status::InvalidArgument(flag + " names a file or directory; '-' (stdin/stdout) is not one here");
  return Status::Ok();
}

}  // namespace vramflow
