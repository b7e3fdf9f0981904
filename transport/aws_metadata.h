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
//              PUT is refused with 403/404/405. Endpoint
//              AWS_EC2_METADATA_SERVICE_ENDPOINT, default http://169.254.169.254.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "transport/aws_credentials.h"
#include "transport/aws_http.h"

namespace vramflow::s3 {

struct ContainerEndpoint {
  std::string url;              // full URL to GET
  std::string token;            // AWS_CONTAINER_AUTHORIZATION_TOKEN
  std::string token_file;       // AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (wins)
  TlsTrust trust;               // for an https FULL_URI
  std::chrono::milliseconds timeout{2000};
};

// Checks a FULL_URI as botocore does: https, or http to a loopback IP,
// "localhost", 169.254.170.2, 169.254.170.23 or [fd00:ec2::23].
Status CheckContainerFullUri(const std::string& url);

Result<TimedCredentials> FetchContainerCredentials(const ContainerEndpoint& endpoint);

struct ImdsEndpoint {
  std::string base = "http://169.254.169.254";
  std::chrono::milliseconds timeout{1000};
};

Result<TimedCredentials> FetchImdsCredentials(const ImdsEndpoint& endpoint);

}  // namespace vramflow::s3
