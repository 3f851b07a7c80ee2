// Object storage over HTTP with libcurl: an S3 client (any S3-compatible server: AWS, R2, MinIO,
// GCS's interoperability API) signed by libcurl's own CURLOPT_AWS_SIGV4, and plain HTTP(S) GETs.
// Torch-free and Qt-free. Every failure is a lathe::Error naming the URL and the cause; requests
// that failed with a 5xx answer, a timeout, a stall or a reset are retried with exponential backoff.
#pragma once

#include "engine/util/error.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lathe::remote {

/// How transfers retry and split (config: trainer.remote).
struct TransferOptions {
    int max_retries = 5;
    double retry_delay_s = 0.5;  ///< doubled for each further retry, at most 30 s
    double stall_timeout_s = 60;
    uint64_t part_size = 64ull << 20;
    int parallel = 4;
    double connect_timeout_s = 10;
};
/// The process-wide options every remote storage uses (the trainer sets them from its config).
void set_transfer_options(const TransferOptions& o);
TransferOptions transfer_options();

/// Credentials and endpoint, as the AWS tools find them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
/// AWS_SESSION_TOKEN, else the profile AWS_PROFILE (default "default") of ~/.aws/credentials
/// (AWS_SHARED_CREDENTIALS_FILE); AWS_REGION or AWS_DEFAULT_REGION, else the profile's region in
/// ~/.aws/config (AWS_CONFIG_FILE), else us-east-1; AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else
/// the profile's endpoint_url, else AWS. Path-style addressing with a custom endpoint (or
/// AWS_S3_ADDRESSING_STYLE=path), virtual-hosted on AWS.
struct S3Settings {
    std::string access_key;
    std::string secret_key;
    std::string session_token;
    std::string region = "us-east-1";
    std::string endpoint;  ///< scheme://host[:port], no trailing slash
    bool path_style = true;
    std::string source;  ///< where the credentials came from, for messages (never the secret)
};
S3Settings s3_settings_from_environment();

/// An HTTP answer other than the one expected (after retries).
class HttpError : public Error {
public:
    HttpError(const std::string& what, long status, std::string code)
        : Error(what), status_(status), code_(std::move(code)) {}
    long status() const { return status_; }
    /// S3's error code (NoSuchKey, NoSuchBucket, InvalidAccessKeyId ...), if the answer had one.
    const std::string& code() const { return code_; }

private:
    long status_;
    std::string code_;
};

struct ObjectInfo {
    std::string key;
    uint64_t size = 0;
};
struct Listing {
    std::vector<ObjectInfo> objects;
    std::vector<std::string> prefixes;  ///< with a delimiter: the "folders", each ending in it
};

namespace detail {
/// One HTTP exchange (s3.cpp): what is sent, with retries, and what came back.
struct Request;
struct Response;
}  // namespace detail

class S3Client {
public:
    explicit S3Client(S3Settings settings, TransferOptions options = transfer_options());

    /// The object's bytes; `range` as [first, last] inclusive.
    std::string get(const std::string& bucket, const std::string& key,
                    std::optional<std::pair<uint64_t, uint64_t>> range = std::nullopt) const;
    /// Downloads to a local file: ranged GETs in parallel when larger than one part.
    void get_to_file(const std::string& bucket, const std::string& key,
                     const std::string& local) const;
    /// Size of the object; nullopt when it does not exist.
    std::optional<uint64_t> head(const std::string& bucket, const std::string& key) const;
    void put(const std::string& bucket, const std::string& key, const std::string& data) const;
    /// Uploads a local file: one PUT, or a multipart upload with parts in parallel when larger
    /// than one part (aborted on failure, so no parts are left behind).
    void put_file(const std::string& bucket, const std::string& key,
                  const std::string& local) const;
    /// Every object under `prefix`; with `delimiter`, the common prefixes instead of what is
    /// below them. Follows continuation tokens.
    Listing list(const std::string& bucket, const std::string& prefix,
                 const std::string& delimiter = {}) const;
    void remove(const std::string& bucket, const std::string& key) const;
    /// Server-side copy within the bucket.
    void copy(const std::string& bucket, const std::string& from, const std::string& to) const;
    void create_bucket(const std::string& bucket) const;

    /// "s3://bucket/key" for messages.
    static std::string describe(const std::string& bucket, const std::string& key);

private:
    std::string url(const std::string& bucket, const std::string& key,
                    const std::string& query = {}) const;
    detail::Response perform(detail::Request& r) const;

    S3Settings s_;
    TransferOptions o_;
};

/// Plain HTTP(S), read only (http.server, a CDN, a presigned bucket).
class HttpClient {
public:
    explicit HttpClient(TransferOptions options = transfer_options());
    std::string get(const std::string& url) const;
    std::optional<uint64_t> head(const std::string& url) const;
    void get_to_file(const std::string& url, const std::string& local) const;

private:
    TransferOptions o_;
};

/// s3://bucket/key split; throws lathe::Error for anything else.
std::pair<std::string, std::string> split_s3_url(const std::string& url);

}  // namespace lathe::remote
