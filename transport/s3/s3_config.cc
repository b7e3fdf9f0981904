// SPDX-License-Identifier: MIT
#include "transport/s3/s3_config.h"

#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "transport/s3/s3_encryption.h"

namespace vramflow::s3 {
namespace {

using Section = std::map<std::string, std::string>;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Env(const Getenv& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// The first non-empty value among `keys` in `section`.
std::string Lookup(const Section& section, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = section.find(k);
    if (it != section.end() && !it->second.empty()) return it->second;
  }
  return "";
}

Status SplitEndpoint(const std::string& url, Config* config) {
  size_t sep = url.find("://");
  if (sep == std::string::npos)
    return Status::InvalidArgument("S3 endpoint '" + url + "' must start with http:// or https://");
  config->scheme = url.substr(0, sep);
  if (config->scheme != "http" && config->scheme != "https")
    return Status::InvalidArgument("S3 endpoint '" + url + "' must start with http:// or https://");
  std::string host = url.substr(sep + 3);
  while (!host.empty() && host.back() == '/') host.pop_back();
  if (host.empty() || host.find('/') != std::string::npos)
    return Status::InvalidArgument("S3 endpoint '" + url + "' must be scheme://HOST[:PORT] without a path");
  config->host = host;
  return Status::Ok();
}

}  // namespace

Result<Ini> ReadIniFile(const std::string& path) {
  Ini ini;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return ini;
    return Status::FromErrno("reading '" + path + "'", errno);
  }
  std::string line, section, parent;
  while (std::getline(in, line)) {
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(t.substr(1, t.size() - 2));
      parent.clear();
      ini[section];
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos) continue;
    std::string key = Trim(t.substr(0, eq)), value = Trim(t.substr(eq + 1));
    if (indented && !parent.empty()) {
      ini[section][parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    ini[section][key] = value;
  }
  return ini;
}

Result<Config> LoadConfig(const S3Options& options) {
  Getenv getenv = options.getenv ? options.getenv : Getenv([](const char* n) { return std::getenv(n); });
  Config config;
  std::string home = Env(getenv, "HOME");
  std::string profile = options.profile;
  if (profile.empty()) profile = Env(getenv, "AWS_PROFILE");
  if (profile.empty()) profile = Env(getenv, "AWS_DEFAULT_PROFILE");
  if (profile.empty()) profile = "default";
  std::string credentials_file = Env(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_file.empty()) credentials_file = home + "/.aws/credentials";
  std::string config_file = Env(getenv, "AWS_CONFIG_FILE");
  if (config_file.empty()) config_file = home + "/.aws/config";

  VF_ASSIGN_OR_RETURN(Ini credentials_ini, ReadIniFile(credentials_file));
  VF_ASSIGN_OR_RETURN(Ini config_ini, ReadIniFile(config_file));
  // find(), not operator[]: the chain tells a missing profile from an empty one.
  auto config_section = config_ini.find(profile == "default" ? "default" : "profile " + profile);
  Section from_config = config_section == config_ini.end() ? Section() : config_section->second;

  config.region = options.region;
  if (config.region.empty()) config.region = Env(getenv, "AWS_REGION");
  if (config.region.empty()) config.region = Env(getenv, "AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = Lookup(from_config, {"region"});
  if (config.region.empty()) config.region = "us-east-1";

  // CAs: the aws CLI's settings, then the variables curl and OpenSSL read.
  TlsTrust& trust = config.trust;
  for (auto [value, source] : {std::pair{options.ca_bundle, std::string("--ca-bundle")},
                               {Env(getenv, "AWS_CA_BUNDLE"), "AWS_CA_BUNDLE"},
                               {Lookup(from_config, {"ca_bundle"}), "ca_bundle of profile '" + profile + "'"},
                               {Env(getenv, "SSL_CERT_FILE"), "SSL_CERT_FILE"}}) {
    if (value.empty()) continue;
    trust.ca_file = value;
    trust.source = source;
    break;
  }
  trust.ca_dir = trust.ca_file.empty() ? Env(getenv, "SSL_CERT_DIR") : "";
  if (!trust.ca_dir.empty()) trust.source = "SSL_CERT_DIR";
  std::string ca_path = trust.ca_file.empty() ? trust.ca_dir : trust.ca_file;
  if (!ca_path.empty() && ::access(ca_path.c_str(), R_OK) != 0)
    return Status::FromErrno("CA bundle " + ca_path + " (from " + trust.source + ")", errno);

  std::string endpoint = options.endpoint;
  if (endpoint.empty()) endpoint = Env(getenv, "AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env(getenv, "AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = Lookup(from_config, {"s3.endpoint_url", "endpoint_url"});
  bool custom = !endpoint.empty();
  if (!custom) endpoint = "https://s3." + config.region + ".amazonaws.com";
  VF_RETURN_IF_ERROR(SplitEndpoint(endpoint, &config));

  std::string addressing = options.addressing;
  if (addressing.empty()) addressing = Env(getenv, "VRAMFLOW_S3_ADDRESSING");
  if (addressing.empty()) addressing = Lookup(from_config, {"s3.addressing_style"});
  if (addressing.empty() || addressing == "auto") addressing = custom ? "path" : "virtual";
  if (addressing != "path" && addressing != "virtual")
    return Status::InvalidArgument("S3 addressing style '" + addressing +
                                   "' (VRAMFLOW_S3_ADDRESSING) must be 'path' "
                                   "or 'virtual'");
  config.path_style = addressing == "path";

  ChainInputs chain;
  chain.getenv = getenv;
  chain.profile = profile;
  chain.profile_explicit = !options.profile.empty();
  chain.credentials_file = credentials_ini;
  chain.config_file = config_ini;
  chain.credentials_path = credentials_file;
  chain.config_path = config_file;
  chain.region = config.region;
  chain.trust = trust;
  chain.refresh.margin = options.credential_refresh_margin;
  chain.container_base = options.container_credentials_base;
  chain.cleanup = options.cleanup;
  VF_RETURN_IF_ERROR(CheckEncryption(options.encryption, config.scheme, config.host));
  VF_ASSIGN_OR_RETURN(config.credentials, ResolveCredentialChain(chain));
  config.credentials_source = config.credentials->source();

  return config;
}

}  // namespace vramflow::s3
