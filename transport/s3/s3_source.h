// SPDX-License-Identifier: MIT
// The s3:// source: an S3 object read as a stream, and at random offsets.
//
// Opening sends HEAD for the size and ETag. The stream source then keeps a
// few ranged GETs in flight ahead of the reader (range_reader.h: each
// range_size bytes, or half the memory_budget when that is less; no more
// fetched bytes held than the budget, no more than Concurrency() requests),
// and Read() hands their bytes out in order. Every GET carries If-Match with
// the ETag, so an object replaced mid-read fails instead of mixing two
// versions. Errors name the object and the byte range.
#pragma once

#include <memory>
#include <string>

#include "transport/core/byte_stream.h"
#include "transport/core/random_access.h"
#include "transport/s3/s3_client.h"
#include "transport/s3/s3_options.h"

namespace vramflow {

Result<std::unique_ptr<ByteSource>> OpenS3Source(const std::string& bucket, const std::string& key,
                                                 const S3Options& options);
Result<std::unique_ptr<RandomAccessSource>> OpenS3RandomAccess(const std::string& bucket, const std::string& key,
                                                               const S3Options& options);

// With an existing client (tests, or many objects in one bucket).
Result<std::unique_ptr<ByteSource>> NewS3Source(std::shared_ptr<s3::Client> client, const std::string& key,
                                                const S3Options& options);
// `concurrent_reads` is what its ConcurrentReads() says (the requests in
// flight its reader should keep: S3Options::concurrency).
Result<std::unique_ptr<RandomAccessSource>> NewS3RandomAccess(std::shared_ptr<s3::Client> client,
                                                              const std::string& key, unsigned concurrent_reads);

}  // namespace vramflow
