// SPDX-License-Identifier: MIT
// libcurl, opened when s3:// first needs it rather than linked.
//
// Only s3:// (and the AWS credential sources) use libcurl, and linking it
// loads 26 more shared libraries (GnuTLS, Kerberos, LDAP, SSH, ...) into
// every vramflow process and into CRIU with the plugin: 3.4 ms of dynamic
// loading per start here, as much as packing 5 MiB. So the library is
// opened with dlopen() on first use, its functions looked up once, and
// curl_global_init() run once (it is not thread-safe itself). The handle
// stays open for the life of the process, as a linked library would.
#pragma once

#include <curl/curl.h>

#include <memory>

#include "common/status.h"

namespace vramflow::s3 {

// The libcurl functions vramflow calls, with libcurl's signatures.
struct CurlApi {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_reset)(CURL*);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// Opens libcurl (libcurl.so.4) and initializes it, once per process; every
// call returns the same table, or the same error, naming the library and
// what the loader said (libcurl not installed, a symbol missing).
Result<const CurlApi*> OpenCurl();

// The table, where a CURL handle or list already exists (so OpenCurl()
// succeeded): for deleters.
const CurlApi& OpenedCurl();

// An easy handle and a header list, freed through the opened library.
struct CurlEasyDeleter {
  void operator()(CURL* c) const { OpenedCurl().easy_cleanup(c); }
};
using CurlEasyHandle = std::unique_ptr<CURL, CurlEasyDeleter>;
struct CurlListDeleter {
  void operator()(curl_slist* l) const { OpenedCurl().slist_free_all(l); }
};
using CurlList = std::unique_ptr<curl_slist, CurlListDeleter>;

}  // namespace vramflow::s3
