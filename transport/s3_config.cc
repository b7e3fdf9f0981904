#include "transport/s3_config.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace vramflow::s3 {
namespace {

using Ini = std::map<std::string, std::map<std::string, std::string>>;
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
  std::string profile = Env(getenv, "AWS_PROFILE");
  if (profile.empty()) profile = Env(getenv, "AWS_DEFAULT_PROFILE");
  if (profile.empty()) profile = "default";
  std::string credentials_file = Env(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_file.empty()) credentials_file = home + "/.aws/credentials";
  std::string config_file = Env(getenv, "AWS_CONFIG_FILE");
  if (config_file.empty()) config_file = home + "/.aws/config";

  VF_ASSIGN_OR_RETURN(Ini credentials_ini, ReadIniFile(credentials_file));
  VF_ASSIGN_OR_RETURN(Ini config_ini, ReadIniFile(config_file));
  Section from_credentials = credentials_ini[profile];
  Section from_config = config_ini[profile == "default" ? "default" : "profile " + profile];

  // Credentials: the environment as a pair, else the profile (credentials
  // file first, as the CLI does).
  Credentials& c = config.credentials;
  c.access_key = Env(getenv, "AWS_ACCESS_KEY_ID");
  c.secret_key = Env(getenv, "AWS_SECRET_ACCESS_KEY");
  if (!c.access_key.empty() && !c.secret_key.empty()) {
    c.session_token = Env(getenv, "AWS_SESSION_TOKEN");
    config.credentials_source = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
  } else {
    c = {};
    for (auto [section, file] : {std::pair{&from_credentials, &credentials_file}, {&from_config, &config_file}}) {
      c.access_key = Lookup(*section, {"aws_access_key_id"});
      c.secret_key = Lookup(*section, {"aws_secret_access_key"});
      c.session_token = Lookup(*section, {"aws_session_token"});
      if (!c.access_key.empty() && !c.secret_key.empty()) {
        config.credentials_source = "profile '" + profile + "' in " + *file;
        break;
      }
      c = {};
    }
    if (c.access_key.empty())
      return Status::InvalidArgument("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add "
                                     "aws_access_key_id/aws_secret_access_key for profile '" + profile + "' to " +
                                     credentials_file);
  }

  config.region = options.region;
  if (config.region.empty()) config.region = Env(getenv, "AWS_REGION");
  if (config.region.empty()) config.region = Env(getenv, "AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = Lookup(from_config, {"region"});
  if (config.region.empty()) config.region = "us-east-1";

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
    return Status::InvalidArgument("S3 addressing style '" + addressing + "' (VRAMFLOW_S3_ADDRESSING) must be 'path' "
                                   "or 'virtual'");
  config.path_style = addressing == "path";
  return config;
}

}  // namespace vramflow::s3
