// SPDX-License-Identifier: MIT
// `vramflow inspect` and `vramflow verify`.
//
// inspect of a stored stream with a seek index (a file, an s3:// object)
// reads only its two ends, the header, the index and STREAM_END, and lists
// the objects from the index (inspect_index.h). Otherwise, or with `full`,
// it reads the stream's framing (without decoding payloads) and reports its
// objects, chunk counts, codec mix, ratio and detected word sizes, as text
// or JSON; for a stored stream without a usable index the report says why
// it was read whole. verify applies every check, decoding every payload and
// comparing it with its hash; its Status is the verdict.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "common/status.h"
#include "tools/stream_figures.h"
#include "transport/open_uri.h"

namespace vramflow {

struct InspectOptions {
  std::string input;
  bool json = false;
  bool decode = false;  // also decode and hash-check payloads (reads every frame)
  bool full = false;    // read every frame even when there is a seek index
  // --max-memory: what reading every frame may keep (the reader's buffers
  // and records, the report's summary of every object, a network window).
  uint64_t max_memory = 256ull << 20;
  TransportOptions transport;  // for tcp:// and unix: inputs (listened on)
};

// Prints what was read, even when the stream turns out to be bad, and
// returns the reading's Status. *reported says whether a report was
// printed (with json, it then carries the failure: nothing else is due).
Status RunInspect(const InspectOptions& options, std::ostream& out, bool* reported = nullptr);

// What verify found, for --json: the objects, their raw bytes, the
// stream's bytes and the seconds (StreamFigures), and the frames read.
struct VerifyReport : StreamFigures {
  uint64_t frames = 0;
};

// Prints a one-line verdict ("OK: ..." on success); returns the Status.
// A network sender learns the verdict. `max_memory` bounds the reader's
// buffers and records (and a network receiver's window), as --max-memory.
// `bases`: the base of an incremental stream and links of its chain
// (--base, streamer/base/base_opener.h); empty: the location its BASE frame records.
// From the network (--listen) the bases come only from what the sender was
// offered: `base_store` (--base-store DIR) or `bases` (ReaderBaseOpener).
// `threads` decode and hash (streamer/decode_ahead.h), 0: the CPUs this
// process may use.
Status RunVerify(const std::string& input, bool quiet, uint64_t max_memory, const TransportOptions& transport,
                 std::ostream& out, VerifyReport* report = nullptr, const std::vector<std::string>& bases = {},
                 unsigned threads = 1, const std::string& base_store = {});

}  // namespace vramflow
