// SPDX-License-Identifier: MIT
// The s3:// sink: a stream of unknown length uploaded as one S3 object.
//
// Write() fills a part buffer; each full part is uploaded on its own thread
// (UploadPart with Content-MD5) while the next one fills, so up to
// Concurrency() parts travel at once. Part sizes grow with the part number
// (s3_part_plan.h), and a part buffer is only allocated when the parts in
// flight leave room for it in S3Options::memory_budget (one part is always
// allowed). Commit() uploads the last part and sends
// CompleteMultipartUpload; a stream that fits in the first part goes up as
// one PUT instead. On any failure, and when the sink is destroyed without a
// successful Commit(), the multipart upload is aborted: no object, and no
// part of one, is left behind. Not thread-safe (one writer), as ByteSink.
//
// Unless S3Options::overwrite, OpenS3Sink() first sends HEAD and refuses a
// key that already holds an object (kAlreadyExists), as a file sink refuses
// an existing file. The check and the upload are not atomic: a writer that
// creates the object in between is overwritten.
#pragma once

#include <memory>
#include <string>

#include "transport/core/byte_stream.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_options.h"

namespace vramflow {

Result<std::unique_ptr<ByteSink>> OpenS3Sink(const std::string& bucket, const std::string& key,
                                             const S3Options& options);
// With an existing client (tests, or many objects in one bucket); no
// check for an existing object.
std::unique_ptr<ByteSink> NewS3Sink(std::shared_ptr<s3::Client> client, const std::string& key,
                                    const S3Options& options);

}  // namespace vramflow
