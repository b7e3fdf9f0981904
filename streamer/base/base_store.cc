// SPDX-License-Identifier: MIT
#include "streamer/base/base_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "common/printable.h"
#include "common/unique_fd.h"
#include "streamer/base/base_opener.h"
#include "transport/aws/xml.h"
#include "transport/core/fd_stream.h"
#include "transport/core/random_access.h"
#include "transport/core/uri.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_config.h"

namespace vramflow {
namespace {

struct Candidate {
  std::string when;      // sorts as the time does: a zero-padded count, or S3's ISO 8601 LastModified
  std::string location;  // a path, or s3://BUCKET/KEY
  // Newest first; ties by location, so that a scan's order is stable.
  bool operator<(const Candidate& other) const {
    return std::tie(other.when, location) < std::tie(when, other.location);
  }
};

// Keeps `c` among the `max` newest of `newest` (sorted).
void Keep(std::vector<Candidate>& newest, Candidate c, size_t max) {
  newest.insert(std::upper_bound(newest.begin(), newest.end(), c), std::move(c));
  if (newest.size() > max) newest.pop_back();
}

bool Hidden(const std::string& name) {
  return name.empty() || name[0] == '.' || name.find(kTempMarker) != std::string::npos;
}

// The `max` newest regular files of `dir` (not dot files, not temporaries),
// newest first. Holds at most `max` + 1 names whatever the directory holds.
Result<std::vector<Candidate>> NewestFiles(const std::string& dir, size_t max) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), ::closedir);
  if (!handle) return Status::FromErrno("base store '" + dir + "'", errno);
  std::vector<Candidate> newest;  // kept sorted
  for (;;) {
    errno = 0;
    struct dirent* entry = ::readdir(handle.get());
    if (!entry) {
      if (errno != 0) return Status::FromErrno("listing base store '" + dir + "'", errno);
      break;
    }
    const std::string name = entry->d_name;
    if (Hidden(name)) continue;
    struct stat st;
    if (::fstatat(::dirfd(handle.get()), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    char when[32];
    std::snprintf(when, sizeof when, "%020lld",
                  static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec);
    Keep(newest, Candidate{when, dir + "/" + name}, max);
  }
  return newest;
}

// The `max` newest objects under s3://BUCKET/PREFIX by LastModified, among
// the first 1000 keys S3 lists (one ListObjectsV2 page); objects whose last
// path component starts with '.' are skipped.
Result<std::vector<Candidate>> NewestObjects(const Endpoint& store, const S3Options& options, size_t max) {
  VF_ASSIGN_OR_RETURN(s3::Config config, s3::LoadConfig(options));
  s3::Client client(std::move(config), options, store.bucket);
  s3::Request list;
  list.method = "GET";
  list.query = {{"list-type", "2"}, {"max-keys", "1000"}, {"prefix", store.key}};
  list.what = "ListObjectsV2 prefix '" + store.key + "' (base store " + store.uri + ")";
  VF_ASSIGN_OR_RETURN(s3::Response response, client.Send(list));
  const std::vector<std::string> keys = s3::XmlFields(response.body, "Key");
  const std::vector<std::string> times = s3::XmlFields(response.body, "LastModified");
  if (keys.size() != times.size())
    return Status::Corruption(list.what + ": " + std::to_string(keys.size()) + " keys but " +
                              std::to_string(times.size()) + " LastModified fields");
  std::vector<Candidate> newest;
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t slash = keys[i].find_last_of('/');
    if (Hidden(slash == std::string::npos ? keys[i] : keys[i].substr(slash + 1))) continue;
    Keep(newest, Candidate{times[i], client.Uri(keys[i])}, max);
  }
  return newest;
}

}  // namespace

Result<Sha256Digest> StoredStreamId(const std::string& location, const TransportOptions& transport,
                                    uint64_t max_index_bytes, uint64_t* bytes_read) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> file, OpenRandomAccess(location, transport));
  CountingRandomAccess counting(std::shared_ptr<RandomAccessSource>(std::move(file)));
  Result<StoredStreamIndex> stored = ReadSeekIndex(counting, std::min(kMaxStoreIndexBytes, max_index_bytes));
  if (bytes_read) *bytes_read += counting.bytes();
  if (!stored.ok()) return stored.status();
  return stored->id;
}

const StoredBase* BaseStore::Find(const Sha256Digest& id) const {
  for (const StoredBase& stored : streams)
    if (stored.id == id) return &stored;
  return nullptr;
}

BaseOffer BaseStore::Offer(bool stores) const {
  BaseOffer offer;
  offer.stores = stores;
  for (const StoredBase& stored : streams) {
    if (offer.ids.size() == kMaxOfferedBases) break;
    offer.ids.push_back(stored.id);
  }
  return offer;
}

Result<BaseStore> ScanBaseStore(const std::string& dir, const TransportOptions& transport, size_t max_streams,
                                uint64_t max_index_bytes) {
  const size_t max = std::min(max_streams, kMaxStoreStreams);
  BaseStore store;
  store.dir = dir;
  std::vector<Candidate> newest;
  Result<Endpoint> endpoint = ParseEndpoint(dir);
  if (endpoint.ok() && endpoint->kind == Endpoint::Kind::kS3) {
    VF_ASSIGN_OR_RETURN(newest, NewestObjects(*endpoint, transport.s3, max));
  } else {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("base store '" + dir + "'", errno);
    if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("base store '" + dir + "' is not a directory");
    VF_ASSIGN_OR_RETURN(newest, NewestFiles(dir, max));
  }
  for (const Candidate& candidate : newest) {
    ++store.files_read;
    Result<Sha256Digest> id = StoredStreamId(candidate.location, transport, max_index_bytes, &store.bytes_read);
    if (!id.ok()) {
      ++store.skipped;
      store.notes.push_back(Printable(candidate.location) + " is not a base: " + id.status().message());
      continue;
    }
    if (store.Find(*id)) continue;  // a copy of a newer file's stream
    store.streams.push_back(StoredBase{candidate.location, *id});
  }
  return store;
}

namespace {

// What a receiver that cannot open a base it offered keeps to itself: the
// store's file behind the id, and why it failed.
Status CannotOpenOffered(const Sha256Digest& id, const std::string& detail, const ReceiverLog& log) {
  if (log) log("base " + HexDigest(id) + ": " + detail);
  return Status::NotFound("this receiver offered base " + HexDigest(id) +
                          " but cannot open it (the receiver's log says why)");
}

// Why the store's skipped files were not offered (a stream whose index does
// not fit the budget, say), for the receiver's log: "" when none was.
std::string SkippedNotes(const BaseStore& store) {
  std::string notes;
  for (const std::string& note : store.notes) notes += "; " + note;
  return notes.empty() ? notes : " (" + std::to_string(store.skipped) + " file(s) skipped" + notes + ")";
}

// The base open options of a receiver's store: the one opener's
// (BaseOpenOptionsFor), narrowed to the store's files: a location a sender
// wrote into a BASE frame names its own machine and is never opened here.
// The chain's links are found by id in the store, opened only as the chain
// needs them: the store's other streams are not read.
BaseOpenOptions StoreOnly(std::shared_ptr<const BaseStore> store, const TransportOptions& transport,
                          uint64_t max_index_bytes) {
  BaseOpenOptions options = BaseOpenOptionsFor(transport, max_index_bytes);
  options.open = [store, open = std::move(options.open)](const std::string& location) {
    bool in_store = false;
    for (const StoredBase& s : store->streams) in_store |= s.location == location;
    if (!in_store)
      return Result<std::shared_ptr<RandomAccessSource>>(
          Status::NotFound("base " + Printable(location) +
                           " (named by a stream's BASE frame) is not in this "
                           "receiver's store " +
                           EscapedText(store->dir)));
    return open(location);
  };
  options.locate = [store](const StreamId& id) {
    const StoredBase* link = store->Find(id);
    return link ? link->location : std::string();
  };
  return options;
}

}  // namespace

OpenBaseFn StoreBaseOpener(std::shared_ptr<const BaseStore> store, const BaseOffer& offered,
                           const TransportOptions& transport, ReceiverLog log, uint64_t max_index_bytes) {
  return [store = std::move(store), offered, transport, log = std::move(log),
          max_index_bytes](const BaseDescriptor& wanted) -> Result<std::shared_ptr<const BaseStream>> {
    const std::string id = HexDigest(wanted.base_id);
    if (!offered.Holds(wanted.base_id)) {
      if (log)
        log("the sender's stream is built on base " + id + ", not offered: " +
            (store->dir.empty()
                 ? std::string("this receiver has no base store (--base-store DIR)")
                 : "it offered " + std::to_string(offered.ids.size()) + " from " + EscapedText(store->dir)) +
            SkippedNotes(*store));
      return Status::InvalidArgument("the stream is built on base " + id + ", which this receiver never offered " +
                                     "its sender");
    }
    const StoredBase* stored = store->Find(wanted.base_id);
    if (!stored) return CannotOpenOffered(wanted.base_id, "offered, but not in " + EscapedText(store->dir), log);
    Result<std::shared_ptr<const BaseStream>> base =
        OpenBaseStream(stored->location, StoreOnly(store, transport, max_index_bytes), &wanted);
    if (!base.ok()) return CannotOpenOffered(wanted.base_id, base.status().ToString(), log);
    return base;
  };
}

Result<BaseStore> BaseStoreOf(const std::vector<std::string>& locations, const TransportOptions& transport,
                              uint64_t max_index_bytes) {
  BaseStore store;
  store.dir = "--base";
  if (locations.size() > kMaxStoreStreams)
    return Status::InvalidArgument(std::to_string(locations.size()) + " --base streams: at most " +
                                   std::to_string(kMaxStoreStreams));
  for (const std::string& location : locations) {
    ++store.files_read;
    Result<Sha256Digest> id = StoredStreamId(location, transport, max_index_bytes, &store.bytes_read);
    if (!id.ok()) return id.status().WithContext("--base " + Printable(location));
    if (!store.Find(*id)) store.streams.push_back(StoredBase{location, *id});
  }
  return store;
}

Result<OpenBaseFn> OfferStore(const std::string& dir, const std::vector<std::string>& bases, bool stores,
                              TransportOptions* transport, ReceiverLog log, uint64_t max_index_bytes) {
  if (!dir.empty() && !bases.empty()) return Status::InvalidArgument("--base and --base-store exclude each other");
  auto store = std::make_shared<BaseStore>();
  if (!dir.empty()) {
    VF_ASSIGN_OR_RETURN(*store, ScanBaseStore(dir, *transport, kMaxStoreStreams, max_index_bytes));
  } else if (!bases.empty()) {
    VF_ASSIGN_OR_RETURN(*store, BaseStoreOf(bases, *transport, max_index_bytes));
  }
  transport->net.base_offer = store->Offer(stores);
  return StoreBaseOpener(store, transport->net.base_offer, *transport, std::move(log), max_index_bytes);
}

ReceiverLog StderrLog(const std::string& command) {
  return
      [command](const std::string& line) { std::fprintf(stderr, "vramflow %s: %s\n", command.c_str(), line.c_str()); };
}

}  // namespace vramflow
