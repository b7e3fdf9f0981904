// SPDX-License-Identifier: MIT
#include "transport/aws/credential_chain.h"

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>

#include "transport/aws/credential_process.h"
#include "transport/aws/metadata.h"
#include "transport/aws/sso.h"
#include "transport/aws/sts.h"

namespace vramflow::s3 {
namespace {

using Section = std::map<std::string, std::string>;
using ProviderPtr = std::shared_ptr<CredentialProvider>;
constexpr int kMaxRoleChain = 8;
constexpr size_t kMaxTokenFile = 64 * 1024;
// Bounds on the instance metadata settings: every credential lookup waits at
// most 3 requests x attempts x timeout for an IMDS that does not answer.
constexpr int kMaxImdsTimeoutSeconds = 60;
constexpr long kMaxImdsAttempts = 10;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::string> ReadTokenFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(what + " " + path + ": cannot read");
  std::string token(kMaxTokenFile + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (token.size() > kMaxTokenFile)
    return Status::InvalidArgument(what + " " + path + ": larger than " + std::to_string(kMaxTokenFile) + " bytes");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return Status::InvalidArgument(what + " " + path + ": empty");
  return token;
}

class Chain {
 public:
  explicit Chain(const ChainInputs& in) : in_(in) {}

  Result<ProviderPtr> Resolve() {
    if (in_.profile != "default" && !Exists(in_.profile))
      return Status::InvalidArgument("no S3 credentials: profile '" + in_.profile + "' is in neither " +
                                     in_.credentials_path + " nor " + in_.config_path +
                                     " (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add the profile)");
    if (!in_.profile_explicit) {
      if (ProviderPtr env = Environment()) return Loaded(env);
    }
    Section p = Profile(in_.profile);
    std::set<std::string> visited{in_.profile};
    if (!Get(p, "role_arn").empty() && (!Get(p, "source_profile").empty() || !Get(p, "credential_source").empty())) {
      VF_ASSIGN_OR_RETURN(ProviderPtr role, AssumeRoleFor(in_.profile, 0, &visited));
      return Loaded(role);
    }
    // --profile also hides AWS_WEB_IDENTITY_TOKEN_FILE / AWS_ROLE_ARN, as in botocore.
    if (ProviderPtr web = WebIdentity(in_.profile, p, /*use_env=*/!in_.profile_explicit)) return Loaded(web);
    VF_ASSIGN_OR_RETURN(ProviderPtr sso, Sso(in_.profile, p));
    if (sso) return Loaded(sso);
    if (ProviderPtr keys = StaticKeys(in_.credentials_file, in_.profile, in_.credentials_path)) return Loaded(keys);
    if (ProviderPtr process = Process(in_.profile, p)) return Loaded(process);
    if (ProviderPtr keys = StaticKeys(in_.config_file, ConfigSectionName(in_.profile), in_.config_path))
      return Loaded(keys);
    VF_ASSIGN_OR_RETURN(ProviderPtr container, Container());
    if (container) return Loaded(container);
    std::string imds_failure;
    VF_ASSIGN_OR_RETURN(ProviderPtr imds, Imds());
    if (imds) {
      Result<Credentials> first = imds->Get();
      if (first.ok()) return imds;
      imds_failure = "; " + first.status().message();
    } else {
      imds_failure = "; instance metadata disabled (AWS_EC2_METADATA_DISABLED)";
    }
    return Status::InvalidArgument(
        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add aws_access_key_id/"
        "aws_secret_access_key (or role_arn, credential_process) for profile '" +
        in_.profile + "' to " + in_.credentials_path + " or " + in_.config_path + imds_failure);
  }

 private:
  std::string Env(const char* name) const {
    const char* v = in_.getenv(name);
    return v ? v : "";
  }
  static std::string Get(const Section& s, const char* key) {
    auto it = s.find(key);
    return it == s.end() ? "" : it->second;
  }
  std::string ConfigSectionName(const std::string& name) const {
    return name == "default" ? "default" : "profile " + name;
  }
  bool Exists(const std::string& name) const {
    return in_.credentials_file.count(name) || in_.config_file.count(ConfigSectionName(name));
  }
  // The profile's settings: config file, then the credentials file's over them.
  Section Profile(const std::string& name) const {
    Section s;
    auto cfg = in_.config_file.find(ConfigSectionName(name));
    if (cfg != in_.config_file.end()) s = cfg->second;
    auto cred = in_.credentials_file.find(name);
    if (cred != in_.credentials_file.end())
      for (const auto& [k, v] : cred->second) s[k] = v;
    return s;
  }
  std::string SessionName(const std::string& configured) const {
    return configured.empty() ? "vramflow-" + std::to_string(std::time(nullptr)) : configured;
  }
  StsEndpoint Sts(const Section& profile) const {
    StsEndpoint sts;
    sts.url = Env("AWS_ENDPOINT_URL_STS");
    if (sts.url.empty()) sts.url = Env("AWS_ENDPOINT_URL");
    if (sts.url.empty()) sts.url = Get(profile, "sts.endpoint_url");
    if (sts.url.empty()) sts.url = Get(profile, "endpoint_url");
    if (sts.url.empty()) sts.url = "https://sts." + in_.region + ".amazonaws.com";
    sts.region = in_.region;
    sts.trust = in_.trust;
    return sts;
  }
  ProviderPtr Make(std::string source, CredentialFetch fetch) const {
    return std::make_shared<CredentialProvider>(std::move(source), std::move(fetch), in_.refresh);
  }
  ProviderPtr Fixed(std::string source, Credentials c) const {
    TimedCredentials t{std::move(c), std::nullopt};
    return Make(std::move(source), [t] { return Result<TimedCredentials>(t); });
  }
  static Result<ProviderPtr> Loaded(ProviderPtr p) {
    Result<Credentials> first = p->Get();
    if (!first.ok()) return first.status();
    return p;
  }

  ProviderPtr Environment() const {
    Credentials c{Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"), Env("AWS_SESSION_TOKEN")};
    if (c.access_key.empty() || c.secret_key.empty()) return nullptr;
    return Fixed("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", std::move(c));
  }

  ProviderPtr StaticKeys(const Ini& file, const std::string& section_name, const std::string& path) const {
    auto section = file.find(section_name);
    if (section == file.end()) return nullptr;
    return KeysOf(section->second, in_.profile, path);
  }
  ProviderPtr KeysOf(const Section& s, const std::string& name, const std::string& path) const {
    Credentials c{Get(s, "aws_access_key_id"), Get(s, "aws_secret_access_key"), Get(s, "aws_session_token")};
    if (c.access_key.empty() || c.secret_key.empty()) return nullptr;
    return Fixed("profile '" + name + "' in " + path, std::move(c));
  }

  ProviderPtr WebIdentity(const std::string& name, const Section& p, bool use_env) const {
    std::string token_file = use_env ? Env("AWS_WEB_IDENTITY_TOKEN_FILE") : "";
    std::string role = use_env ? Env("AWS_ROLE_ARN") : "";
    std::string session = use_env ? Env("AWS_ROLE_SESSION_NAME") : "";
    std::string from = "AWS_WEB_IDENTITY_TOKEN_FILE";
    if (token_file.empty()) {
      token_file = Get(p, "web_identity_token_file");
      from = "web_identity_token_file of profile '" + name + "'";
    }
    if (role.empty()) role = Get(p, "role_arn");
    if (session.empty()) session = Get(p, "role_session_name");
    if (token_file.empty() || role.empty()) return nullptr;
    AssumeRoleParams params{role, SessionName(session), "", 0};
    StsEndpoint sts = Sts(p);
    return Make("web identity (" + from + ") for " + role + " via " + sts.url, [sts, params, token_file] {
      Result<std::string> token = ReadTokenFile(token_file, "web identity token file");
      if (!token.ok()) return Result<TimedCredentials>(token.status());
      return AssumeRoleWithWebIdentity(sts, *token, params);
    });
  }

  // An SSO profile (sso_start_url, or sso_session naming an [sso-session]
  // section): nullptr when `p` is none, an error when it is one badly set up.
  Result<ProviderPtr> Sso(const std::string& name, const Section& p) const {
    SsoProfile sso;
    sso.profile = name;
    sso.session = Get(p, "sso_session");
    if (Get(p, "sso_start_url").empty() && sso.session.empty()) return ProviderPtr();
    Section settings = p;
    if (!sso.session.empty()) {
      auto section = in_.config_file.find("sso-session " + sso.session);
      if (section == in_.config_file.end())
        return Status::InvalidArgument("profile '" + name + "': sso_session '" + sso.session +
                                       "' has no [sso-session " + sso.session + "] section in " + in_.config_path);
      for (const auto& [k, v] : section->second) settings[k] = v;
    }
    sso.start_url = Get(settings, "sso_start_url");
    sso.region = Get(settings, "sso_region");
    sso.account_id = Get(p, "sso_account_id");
    sso.role_name = Get(p, "sso_role_name");
    if (sso.start_url.empty() || sso.region.empty() || sso.account_id.empty() || sso.role_name.empty())
      return Status::InvalidArgument("SSO profile '" + name +
                                     "' needs sso_start_url, sso_region, sso_account_id and sso_role_name");
    sso.cache_dir = Env("HOME") + "/.aws/sso/cache";
    sso.portal_url = Env("AWS_ENDPOINT_URL_SSO");
    sso.oidc_url = Env("AWS_ENDPOINT_URL_SSO_OIDC");
    sso.trust = in_.trust;
    return Make("SSO profile '" + name + "' (" + sso.role_name + "@" + sso.account_id + ")",
                [sso] { return FetchSsoCredentials(sso); });
  }

  ProviderPtr Process(const std::string& name, const Section& p) const {
    std::string command = Get(p, "credential_process");
    if (command.empty()) return nullptr;
    // Errors name it by its profile (the provider's source), never by its
    // command line, which may carry a secret.
    CredentialProcessOptions options;
    options.timeout = in_.process_timeout;
    options.cleanup = in_.cleanup;
    return Make("credential_process of profile '" + name + "'",
                [command, options] { return RunCredentialProcess(command, options); });
  }

  // Container endpoint: nullptr when not configured, an error when badly so.
  Result<ProviderPtr> Container() const {
    ContainerEndpoint e;
    std::string relative = Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    std::string full = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!relative.empty()) {
      e.url = in_.container_base + (relative[0] == '/' ? "" : "/") + relative;
    } else if (!full.empty()) {
      VF_RETURN_IF_ERROR(CheckContainerFullUri(full));
      e.url = full;
    } else {
      return ProviderPtr();
    }
    e.token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    e.token_file = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    e.trust = in_.trust;
    return Make("container credentials endpoint " + e.url, [e] { return FetchContainerCredentials(e); });
  }

  // A setting as botocore reads it: the variable, else the active profile's key.
  std::string Setting(const char* variable, const char* key) const {
    std::string value = Env(variable);
    return value.empty() ? Get(Profile(in_.profile), key) : value;
  }

  // Instance metadata, or none when AWS_EC2_METADATA_DISABLED; an error for
  // a setting botocore would refuse too.
  Result<ProviderPtr> Imds() const {
    if (Lower(Env("AWS_EC2_METADATA_DISABLED")) == "true") return ProviderPtr();
    ImdsEndpoint e;
    const std::string mode = Setting("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ec2_metadata_service_endpoint_mode");
    if (!mode.empty() && Lower(mode) != "ipv4" && Lower(mode) != "ipv6")
      return Status::InvalidArgument("instance metadata endpoint mode '" + mode +
                                     "' (AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE / ec2_metadata_service_endpoint_mode)"
                                     " must be IPv4 or IPv6");
    const bool ipv6 =
        mode.empty() ? Lower(Setting("AWS_IMDS_USE_IPV6", "imds_use_ipv6")) == "true" : Lower(mode) == "ipv6";
    const std::string endpoint = Setting("AWS_EC2_METADATA_SERVICE_ENDPOINT", "ec2_metadata_service_endpoint");
    e.base = !endpoint.empty() ? endpoint : ipv6 ? kImdsIpv6Base : kImdsIpv4Base;  // an endpoint wins over the mode
    const std::string timeout = Setting("AWS_METADATA_SERVICE_TIMEOUT", "metadata_service_timeout");
    if (!timeout.empty()) {
      char* end = nullptr;
      const double seconds = std::strtod(timeout.c_str(), &end);
      if (end == timeout.c_str() || *end != '\0' || !(seconds > 0 && seconds <= kMaxImdsTimeoutSeconds))
        return Status::InvalidArgument("instance metadata timeout '" + timeout +
                                       "' (AWS_METADATA_SERVICE_TIMEOUT / metadata_service_timeout) must be seconds, "
                                       "more than 0 and at most " +
                                       std::to_string(kMaxImdsTimeoutSeconds));
      e.timeout = std::chrono::milliseconds(static_cast<long>(seconds * 1000));
    }
    const std::string attempts = Setting("AWS_METADATA_SERVICE_NUM_ATTEMPTS", "metadata_service_num_attempts");
    if (!attempts.empty()) {
      char* end = nullptr;
      const long n = std::strtol(attempts.c_str(), &end, 10);
      if (end == attempts.c_str() || *end != '\0' || n < 1 || n > kMaxImdsAttempts)
        return Status::InvalidArgument("instance metadata attempts '" + attempts +
                                       "' (AWS_METADATA_SERVICE_NUM_ATTEMPTS / metadata_service_num_attempts) must be "
                                       "a whole number from 1 to " +
                                       std::to_string(kMaxImdsAttempts));
      e.attempts = static_cast<unsigned>(n);
    }
    e.v1_disabled = Lower(Setting("AWS_EC2_METADATA_V1_DISABLED", "ec2_metadata_v1_disabled")) == "true";
    return Make("instance metadata (IMDS) " + e.base, [e] { return FetchImdsCredentials(e); });
  }

  // role_arn + source_profile / credential_source of profile `name`.
  Result<ProviderPtr> AssumeRoleFor(const std::string& name, int depth, std::set<std::string>* visited) const {
    if (depth >= kMaxRoleChain)
      return Status::InvalidArgument("profile '" + name + "': role chain longer than " + std::to_string(kMaxRoleChain));
    Section p = Profile(name);
    std::string source_profile = Get(p, "source_profile");
    std::string credential_source = Get(p, "credential_source");
    if (!source_profile.empty() && !credential_source.empty())
      return Status::InvalidArgument("profile '" + name + "' sets both source_profile and credential_source");
    if (!Get(p, "mfa_serial").empty())
      return Status::NotSupported("profile '" + name + "' needs an MFA code (mfa_serial): not supported");
    ProviderPtr source;
    if (!credential_source.empty()) {
      if (credential_source == "Environment") {
        source = Environment();
      } else if (credential_source == "Ec2InstanceMetadata") {
        VF_ASSIGN_OR_RETURN(source, Imds());
      } else if (credential_source == "EcsContainer") {
        VF_ASSIGN_OR_RETURN(source, Container());
      } else {
        return Status::InvalidArgument("profile '" + name + "': credential_source '" + credential_source +
                                       "' must be Environment, Ec2InstanceMetadata or EcsContainer");
      }
      if (!source)
        return Status::InvalidArgument("profile '" + name + "': credential_source " + credential_source +
                                       " has no credentials");
    } else {
      VF_ASSIGN_OR_RETURN(source, SourceProfile(name, source_profile, depth, visited));
    }
    AssumeRoleParams params{Get(p, "role_arn"), SessionName(Get(p, "role_session_name")), Get(p, "external_id"), 0};
    std::string duration = Get(p, "duration_seconds");
    if (!duration.empty()) {
      char* end = nullptr;
      unsigned long seconds = std::strtoul(duration.c_str(), &end, 10);
      if (*end != '\0' || seconds < 900 || seconds > 43200)
        return Status::InvalidArgument("profile '" + name + "': duration_seconds '" + duration +
                                       "' must be 900 .. 43200");
      params.duration_seconds = static_cast<unsigned>(seconds);
    }
    StsEndpoint sts = Sts(p);
    std::string what = "role " + params.role_arn + " (profile '" + name + "', from " + source->source() + ")";
    return Make(what, [sts, params, source] {
      Result<Credentials> keys = source->Get();
      if (!keys.ok()) return Result<TimedCredentials>(keys.status());
      return AssumeRole(sts, *keys, params);
    });
  }

  // The keys a source_profile stands for.
  Result<ProviderPtr> SourceProfile(const std::string& from, const std::string& name, int depth,
                                    std::set<std::string>* visited) const {
    if (!Exists(name))
      return Status::InvalidArgument("profile '" + from + "': source_profile '" + name + "' does not exist");
    Section s = Profile(name);
    // A profile naming itself uses its own static keys (botocore allows it).
    if (name != from && !Get(s, "role_arn").empty() &&
        (!Get(s, "source_profile").empty() || !Get(s, "credential_source").empty())) {
      if (!visited->insert(name).second)
        return Status::InvalidArgument("profile '" + from + "': source_profile loop through '" + name + "'");
      return AssumeRoleFor(name, depth + 1, visited);
    }
    if (ProviderPtr keys = KeysOf(s, name, in_.credentials_path + " / " + in_.config_path)) return keys;
    if (name != from) {
      if (ProviderPtr web = WebIdentity(name, s, /*use_env=*/false)) return web;
      if (ProviderPtr process = Process(name, s)) return process;
      VF_ASSIGN_OR_RETURN(ProviderPtr sso, Sso(name, s));
      if (sso) return sso;
    }
    return Status::InvalidArgument("profile '" + from + "': source_profile '" + name + "' has no credentials");
  }

  const ChainInputs& in_;
};

}  // namespace

Result<std::shared_ptr<CredentialProvider>> ResolveCredentialChain(const ChainInputs& inputs) {
  return Chain(inputs).Resolve();
}

}  // namespace vramflow::s3
