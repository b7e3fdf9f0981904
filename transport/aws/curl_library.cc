// SPDX-License-Identifier: MIT
#include "transport/aws/curl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace vramflow::s3 {
namespace {

constexpr char kLibrary[] = "libcurl.so.4";

struct Opened {
  CurlApi api{};
  Status status;
};

// Looks `name` up into `*slot`; false (with the error in `status`) if absent.
template <typename F>
bool Find(void* library, const char* name, F* slot, Status* status) {
  *slot = reinterpret_cast<F>(::dlsym(library, name));
  if (*slot) return true;
  *status = Status::NotSupported(std::string(kLibrary) + " has no " + name + " (s3:// needs libcurl 7.85 or later)");
  return false;
}

Opened Open() {
  Opened o;
  // RTLD_NODELETE: never unloaded, as a linked library would not be.
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!library) {
    const char* why = ::dlerror();
    o.status = Status::NotSupported("s3:// needs libcurl, which could not be loaded (" +
                                    std::string(why ? why : kLibrary) + "): install libcurl4");
    return o;
  }
  CURLcode (*global_init)(long) = nullptr;
  CurlApi& a = o.api;
  if (!Find(library, "curl_global_init", &global_init, &o.status) ||
      !Find(library, "curl_easy_init", &a.easy_init, &o.status) ||
      !Find(library, "curl_easy_setopt", &a.easy_setopt, &o.status) ||
      !Find(library, "curl_easy_perform", &a.easy_perform, &o.status) ||
      !Find(library, "curl_easy_getinfo", &a.easy_getinfo, &o.status) ||
      !Find(library, "curl_easy_reset", &a.easy_reset, &o.status) ||
      !Find(library, "curl_easy_cleanup", &a.easy_cleanup, &o.status) ||
      !Find(library, "curl_easy_strerror", &a.easy_strerror, &o.status) ||
      !Find(library, "curl_slist_append", &a.slist_append, &o.status) ||
      !Find(library, "curl_slist_free_all", &a.slist_free_all, &o.status))
    return o;
  if (CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK)
    o.status = Status::Internal("curl_global_init failed: " + std::string(a.easy_strerror(rc)));
  return o;
}

const Opened& Once() {
  // The library is process-wide state by nature (one dlopen, one
  // curl_global_init); this only remembers the outcome.
  static const Opened opened = Open();
  return opened;
}

}  // namespace

Result<const CurlApi*> OpenCurl() {
  const Opened& o = Once();
  if (!o.status.ok()) return o.status;
  return &o.api;
}

const CurlApi& OpenedCurl() {
  const Opened& o = Once();
  if (!o.status.ok()) std::abort();  // no handle can exist without it
  return o.api;
}

}  // namespace vramflow::s3
