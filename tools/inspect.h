// `vramflow inspect` and `vramflow verify`.
//
// inspect reads a stream's framing (without decoding payloads) and reports
// its objects, chunk counts, codec mix, ratio and detected word sizes, as
// text or JSON. verify applies every check, decoding every payload and
// comparing it with its hash; its Status is the verdict.
#pragma once

#include <iosfwd>
#include <string>

#include "common/status.h"
#include "transport/open_uri.h"

namespace vramflow {

struct InspectOptions {
  std::string input;
  bool json = false;
  bool decode = false;  // also decode and hash-check payloads
  TransportOptions transport;  // for tcp:// and unix: inputs (listened on)
};

// Prints what was read, even when the stream turns out to be bad, and
// returns the reading's Status.
Status RunInspect(const InspectOptions& options, std::ostream& out);

// Prints a one-line verdict ("OK: ..." on success); returns the Status.
// A network sender learns the verdict.
Status RunVerify(const std::string& input, bool quiet, const TransportOptions& transport, std::ostream& out);

}  // namespace vramflow
