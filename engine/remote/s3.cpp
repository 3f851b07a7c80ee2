#include "engine/remote/s3.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

namespace lathe::remote {

namespace fs = std::filesystem;

namespace {

std::mutex g_options_mutex;
TransferOptions g_options;

void init_curl() {
    static const bool ok = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
    if (!ok) throw Error("libcurl could not be initialised");
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string trim(const std::string& s) {
    const auto a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return {};
    const auto b = s.find_last_not_of(" \t\r\n");
    return s.substr(a, b - a + 1);
}

// The key = value pairs of section `section` of an INI file (the AWS credentials and config files).
std::map<std::string, std::string> ini_section(const std::string& path,
                                               const std::string& section) {
    std::map<std::string, std::string> out;
    std::ifstream in(path);
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
        line = trim(line);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line.front() == '[' && line.back() == ']') {
            inside = trim(line.substr(1, line.size() - 2)) == section;
            continue;
        }
        if (!inside) continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        out[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
    }
    return out;
}

std::string home_file(const char* override_var, const char* relative) {
    if (auto v = env(override_var); !v.empty()) return v;
    const std::string home = env("HOME");
    return home.empty() ? std::string() : home + "/" + relative;
}

// RFC 3986 percent-encoding; '/' kept where `keep_slash` (object keys).
std::string encode(const std::string& s, bool keep_slash) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
            (keep_slash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string xml_unescape(std::string s) {
    static const std::pair<const char*, const char*> entities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
    for (const auto& [from, to] : entities) {
        std::size_t pos = 0;
        const std::string f = from;
        while ((pos = s.find(f, pos)) != std::string::npos) {
            s.replace(pos, f.size(), to);
            pos += std::char_traits<char>::length(to);
        }
    }
    return s;
}

// Every <tag>...</tag> in `xml`, in order (S3's answers are flat enough for this).
std::vector<std::string> xml_all(const std::string& xml, const std::string& tag) {
    std::vector<std::string> out;
    const std::string open = "<" + tag + ">", close = "</" + tag + ">";
    std::size_t pos = 0;
    while ((pos = xml.find(open, pos)) != std::string::npos) {
        const auto start = pos + open.size();
        const auto end = xml.find(close, start);
        if (end == std::string::npos) break;
        out.push_back(xml.substr(start, end - start));
        pos = end + close.size();
    }
    return out;
}
std::string xml_first(const std::string& xml, const std::string& tag) {
    auto all = xml_all(xml, tag);
    return all.empty() ? std::string() : xml_unescape(all.front());
}

struct Body {
    // Upload: from memory or from a range of a file.
    const char* data = nullptr;
    int fd = -1;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t sent = 0;
};

size_t read_body(char* buf, size_t size, size_t n, void* p) {
    auto* b = static_cast<Body*>(p);
    const uint64_t want = std::min<uint64_t>(size * n, b->size - b->sent);
    if (want == 0) return 0;
    if (b->data) {
        std::memcpy(buf, b->data + b->sent, want);
    } else {
        const ssize_t got = ::pread(b->fd, buf, want, static_cast<off_t>(b->offset + b->sent));
        if (got <= 0) return CURL_READFUNC_ABORT;
        b->sent += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
    }
    b->sent += want;
    return want;
}

struct Sink {
    std::string* text = nullptr;  // into memory, or
    int fd = -1;                  // into a file at `offset`
    uint64_t offset = 0;
    uint64_t written = 0;
    bool failed = false;
    long* status = nullptr;
};

size_t write_sink(char* ptr, size_t size, size_t n, void* p) {
    auto* s = static_cast<Sink*>(p);
    const size_t bytes = size * n;
    // An error answer's body goes to memory even when the data would go to a file.
    if (s->fd >= 0 && s->status && *s->status >= 200 && *s->status < 300) {
        size_t done = 0;
        while (done < bytes) {
            const ssize_t w = ::pwrite(s->fd, ptr + done, bytes - done,
                                       static_cast<off_t>(s->offset + s->written + done));
            if (w <= 0) {
                s->failed = true;
                return 0;
            }
            done += static_cast<size_t>(w);
        }
        s->written += bytes;
        return bytes;
    }
    if (s->text) s->text->append(ptr, bytes);
    return bytes;
}

struct HeaderSink {
    std::map<std::string, std::string> headers;
    long status = 0;
};

size_t header_sink(char* ptr, size_t size, size_t n, void* p) {
    auto* h = static_cast<HeaderSink*>(p);
    const std::string line(ptr, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
        h->headers.clear();  // a new answer (after a 100 Continue, or a redirect)
        const auto sp = line.find(' ');
        if (sp != std::string::npos) h->status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
        return size * n;
    }
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        h->headers[name] = trim(line.substr(colon + 1));
    }
    return size * n;
}

bool retryable(CURLcode c) {
    switch (c) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return true;
        default:
            return false;
    }
}

bool retryable_status(long status, const std::string& code) {
    return status >= 500 || status == 429 || code == "RequestTimeout" || code == "SlowDown";
}

std::string redact_url(std::string url) {
    // Presigned URLs carry a signature in their query: never in a message.
    const auto q = url.find("X-Amz-Signature");
    if (q != std::string::npos) url = url.substr(0, url.find('?')) + "?<signed>";
    return url;
}

}  // namespace

void set_transfer_options(const TransferOptions& o) {
    std::lock_guard<std::mutex> lock(g_options_mutex);
    g_options = o;
}
TransferOptions transfer_options() {
    std::lock_guard<std::mutex> lock(g_options_mutex);
    return g_options;
}

S3Settings s3_settings_from_environment() {
    S3Settings s;
    const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
    const std::string cred_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    const std::string config_file = home_file("AWS_CONFIG_FILE", ".aws/config");
    const auto config =
        ini_section(config_file, profile == "default" ? "default" : "profile " + profile);
    if (!env("AWS_ACCESS_KEY_ID").empty()) {
        s.access_key = env("AWS_ACCESS_KEY_ID");
        s.secret_key = env("AWS_SECRET_ACCESS_KEY");
        s.session_token = env("AWS_SESSION_TOKEN");
        s.source = "AWS_ACCESS_KEY_ID";
        if (s.secret_key.empty())
            throw Error("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    } else {
        auto creds = ini_section(cred_file, profile);
        if (creds.empty()) creds = config;  // keys may also sit in the config file
        s.access_key = creds["aws_access_key_id"];
        s.secret_key = creds["aws_secret_access_key"];
        s.session_token = creds["aws_session_token"];
        s.source = "profile '" + profile + "' of " + cred_file;
    }
    if (auto r = env("AWS_REGION"); !r.empty()) {
        s.region = r;
    } else if (auto d = env("AWS_DEFAULT_REGION"); !d.empty()) {
        s.region = d;
    } else if (auto it = config.find("region"); it != config.end() && !it->second.empty()) {
        s.region = it->second;
    }
    if (auto e = env("AWS_ENDPOINT_URL_S3"); !e.empty()) {
        s.endpoint = e;
    } else if (auto e2 = env("AWS_ENDPOINT_URL"); !e2.empty()) {
        s.endpoint = e2;
    } else if (auto it = config.find("endpoint_url"); it != config.end()) {
        s.endpoint = it->second;
    }
    while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
    const std::string style = env("AWS_S3_ADDRESSING_STYLE");
    s.path_style = style == "path" || (style != "virtual" && !s.endpoint.empty());
    if (s.endpoint.empty()) s.endpoint = "https://s3." + s.region + ".amazonaws.com";
    return s;
}

std::pair<std::string, std::string> split_s3_url(const std::string& url) {
    if (url.rfind("s3://", 0) != 0) throw Error(url + ": not an s3:// URL");
    const std::string rest = url.substr(5);
    const auto slash = rest.find('/');
    std::string bucket = rest.substr(0, slash);
    std::string key = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
    if (bucket.empty()) throw Error(url + ": no bucket (s3://bucket/prefix)");
    while (!key.empty() && key.back() == '/') key.pop_back();
    return {bucket, key};
}

// ---- requests -----------------------------------------------------------------------------------

namespace detail {

// S3's requests and plain HTTP's: whether one is signed is the settings passed to
// perform_request.
struct Request {
    std::string method = "GET";
    std::string url;
    std::string what;  // "PUT s3://b/k", for messages
    std::vector<std::string> headers;
    Body body;
    bool has_body = false;
    // Download into a file (fd, offset); else into Response::body.
    int sink_fd = -1;
    uint64_t sink_offset = 0;
    bool missing_ok = false;  // a 404 is an answer, not an error (HEAD)
};

struct Response {
    long status = 0;
    uint64_t written = 0;  ///< bytes written to a file sink
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
};

}  // namespace detail

using detail::Request;
using detail::Response;

namespace {

// One request with retries. `sign` signs with the settings' keys through CURLOPT_AWS_SIGV4.
Response perform_request(Request& r, const TransferOptions& o, const S3Settings* sign) {
    init_curl();
    std::string last_error;
    for (int attempt = 0;; ++attempt) {
        Response resp;
        CURL* c = curl_easy_init();
        if (!c) throw Error(r.what + ": libcurl could not start a request");
        curl_slist* hdrs = nullptr;
        for (const auto& h : r.headers) hdrs = curl_slist_append(hdrs, h.c_str());
        std::string userpwd, sigv4;
        if (sign) {
            // The body is not hashed into the signature (it may be gigabytes); S3 accepts that.
            hdrs = curl_slist_append(hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
            if (!sign->session_token.empty())
                hdrs = curl_slist_append(hdrs,
                                         ("x-amz-security-token: " + sign->session_token).c_str());
            sigv4 = "aws:amz:" + sign->region + ":s3";
            userpwd = sign->access_key + ":" + sign->secret_key;
            curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
            curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
        }
        // (No "Expect:" to suppress 100-continue: libcurl 7.88 would sign the empty header it
        // then does not send.)
        curl_easy_setopt(c, CURLOPT_URL, r.url.c_str());
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, sign ? 0L : 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(o.connect_timeout_s * 1000));
        // A transfer that moves less than a byte a second for stall_timeout_s is cut.
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max(1L, std::lround(o.stall_timeout_s)));
        Body body = r.body;
        body.sent = 0;
        if (r.method == "HEAD") {
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        } else if (r.method == "PUT") {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
            curl_easy_setopt(c, CURLOPT_READDATA, &body);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size));
        } else if (r.method == "POST") {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
            curl_easy_setopt(c, CURLOPT_READDATA, &body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size));
        } else if (r.method != "GET") {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
        }
        HeaderSink hs;
        Sink sink;
        sink.text = &resp.body;
        sink.fd = r.sink_fd;
        sink.offset = r.sink_offset;
        sink.status = &hs.status;
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_sink);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &hs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_sink);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
        char errbuf[CURL_ERROR_SIZE] = {0};
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        const CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (sink.failed) throw Error(r.what + ": cannot write the downloaded data to a local file");
        bool again = false;
        if (rc != CURLE_OK) {
            last_error = std::string(errbuf[0] ? errbuf : curl_easy_strerror(rc));
            if (rc == CURLE_OPERATION_TIMEDOUT)
                last_error += " (no progress for " + std::to_string(o.stall_timeout_s) + " s)";
            if (!retryable(rc)) throw Error(r.what + " (" + redact_url(r.url) + "): " + last_error);
            again = true;
        } else {
            resp.status = status;
            resp.headers = hs.headers;
            resp.written = sink.written;
            if (status >= 200 && status < 300) return resp;
            if (status == 404 && r.missing_ok) return resp;
            const std::string code = xml_first(resp.body, "Code");
            const std::string message = xml_first(resp.body, "Message");
            last_error = "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
                         (message.empty() ? "" : ": " + message);
            if (!retryable_status(status, code) || attempt >= o.max_retries) {
                std::string hint;
                if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
                    code == "AccessDenied" || status == 403)
                    hint = sign
                               ? " (check the credentials from " + sign->source + " and AWS_REGION)"
                               : "";
                if (code == "NoSuchBucket") hint = " (the bucket does not exist)";
                throw HttpError(
                    r.what + ": " + last_error + hint +
                        (attempt ? " after " + std::to_string(attempt) + " retries" : ""),
                    status, code);
            }
            again = true;
        }
        if (again && attempt >= o.max_retries) {
            throw Error(r.what + " (" + redact_url(r.url) + "): " + last_error + " after " +
                        std::to_string(attempt) + " retries");
        }
        const double delay = std::min(30.0, o.retry_delay_s * std::pow(2.0, attempt));
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    }
}

// Runs `n` jobs on up to `parallel` threads; the first error is rethrown after all stop.
void run_parallel(int n, int parallel, const std::function<void(int)>& job) {
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex m;
    auto worker = [&] {
        for (int i; !failed && (i = next++) < n;) {
            try {
                job(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(m);
                if (!error) error = std::current_exception();
                failed = true;
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < std::min(n, parallel); ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
}

struct Fd {
    int fd;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

S3Client::S3Client(S3Settings settings, TransferOptions options)
    : s_(std::move(settings)), o_(options) {
    if (s_.access_key.empty() || s_.secret_key.empty())
        throw Error(
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
            "with a profile in ~/.aws/credentials (" +
            s_.source + " has none)");
}

std::string S3Client::describe(const std::string& bucket, const std::string& key) {
    return "s3://" + bucket + "/" + key;
}

std::string S3Client::url(const std::string& bucket, const std::string& key,
                          const std::string& query) const {
    std::string u;
    if (s_.path_style) {
        u = s_.endpoint + "/" + bucket + "/" + encode(key, true);
    } else {
        const auto scheme_end = s_.endpoint.find("://");
        u = s_.endpoint.substr(0, scheme_end + 3) + bucket + "." +
            s_.endpoint.substr(scheme_end + 3) + "/" + encode(key, true);
    }
    return query.empty() ? u : u + "?" + query;
}

namespace {

// `local` written through `fill(fd, temporary path)` into local + ".download", synced, then
// renamed over `local`: a download cut short never leaves a file under the final name.
void download_into(const std::string& local,
                   const std::function<void(int fd, const std::string& tmp)>& fill) {
    const std::string tmp = local + ".download";
    {
        Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (f.fd < 0) throw Error(tmp + ": cannot create: " + std::strerror(errno));
        fill(f.fd, tmp);
        if (::fsync(f.fd) != 0) throw Error(tmp + ": cannot sync: " + std::strerror(errno));
    }
    std::error_code ec;
    fs::rename(tmp, local, ec);
    if (ec) throw Error("cannot rename " + tmp + " to " + local + ": " + ec.message());
}

}  // namespace

Response S3Client::perform(Request& r) const {
    return perform_request(r, o_, &s_);
}

std::string S3Client::get(const std::string& bucket, const std::string& key,
                          std::optional<std::pair<uint64_t, uint64_t>> range) const {
    Request r;
    r.url = url(bucket, key);
    r.what = "GET " + describe(bucket, key);
    if (range)
        r.headers.push_back("Range: bytes=" + std::to_string(range->first) + "-" +
                            std::to_string(range->second));
    return perform(r).body;
}

std::optional<uint64_t> S3Client::head(const std::string& bucket, const std::string& key) const {
    Request r;
    r.method = "HEAD";
    r.url = url(bucket, key);
    r.what = "HEAD " + describe(bucket, key);
    r.missing_ok = true;
    const auto resp = perform(r);
    if (resp.status == 404) return std::nullopt;
    const auto it = resp.headers.find("content-length");
    return it == resp.headers.end() ? 0 : std::stoull(it->second);
}

void S3Client::get_to_file(const std::string& bucket, const std::string& key,
                           const std::string& local) const {
    const auto size = head(bucket, key);
    if (!size)
        throw HttpError("GET " + describe(bucket, key) + ": no such object", 404, "NoSuchKey");
    download_into(local, [&](int fd, const std::string& tmp) {
        if (::ftruncate(fd, static_cast<off_t>(*size)) != 0)
            throw Error(tmp + ": cannot size to " + std::to_string(*size) +
                        " bytes: " + std::strerror(errno));
        const uint64_t part = std::max<uint64_t>(o_.part_size, 1);
        const int n = static_cast<int>(std::max<uint64_t>(1, (*size + part - 1) / part));
        run_parallel(n, o_.parallel, [&](int i) {
            Request r;
            r.url = url(bucket, key);
            r.what = "GET " + describe(bucket, key);
            const uint64_t first = static_cast<uint64_t>(i) * part;
            if (*size > 0) {
                const uint64_t last = std::min(*size, first + part) - 1;
                r.headers.push_back("Range: bytes=" + std::to_string(first) + "-" +
                                    std::to_string(last));
            }
            r.sink_fd = fd;
            r.sink_offset = first;
            const uint64_t want = *size > 0 ? std::min(*size, first + part) - first : 0;
            const auto resp = perform(r);
            if (resp.written != want)
                throw Error(r.what + ": " + std::to_string(resp.written) +
                            " bytes came for a range of " + std::to_string(want) +
                            " (the object changed while it was read?)");
        });
    });
}

void S3Client::put(const std::string& bucket, const std::string& key,
                   const std::string& data) const {
    Request r;
    r.method = "PUT";
    r.url = url(bucket, key);
    r.what = "PUT " + describe(bucket, key);
    r.has_body = true;
    r.body.data = data.data();
    r.body.size = data.size();
    perform(r);
}

void S3Client::put_file(const std::string& bucket, const std::string& key,
                        const std::string& local) const {
    Fd f(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
    if (f.fd < 0) throw Error(local + ": cannot open: " + std::strerror(errno));
    std::error_code ec;
    const uint64_t size = fs::file_size(local, ec);
    if (ec) throw Error(local + ": " + ec.message());
    const uint64_t part = std::max<uint64_t>(o_.part_size, 5ull << 20);
    if (size <= part) {
        Request r;
        r.method = "PUT";
        r.url = url(bucket, key);
        r.what = "PUT " + describe(bucket, key);
        r.has_body = true;
        r.body.fd = f.fd;
        r.body.size = size;
        perform(r);
        return;
    }
    // Multipart: create, parts in parallel, complete; abort on any failure.
    Request create;
    create.method = "POST";
    create.url = url(bucket, key, "uploads=");
    create.what = "POST " + describe(bucket, key) + " (start a multipart upload)";
    create.has_body = true;
    const std::string upload_id = xml_first(perform(create).body, "UploadId");
    if (upload_id.empty()) throw Error(create.what + ": the answer has no UploadId");
    const int n = static_cast<int>((size + part - 1) / part);
    std::vector<std::string> etags(static_cast<std::size_t>(n));
    try {
        run_parallel(n, o_.parallel, [&](int i) {
            Request r;
            r.method = "PUT";
            r.url = url(
                bucket, key,
                "partNumber=" + std::to_string(i + 1) + "&uploadId=" + encode(upload_id, false));
            r.what = "PUT " + describe(bucket, key) + " (part " + std::to_string(i + 1) + " of " +
                     std::to_string(n) + ")";
            r.has_body = true;
            r.body.fd = f.fd;
            r.body.offset = static_cast<uint64_t>(i) * part;
            r.body.size = std::min(part, size - r.body.offset);
            const auto resp = perform(r);
            const auto it = resp.headers.find("etag");
            if (it == resp.headers.end()) throw Error(r.what + ": the answer has no ETag");
            etags[static_cast<std::size_t>(i)] = it->second;
        });
        std::string xml = "<CompleteMultipartUpload>";
        for (int i = 0; i < n; ++i)
            xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
                   etags[static_cast<std::size_t>(i)] + "</ETag></Part>";
        xml += "</CompleteMultipartUpload>";
        Request done;
        done.method = "POST";
        done.url = url(bucket, key, "uploadId=" + encode(upload_id, false));
        done.what = "POST " + describe(bucket, key) + " (complete a multipart upload)";
        done.has_body = true;
        done.body.data = xml.data();
        done.body.size = xml.size();
        done.headers.emplace_back("Content-Type: application/xml");
        const auto resp = perform(done);
        // CompleteMultipartUpload can fail after a 200: the error is in the body.
        if (resp.body.find("<Error>") != std::string::npos)
            throw HttpError(done.what + ": " + xml_first(resp.body, "Code") + ": " +
                                xml_first(resp.body, "Message"),
                            resp.status, xml_first(resp.body, "Code"));
    } catch (...) {
        try {
            Request abort;
            abort.method = "DELETE";
            abort.url = url(bucket, key, "uploadId=" + encode(upload_id, false));
            abort.what = "DELETE " + describe(bucket, key) + " (abort a multipart upload)";
            TransferOptions once = o_;
            once.max_retries = 1;
            perform_request(abort, once, &s_);
        } catch (const std::exception&) {
            // The server may be gone; its lifecycle rules clean up abandoned parts.
        }
        throw;
    }
}

Listing S3Client::list(const std::string& bucket, const std::string& prefix,
                       const std::string& delimiter) const {
    Listing out;
    std::string token;
    for (;;) {
        // Query parameters in sorted order, as SigV4's canonical request has them.
        std::string q;
        if (!token.empty()) q += "continuation-token=" + encode(token, false) + "&";
        if (!delimiter.empty()) q += "delimiter=" + encode(delimiter, false) + "&";
        q += "list-type=2&prefix=" + encode(prefix, false);
        Request r;
        r.url = url(bucket, "", q);
        r.what = "LIST " + describe(bucket, prefix);
        const auto body = perform(r).body;
        for (const auto& c : xml_all(body, "Contents"))
            out.objects.push_back(
                {xml_first(c, "Key"), std::strtoull(xml_first(c, "Size").c_str(), nullptr, 10)});
        for (const auto& p : xml_all(body, "CommonPrefixes"))
            out.prefixes.push_back(xml_first(p, "Prefix"));
        if (xml_first(body, "IsTruncated") != "true") break;
        token = xml_first(body, "NextContinuationToken");
        if (token.empty()) break;
    }
    return out;
}

void S3Client::remove(const std::string& bucket, const std::string& key) const {
    Request r;
    r.method = "DELETE";
    r.url = url(bucket, key);
    r.what = "DELETE " + describe(bucket, key);
    r.missing_ok = true;
    perform(r);
}

void S3Client::copy(const std::string& bucket, const std::string& from,
                    const std::string& to) const {
    Request r;
    r.method = "PUT";
    r.url = url(bucket, to);
    r.what = "COPY " + describe(bucket, from) + " to " + describe(bucket, to);
    r.headers.push_back("x-amz-copy-source: /" + bucket + "/" + encode(from, true));
    r.has_body = true;
    const auto resp = perform(r);
    if (resp.body.find("<Error>") != std::string::npos)
        throw HttpError(r.what + ": " + xml_first(resp.body, "Code"), resp.status,
                        xml_first(resp.body, "Code"));
}

void S3Client::create_bucket(const std::string& bucket) const {
    Request r;
    r.method = "PUT";
    r.url = url(bucket, "");
    r.what = "CREATE BUCKET s3://" + bucket;
    r.has_body = true;
    perform(r);
}

// ---- plain HTTP ---------------------------------------------------------------------------------

HttpClient::HttpClient(TransferOptions options) : o_(options) {}

std::string HttpClient::get(const std::string& url) const {
    Request r;
    r.url = url;
    r.what = "GET " + redact_url(url);
    return perform_request(r, o_, nullptr).body;
}

std::optional<uint64_t> HttpClient::head(const std::string& url) const {
    Request r;
    r.method = "HEAD";
    r.url = url;
    r.what = "HEAD " + redact_url(url);
    r.missing_ok = true;
    const auto resp = perform_request(r, o_, nullptr);
    if (resp.status == 404) return std::nullopt;
    const auto it = resp.headers.find("content-length");
    return it == resp.headers.end() ? 0 : std::stoull(it->second);
}

void HttpClient::get_to_file(const std::string& url, const std::string& local) const {
    download_into(local, [&](int fd, const std::string&) {
        Request r;
        r.url = url;
        r.what = "GET " + redact_url(url);
        r.sink_fd = fd;
        perform_request(r, o_, nullptr);
    });
}

}  // namespace lathe::remote
