// SPDX-License-Identifier: MIT
#include "transport/s3/s3_journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "common/owner_tag.h"
#include "common/printable.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_config.h"

namespace vramflow::s3 {
namespace {

constexpr char kSuffix[] = ".upload";

std::string Encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c <= ' ' || c == '%' || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool Decode(const std::string& text, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      *out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return false;
    unsigned value = 0;
    if (std::sscanf(text.substr(i + 1, 2).c_str(), "%2x", &value) != 1) return false;
    *out += static_cast<char>(value);
    i += 2;
  }
  return true;
}

Status MakeDirs(const std::string& dir) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::FromErrno("creating the upload journal directory '" + part + "'", errno);
  }
  return Status::Ok();
}

}  // namespace

std::string DefaultJournalDir(const std::function<const char*(const char*)>& getenv) {
  auto env = [&](const char* name) -> std::string {
    const char* v = getenv ? getenv(name) : std::getenv(name);
    return v ? v : "";
  };
  std::string state = env("XDG_STATE_HOME");
  if (state.empty() || state[0] != '/') {
    std::string home = env("HOME");
    if (home.empty()) return "";
    state = home + "/.local/state";
  }
  return state + "/vramflow/s3-uploads";
}

Status Journal(const std::string& dir, JournaledUpload* upload) {
  VF_RETURN_IF_ERROR(MakeDirs(dir));
  upload->owner = OwnerTag();
  std::random_device rd;
  char random[16];
  std::snprintf(random, sizeof random, "-%08x", static_cast<unsigned>(rd()));
  const std::string path = dir + "/" + upload->owner + random + kSuffix;
  const std::string temp = path + ".new";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << "endpoint " << Encode(upload->endpoint) << "\n"
        << "addressing " << Encode(upload->addressing) << "\n"
        << "region " << Encode(upload->region) << "\n"
        << "bucket " << Encode(upload->bucket) << "\n"
        << "key " << Encode(upload->key) << "\n"
        << "upload_id " << Encode(upload->upload_id) << "\n"
        << "owner " << Encode(upload->owner) << "\n";
    out.flush();
    if (!out) {
      ::unlink(temp.c_str());
      return Status::IoError("writing the upload journal file '" + temp + "'");
    }
  }
  // Complete or absent, never half written.
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(temp.c_str());
    return Status::FromErrno("renaming the upload journal file '" + temp + "'", e);
  }
  upload->file = path;
  return Status::Ok();
}

void Forget(const JournaledUpload& upload) {
  if (!upload.file.empty()) ::unlink(upload.file.c_str());
}

std::vector<JournaledUpload> ReadJournal(const std::string& dir, std::vector<std::string>* problems) {
  std::vector<JournaledUpload> uploads;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno != ENOENT) problems->push_back("cannot read the upload journal '" + dir + "': " + std::strerror(errno));
    return uploads;
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= sizeof(kSuffix) - 1 ||
        name.compare(name.size() - (sizeof(kSuffix) - 1), std::string::npos, kSuffix) != 0)
      continue;
    JournaledUpload u;
    u.file = dir + "/" + name;
    std::ifstream in(u.file);
    std::string line;
    bool ok = static_cast<bool>(in);
    while (ok && std::getline(in, line)) {
      size_t space = line.find(' ');
      if (space == std::string::npos) {
        ok = false;
        break;
      }
      std::string field = line.substr(0, space), value;
      if (!Decode(line.substr(space + 1), &value)) ok = false;
      if (field == "endpoint") u.endpoint = value;
      else if (field == "addressing") u.addressing = value;
      else if (field == "region") u.region = value;
      else if (field == "bucket") u.bucket = value;
      else if (field == "key") u.key = value;
      else if (field == "upload_id") u.upload_id = value;
      else if (field == "owner") u.owner = value;
    }
    if (!ok || u.endpoint.empty() || u.bucket.empty() || u.key.empty() || u.upload_id.empty() || u.owner.empty()) {
      problems->push_back("'" + u.file + "' is not a complete upload journal record; left as it is");
      continue;
    }
    uploads.push_back(std::move(u));
  }
  ::closedir(d);
  return uploads;
}

CleanupReport AbortJournaledUploads(const std::string& dir, const S3Options& options, bool include_live) {
  CleanupReport report;
  for (JournaledUpload& u : ReadJournal(dir, &report.failures)) {
    if (!include_live && OwnerAlive(u.owner)) {
      ++report.skipped;
      continue;
    }
    S3Options o = options;
    o.endpoint = u.endpoint;
    if (!u.region.empty()) o.region = u.region;
    if (!u.addressing.empty()) o.addressing = u.addressing;
    // The upload id is S3's: escaped.
    const std::string what =
        "s3://" + u.bucket + "/" + u.key + " (upload " + EscapedText(u.upload_id) + ", at " + u.endpoint + ")";
    Result<Config> config = LoadConfig(o);
    if (!config.ok()) {
      report.failures.push_back(what + ": " + config.status().ToString());
      continue;
    }
    Client client(std::move(*config), o, u.bucket);
    Request r;
    r.method = "DELETE";
    r.key = u.key;
    r.query = {{"uploadId", u.upload_id}};
    r.answers = {404};  // NoSuchUpload: completed or aborted already
    r.what = "AbortMultipartUpload";
    Result<Response> response = client.Send(r);
    if (!response.ok()) {
      report.failures.push_back(what + ": " + response.status().ToString());
      continue;
    }
    Forget(u);
    ++report.aborted;
  }
  return report;
}

}  // namespace vramflow::s3
