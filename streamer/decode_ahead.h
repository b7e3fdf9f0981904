// SPDX-License-Identifier: MIT
// ReadStreamDecodingAhead: ReadStream (stream_reader.h) whose DATA payloads
// are decoded and hash-checked on several threads, a few frames ahead of
// the visitor, which still sees every event in stream order.
//
// ReadStream decodes each DATA frame before it reads the next one, so a
// reader that only writes the bytes out (`unpack -o -`) runs on one core
// whatever -j says. Here ReadStream reads and checks the framing on the
// calling thread (decode off), DATA payloads are held (where a mapped file
// holds them, else copied aside) and decoded by the other threads (and by
// the caller whenever it waits), and events reach
// the visitor in order: the chunks queued so far are handed on before any
// OBJECT_BEGIN, OBJECT_END or STREAM_END, so the visitor sees exactly what
// ReadStream with decoding on would show it, and a corrupt payload fails
// with the same error, naming its own frame. Its ChunkEvent::object is the
// object as it stands when the event is handed on (later frames may have
// added ranges to it).
//
// An incremental stream (its header has kStreamFlagBase) has its base
// opened by ReadStream at the BASE frame through `read.open_base`; its
// BASE_REF and BASE_DELTA frames are then resolved against the base on the
// decoding threads as DATA payloads are decoded (streamer/format/base_frame.h).
// With check_digests, a stream's DIGEST_BLOCKs are checked as ReadStream
// checks them: each chunk's SHA-256 is taken on the decoding threads, and
// the chunks held are handed on before a DIGEST_BLOCK is checked.
// A base that asks for reads in flight (BaseStream::concurrent_reads: one
// on S3 waits on a request per chunk) gets at least as many threads, as far
// as the budget feeds them; they start at the first frame to decode, once
// the BASE frame has opened the base.
// ReadStream itself reads, serially, with `read`'s options: an incremental
// stream without `read.open_base` (it fails at the BASE frame, saying the
// base is needed), and a stream whose header does not decode (for
// ReadStream's error).
//
// Memory: the copies aside, the decoders' state and each thread's buffers
// for reading the base are charged to the reader's budget as they grow;
// where the budget cannot hold another frame in flight, the frames in flight
// are handed on first. The threads are fitted to the header's chunk size,
// which is informational only: from a frame they cannot hold, fewer decode,
// down to the reading thread alone, which decodes each frame as it hands it
// on and charges what ReadStream charges (told through `note`). So any
// stream ReadStream reads within a budget is read within it at any thread
// count, and one it cannot read fails on the budget here too.
#pragma once

#include <functional>
#include <string>

#include "streamer/format/stream_reader.h"
#include "streamer/machine/memory_budget.h"

namespace vramflow {

struct DecodeAheadOptions {
  // Threads decoding, the caller's included. With 1, ReadStream reads any
  // stream but an incremental one (whose base may ask for more threads).
  unsigned threads = 2;
  // The reader's options: its budget (also charged for the frames decoded
  // ahead), and open_base for an incremental stream. `decode` is ignored:
  // DATA, BASE_REF and BASE_DELTA frames are always decoded and checked.
  // check_digests (the default) costs a SHA-256 of every chunk until the
  // stream shows it has no DIGEST_BLOCKs: unpack turns it off.
  ReadOptions read;
  // Told, once, when the budget feeds fewer threads than `threads`
  // (ThreadCapNote), as a graph tells PipelineOptions::note, and each time
  // a frame makes fewer decode ("decoding on N threads from frame F on").
  std::function<void(const std::string&)> note;
};

Status ReadStreamDecodingAhead(ByteSource& source, StreamVisitor& visitor, const DecodeAheadOptions& options);

}  // namespace vramflow
