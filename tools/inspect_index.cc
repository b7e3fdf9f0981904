// SPDX-License-Identifier: MIT
#include "tools/inspect_index.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "common/printable.h"
#include "common/units.h"
#include "tools/cli/cli_util.h"
#include "tools/json_report.h"

namespace vramflow {
namespace {

struct ObjectFigures {
  uint64_t data_chunks = 0;
  uint64_t zero_runs = 0;
  uint64_t zero_bytes = 0;
  uint64_t dedup_refs = 0;
  uint64_t dedup_bytes = 0;
  uint64_t stored_bytes = 0;      // payload bytes of DATA, DEDUP_REF, BASE_REF and BASE_DELTA frames
  uint64_t new_bytes = 0;         // raw bytes of DATA frames: what the stream holds itself
  uint64_t base_ref_bytes = 0;    // raw bytes taken from the base as they are
  uint64_t base_delta_bytes = 0;  // raw bytes coded against the base
  uint64_t frame_bytes = 0;       // every byte of the object's frames: what restoring it alone reads
};

ObjectFigures Figures(const SeekIndexObject& o) {
  ObjectFigures f;
  f.frame_bytes = 2 * kFrameHeaderSize + o.begin_payload_size;
  for (const SeekIndexChunk& c : o.chunks) {
    f.frame_bytes += c.frame_bytes();
    switch (c.kind) {
      case FrameKind::kZeroRun:
        ++f.zero_runs;
        f.zero_bytes += c.raw_size;
        break;
      case FrameKind::kDedupRef:
        ++f.dedup_refs;
        f.dedup_bytes += c.raw_size;
        f.stored_bytes += c.payload_size;
        break;
      case FrameKind::kBaseRef:
        f.base_ref_bytes += c.raw_size;
        f.stored_bytes += c.payload_size;
        break;
      case FrameKind::kBaseDelta:
        f.base_delta_bytes += c.raw_size;
        f.stored_bytes += c.payload_size;
        break;
      default:
        ++f.data_chunks;
        f.new_bytes += c.raw_size;
        f.stored_bytes += c.payload_size;
    }
  }
  return f;
}

uint64_t RawBytes(const SeekIndex& index) {
  uint64_t raw = 0;
  for (const SeekIndexObject& o : index.objects) raw += o.size;
  return raw;
}

std::string Percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0);
  return buf;
}

}  // namespace

std::string ShownText(const std::string& text, size_t width) {
  std::string shown = EscapedText(text);
  if (width == 0 || shown.size() <= width) return shown;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xc0) == 0x80) --cut;  // not inside a UTF-8 character
  return shown.substr(0, cut) + "...";
}

void PutJsonText(nlohmann::ordered_json& j, const std::string& key, const std::string& text) {
  if (IsValidUtf8(text)) {
    j[key] = text;
    return;
  }
  j[key] = EscapedText(text);
  j[key + "_hex"] = HexBytes(text);
}

nlohmann::ordered_json AttributesJson(const std::vector<std::pair<std::string, std::string>>& attributes) {
  nlohmann::ordered_json attrs = nlohmann::ordered_json::object();
  nlohmann::ordered_json hex = nlohmann::ordered_json::object();
  for (const auto& [k, v] : attributes) {
    attrs[IsValidUtf8(k) ? k : EscapedText(k)] = IsValidUtf8(v) ? v : EscapedText(v);
    if (!IsValidUtf8(k) || !IsValidUtf8(v)) hex[HexBytes(k)] = HexBytes(v);
  }
  if (!hex.empty()) attrs["_hex"] = hex;
  return attrs;
}

std::string DescribeStreamHeader(const StreamHeader& h) {
  std::string line = (h.producer.empty() ? "?" : ShownText(h.producer)) + ", format version " +
                     std::to_string(h.version) + ", chunk size " + FormatSize(h.chunk_size);
  if (h.flags & kStreamFlagBase) line += ", incremental";
  if (h.flags & kStreamFlagDedup)
    line += h.dedup_window ? ", dedup window " + std::to_string(h.dedup_window) + " DATA frames"
                           : ", dedup without a window (an earlier writer)";
  return line;
}

nlohmann::ordered_json DedupWindowJson(const StreamHeader& h) {
  if (!(h.flags & kStreamFlagDedup)) return nullptr;
  return h.dedup_window;
}

void PrintIndexText(const StoredStreamIndex& stored, const StreamIdentity& identity, uint64_t bytes_read,
                    std::ostream& out) {
  const StreamHeader& h = stored.header;
  const uint64_t raw = RawBytes(stored.index);
  out << "stream:   " << DescribeStreamHeader(h) << "\n";
  out << "id:       " << HexDigest(identity.id) << "\n";
  if (identity.base) {
    ObjectFigures total;
    for (const SeekIndexObject& o : stored.index.objects) {
      ObjectFigures f = Figures(o);
      total.new_bytes += f.new_bytes;
      total.base_ref_bytes += f.base_ref_bytes;
      total.base_delta_bytes += f.base_delta_bytes;
    }
    out << "base:     " << HexDigest(identity.base->base_id) << " ("
        << (identity.base->location.empty() ? std::string("no location recorded") : ShownText(identity.base->location))
        << "), chain of " << identity.base->chain_length << (identity.base->chain_length == 1 ? " base" : " bases")
        << "\n";
    out << "          " << FormatSize(total.base_ref_bytes) << " referenced, " << FormatSize(total.base_delta_bytes)
        << " as deltas, " << FormatSize(total.new_bytes) << " new\n";
  }
  out << "objects:  " << stored.index.objects.size() << ", " << FormatSize(raw) << " raw in "
      << FormatSize(stored.stream_size) << " (ratio " << FormatRatio(raw, stored.stream_size) << ")\n";
  out << "status:   complete (by its STREAM_END and seek index; frames not read: verify checks every one)\n";
  out << "read:     " << FormatSize(bytes_read) << " of " << FormatSize(stored.stream_size) << " ("
      << Percent(bytes_read, stored.stream_size)
      << "): the stream header, the seek index, its blocks and STREAM_END (--full reads every frame, for the codec "
         "mix)\n\n";

  char line[512];
  std::snprintf(line, sizeof(line), "%5s  %-32s %14s %8s %8s %8s %14s %7s\n", "id", "name", "size", "chunks", "zeros",
                "refs", "stored", "ratio");
  out << line;
  for (const SeekIndexObject& o : stored.index.objects) {
    ObjectFigures f = Figures(o);
    const std::string name = ShownText(o.metadata.name, 32);
    std::snprintf(line, sizeof(line), "%5u  %-32s %14s %8llu %8llu %8llu %14s %7s\n", o.id, name.c_str(),
                  FormatSize(o.size).c_str(), static_cast<unsigned long long>(f.data_chunks),
                  static_cast<unsigned long long>(f.zero_runs), static_cast<unsigned long long>(f.dedup_refs),
                  FormatSize(f.stored_bytes).c_str(), FormatRatio(o.size, f.stored_bytes).c_str());
    out << line;
    for (const auto& [k, v] : o.metadata.attributes) out << "       " << ShownText(k) << " = " << ShownText(v) << "\n";
    if (identity.base)
      out << "       from the base: " << FormatSize(f.base_ref_bytes) << " referenced, "
          << FormatSize(f.base_delta_bytes) << " as deltas, " << FormatSize(f.new_bytes) << " new\n";
  }
}

void PrintIndexJson(const StoredStreamIndex& stored, const StreamIdentity& identity, uint64_t bytes_read,
                    std::ostream& out) {
  nlohmann::ordered_json j = JsonReportHead("inspect", Status::Ok());
  const uint64_t raw = RawBytes(stored.index);
  j["complete"] = true;
  j["source"] = "seek index";
  PutJsonText(j, "producer", stored.header.producer);
  j["format_version"] = stored.header.version;
  j["chunk_size"] = stored.header.chunk_size;
  j["dedup_window"] = DedupWindowJson(stored.header);
  j["stream_bytes"] = stored.stream_size;
  j["bytes_read"] = bytes_read;
  j["raw_bytes"] = raw;
  j["ratio"] = stored.stream_size ? static_cast<double>(raw) / static_cast<double>(stored.stream_size) : 0.0;
  j["stream_id"] = HexDigest(identity.id);
  j["base"] = nullptr;
  if (identity.base) {
    nlohmann::ordered_json base;
    base["id"] = HexDigest(identity.base->base_id);
    PutJsonText(base, "location", identity.base->location);
    base["chain_length"] = identity.base->chain_length;
    base["base_bytes"] = identity.base->base_bytes;
    base["base_raw_bytes"] = identity.base->base_raw_bytes;
    j["base"] = base;
  }
  uint64_t new_bytes = 0, ref_bytes = 0, delta_bytes = 0;
  nlohmann::ordered_json objects = nlohmann::ordered_json::array();
  for (const SeekIndexObject& o : stored.index.objects) {
    ObjectFigures f = Figures(o);
    nlohmann::ordered_json jo;
    jo["id"] = o.id;
    PutJsonText(jo, "name", o.metadata.name);
    jo["size"] = o.size;
    jo["ended"] = true;
    jo["data_chunks"] = f.data_chunks;
    jo["zero_runs"] = f.zero_runs;
    jo["zero_bytes"] = f.zero_bytes;
    jo["dedup_refs"] = f.dedup_refs;
    jo["dedup_bytes"] = f.dedup_bytes;
    jo["stored_bytes"] = f.stored_bytes;
    jo["frame_bytes"] = f.frame_bytes;
    jo["new_bytes"] = f.new_bytes;
    jo["base_ref_bytes"] = f.base_ref_bytes;
    jo["base_delta_bytes"] = f.base_delta_bytes;
    new_bytes += f.new_bytes;
    ref_bytes += f.base_ref_bytes;
    delta_bytes += f.base_delta_bytes;
    jo["attributes"] = AttributesJson(o.metadata.attributes);
    objects.push_back(jo);
  }
  j["new_bytes"] = new_bytes;
  j["base_ref_bytes"] = ref_bytes;
  j["base_delta_bytes"] = delta_bytes;
  j["objects"] = objects;
  out << j.dump(2) << "\n";
}

}  // namespace vramflow
