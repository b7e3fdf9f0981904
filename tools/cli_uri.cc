#include "tools/cli_uri.h"

#include "transport/uri.h"

namespace vramflow {

Status CheckReadUri(const std::string& uri, const std::string& receiver) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (endpoint.is_network())
    return Status::InvalidArgument("'" + uri + "' is a network address, and a source here never listens: to receive "
                                   "a stream there, use `" + receiver + " --listen " + uri + "`");
  return Status::Ok();
}

Status CheckListenUri(const std::string& uri) {
  VF_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(uri));
  if (!endpoint.is_network())
    return Status::InvalidArgument("--listen '" + uri + "': give the address to listen on, tcp://HOST:PORT (HOST may "
                                   "be empty for every address) or unix:PATH");
  return Status::Ok();
}

Status CheckWriteUri(const std::string& uri) { return ParseEndpoint(uri).status(); }

Status RefuseDash(const std::string& flag, const std::string& value) {
  if (value == "-") return Status::InvalidArgument(flag + " names a file or directory; '-' (stdin/stdout) is not one here");
  return Status::Ok();
}

}  // namespace vramflow
