// SPDX-License-Identifier: MIT
// Credentials from the machine's metadata services, as botocore gets them:
//
//   container  ECS / EKS Pod Identity: GET AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
//              on http://169.254.170.2, or AWS_CONTAINER_CREDENTIALS_FULL_URI
//              (https anywhere; http only to a loopback address or to the
//              ECS/EKS link-local hosts), with "Authorization:" from
//              AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at each fetch) or
//              AWS_CONTAINER_AUTHORIZATION_TOKEN.
//   instance   EC2 IMDSv2: PUT /latest/api/token, then GET the role name and
//              its credentials with that token; IMDSv1 (no token) when the
//              PUT is refused with 403/404/405 or gets no reply (a container
//              behind a hop limit of 1), unless IMDSv1 is disabled. Each
//              request is tried `attempts` times. The chain
//              (credential_chain.h) takes the endpoint, its mode (IPv4:
//              http://169.254.169.254, IPv6: http://[fd00:ec2::254]), the
//              timeout, the attempts and IMDSv1's refusal from the variables
//              and profile keys botocore reads.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "transport/aws/credentials.h"
#include "transport/aws/http.h"

namespace vramflow::s3 {

struct ContainerEndpoint {
  std::string url;         // full URL to GET
  std::string token;       // AWS_CONTAINER_AUTHORIZATION_TOKEN
  std::string token_file;  // AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (wins)
  TlsTrust trust;          // for an https FULL_URI
  std::chrono::milliseconds timeout{2000};
};

// Checks a FULL_URI as botocore does: https, or http to a loopback IP,
// "localhost", 169.254.170.2, 169.254.170.23 or [fd00:ec2::23].
Status CheckContainerFullUri(const std::string& url);

Result<TimedCredentials> FetchContainerCredentials(const ContainerEndpoint& endpoint);

inline constexpr char kImdsIpv4Base[] = "http://169.254.169.254";
inline constexpr char kImdsIpv6Base[] = "http://[fd00:ec2::254]";

struct ImdsEndpoint {
  std::string base = kImdsIpv4Base;
  std::chrono::milliseconds timeout{1000};  // per request
  // Tries per request: a transport failure, or for the GETs any status but
  // 200 or an empty body, is tried again (botocore's
  // metadata_service_num_attempts).
  unsigned attempts = 1;
  bool v1_disabled = false;  // no token: an error, never a GET without one
};

Result<TimedCredentials> FetchImdsCredentials(const ImdsEndpoint& endpoint);

}  // namespace vramflow::s3
