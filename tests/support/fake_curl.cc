// SPDX-License-Identifier: MIT
// Built as a libcurl.so.4 that has none of libcurl's functions, for
// tests/curl_library_test.cc (found first through LD_LIBRARY_PATH).
extern "C" int vramflow_fake_curl() { return 0; }
