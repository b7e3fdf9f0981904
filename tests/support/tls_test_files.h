// SPDX-License-Identifier: MIT
// Keys and certificates for TLS tests (tls_test.cc, net_transport_test.cc),
// made once per test binary with the openssl command: a shared key file
// "vf.key" (kKeyHex) and "other.key", a CA "ca" that signs a receiver
// ("server") and a sender ("client") certificate, and a second CA
// "other-ca" with its own two. Each certificate names 127.0.0.1 and
// localhost.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow::testing {

inline constexpr char kKeyHex[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
inline constexpr char kOtherKeyHex[] = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

// Keys and certificates, made once: a CA with a receiver (server) and a sender
// (client) certificate, and another CA with its own two.
class TlsFiles {
 public:
  TlsFiles() {
    WriteKey("vf.key", kKeyHex);
    WriteKey("other.key", kOtherKeyHex);
    MakeCa("ca");
    MakeCa("other-ca");
    MakeCert("ca", "server", "receiver");
    MakeCert("ca", "client", "sender");
    MakeCert("other-ca", "other-server", "impostor-receiver");
    MakeCert("other-ca", "other-client", "impostor-sender");
  }
  std::string File(const std::string& name) const { return dir_.File(name); }
  const std::string& path() const { return dir_.path(); }

 private:
  void WriteKey(const std::string& name, const std::string& hex) {
    std::string path = dir_.File(name);
    std::ofstream(path) << hex << "\n";
    ::chmod(path.c_str(), 0600);
  }
  void Run(const std::string& line) {
    auto r = RunShell("cd " + ShellQuote(dir_.path()) + " && " + line);
    ASSERT_EQ(r.code, 0) << line << "\n" << r.output;
  }
  void MakeCa(const std::string& name) {
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout " + name + ".key -out " +
        name + ".pem -subj /CN=" + name +
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign");
  }
  void MakeCert(const std::string& ca, const std::string& name, const std::string& cn) {
    Run("printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > " + name + ".ext");
    Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name + ".key -out " + name +
        ".csr -subj /CN=" + cn + "/O=vramflow-test");
    Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
        ".key -CAcreateserial -days 2 -out " + name + ".pem -extfile " + name + ".ext");
  }
  TempDir dir_;
};

inline const TlsFiles& Files() {
  static const TlsFiles* files = new TlsFiles();
  return *files;
}

}  // namespace vramflow::testing
