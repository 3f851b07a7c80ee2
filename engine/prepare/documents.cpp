#include "engine/prepare/documents.h"
#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"

#include <zlib.h>
#include <zstd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace lathe::prepare {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

SourceFile describe(const fs::path& p) {
    SourceFile f;
    f.path = p.string();
    std::error_code ec;
    f.bytes = fs::file_size(p, ec);
    if (ec) throw Error(f.path + ": cannot read: " + ec.message());
    const auto t = fs::last_write_time(p, ec);
    if (!ec)
        f.mtime_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    std::string name = p.filename().string();
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ends_with(name, ".gz")) {
        f.compression = Compression::gzip;
        name.resize(name.size() - 3);
    } else if (ends_with(name, ".zst")) {
        f.compression = Compression::zstd;
        name.resize(name.size() - 4);
    }
    if (ends_with(name, ".jsonl") || ends_with(name, ".json")) f.format = SourceFormat::jsonl;
    FILE* probe = std::fopen(f.path.c_str(), "rb");
    if (!probe) throw Error(f.path + ": cannot open: " + std::strerror(errno));
    std::fclose(probe);
    return f;
}

class FileHandle {
public:
    explicit FileHandle(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
        if (!f_) throw Error(path + ": cannot open: " + std::strerror(errno));
    }
    ~FileHandle() { std::fclose(f_); }
    std::size_t read(char* out, std::size_t n) {
        const std::size_t got = std::fread(out, 1, n, f_);
        if (got < n && std::ferror(f_))
            throw Error(path_ + ": read error: " + std::strerror(errno));
        consumed_ += got;
        return got;
    }
    uint64_t consumed() const { return consumed_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    FILE* f_;
    uint64_t consumed_ = 0;
};

class PlainSource final : public ByteSource {
public:
    explicit PlainSource(const std::string& path) : file_(path) {}
    std::size_t read(char* out, std::size_t n) override { return file_.read(out, n); }
    uint64_t consumed() const override { return file_.consumed(); }

private:
    FileHandle file_;
};

constexpr std::size_t kChunk = 1 << 18;

// gzip, with concatenated members (as `cat a.gz b.gz` and pigz make).
class GzipSource final : public ByteSource {
public:
    explicit GzipSource(const std::string& path) : file_(path), in_(kChunk) {
        if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error(path + ": zlib cannot start");
    }
    ~GzipSource() override { inflateEnd(&z_); }
    std::size_t read(char* out, std::size_t n) override {
        z_.next_out = reinterpret_cast<Bytef*>(out);
        z_.avail_out = static_cast<uInt>(n);
        while (z_.avail_out == n) {
            if (z_.avail_in == 0) {
                const std::size_t got = file_.read(in_.data(), in_.size());
                if (got == 0) {
                    if (mid_member_)
                        throw Error(file_.path() + ": gzip data ends early (truncated file)");
                    break;
                }
                z_.next_in = reinterpret_cast<Bytef*>(in_.data());
                z_.avail_in = static_cast<uInt>(got);
            }
            mid_member_ = true;
            const int rc = inflate(&z_, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                mid_member_ = false;
                inflateReset(&z_);
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                throw Error(file_.path() + ": corrupt gzip data near compressed byte " +
                            std::to_string(file_.consumed() - z_.avail_in) + ": " +
                            (z_.msg ? z_.msg : "error " + std::to_string(rc)));
            }
        }
        return n - z_.avail_out;
    }
    uint64_t consumed() const override { return file_.consumed() - z_.avail_in; }

private:
    FileHandle file_;
    std::vector<char> in_;
    z_stream z_{};
    bool mid_member_ = false;
};

class ZstdSource final : public ByteSource {
public:
    explicit ZstdSource(const std::string& path)
        : file_(path), in_(ZSTD_DStreamInSize()), dctx_(ZSTD_createDCtx()) {
        if (!dctx_) throw Error(path + ": zstd cannot start");
    }
    ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }
    std::size_t read(char* out, std::size_t n) override {
        ZSTD_outBuffer ob{out, n, 0};
        while (ob.pos == 0) {
            if (ib_.pos == ib_.size) {
                const std::size_t got = file_.read(in_.data(), in_.size());
                if (got == 0) {
                    if (last_rc_ != 0)
                        throw Error(file_.path() + ": zstd data ends early (truncated file)");
                    break;
                }
                ib_ = {in_.data(), got, 0};
            }
            last_rc_ = ZSTD_decompressStream(dctx_, &ob, &ib_);
            if (ZSTD_isError(last_rc_))
                throw Error(file_.path() + ": corrupt zstd data near compressed byte " +
                            std::to_string(file_.consumed() - (ib_.size - ib_.pos)) + ": " +
                            ZSTD_getErrorName(last_rc_));
        }
        return ob.pos;
    }
    uint64_t consumed() const override { return file_.consumed() - (ib_.size - ib_.pos); }

private:
    FileHandle file_;
    std::vector<char> in_;
    ZSTD_inBuffer ib_{nullptr, 0, 0};
    ZSTD_DCtx* dctx_;
    std::size_t last_rc_ = 0;
};

}  // namespace

std::vector<SourceFile> list_sources(const std::vector<std::string>& paths) {
    if (paths.empty()) throw Error("no input: give text or JSONL files or folders");
    std::vector<SourceFile> out;
    for (const auto& p : paths) {
        std::error_code ec;
        const auto st = fs::status(p, ec);
        if (ec || !fs::exists(st)) throw Error(p + ": no such file or folder");
        if (!fs::is_directory(st)) {
            out.push_back(describe(p));
            continue;
        }
        std::vector<fs::path> found;
        for (auto it = fs::recursive_directory_iterator(p, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (!name.empty() && name[0] == '.') {
                if (it->is_directory()) it.disable_recursion_pending();
                continue;
            }
            if (it->is_regular_file()) found.push_back(it->path());
        }
        if (ec) throw Error(p + ": cannot list folder: " + ec.message());
        if (found.empty()) throw Error(p + ": folder holds no files");
        std::sort(found.begin(), found.end());
        for (const auto& f : found) out.push_back(describe(f));
    }
    return out;
}

std::unique_ptr<ByteSource> open_source(const SourceFile& file) {
    switch (file.compression) {
        case Compression::gzip:
            return std::make_unique<GzipSource>(file.path);
        case Compression::zstd:
            return std::make_unique<ZstdSource>(file.path);
        case Compression::none:
            break;
    }
    return std::make_unique<PlainSource>(file.path);
}

DocumentReader::DocumentReader(std::vector<SourceFile> sources, std::string field, FieldKind kind)
    : sources_(std::move(sources)),
      field_(std::move(field)),
      kind_(kind),
      docs_per_source_(sources_.size(), 0) {
    for (const auto& s : sources_) bytes_total_ += s.bytes;
}

DocumentReader::~DocumentReader() = default;

uint64_t DocumentReader::bytes_consumed() const {
    return done_bytes_ + (stream_ ? stream_->consumed() : 0);
}

std::string DocumentReader::repair(std::string_view text, uint64_t base_offset) {
    auto bad = tokenizer::first_invalid_utf8(text);
    if (!bad) return std::string(text);
    // Record every invalid place (the lossy decoding below replaces each with U+FFFD).
    std::size_t pos = *bad;
    while (true) {
        Utf8Problem p{sources_[current_].path, base_offset + pos};
        ++problem_count_;
        if (problems_.size() < kMaxProblems) problems_.push_back(p);
        if (file_problems_.count++ == 0) file_problems_.offset = p.offset;
        // Skip the invalid byte and any continuation bytes, then look again.
        ++pos;
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
        if (pos >= text.size()) break;
        auto next = tokenizer::first_invalid_utf8(text.substr(pos));
        if (!next) break;
        pos += *next;
    }
    return tokenizer::lossy_utf8(text);
}

bool DocumentReader::open_next_source() {
    if (opened_ && current_ < sources_.size()) {
        done_bytes_ += sources_[current_].bytes;
        stream_.reset();
        if (file_problems_.count > 0 && on_problem) {
            file_problems_.file = sources_[current_].path;
            on_problem(file_problems_);
        }
        ++current_;
    }
    file_problems_ = Utf8Problem{{}, 0, 0};
    next_index_ = 0;
    if (current_ >= sources_.size()) {
        opened_ = true;
        return false;
    }
    stream_ = open_source(sources_[current_]);
    opened_ = true;
    buffer_.clear();
    buffer_pos_ = 0;
    stream_offset_ = 0;
    line_number_ = 0;
    return true;
}

bool DocumentReader::read_line(std::string& line) {
    line.clear();
    while (true) {
        const auto nl = buffer_.find('\n', buffer_pos_);
        if (nl != std::string::npos) {
            line.append(buffer_, buffer_pos_, nl - buffer_pos_);
            stream_offset_ += nl + 1 - buffer_pos_;
            buffer_pos_ = nl + 1;
            return true;
        }
        line.append(buffer_, buffer_pos_, std::string::npos);
        stream_offset_ += buffer_.size() - buffer_pos_;
        buffer_.resize(kChunk);
        const std::size_t got = stream_->read(buffer_.data(), kChunk);
        buffer_.resize(got);
        buffer_pos_ = 0;
        if (got == 0) return !line.empty();
    }
}

bool DocumentReader::next(Document& doc) {
    doc.context.clear();
    while (true) {
        if (!opened_ || !stream_) {
            if (!open_next_source()) return false;
        }
        if (current_ >= sources_.size()) return false;
        const SourceFile& src = sources_[current_];
        if (src.format == SourceFormat::text && kind_ == FieldKind::string) {
            std::string text;
            std::vector<char> chunk(kChunk);
            while (std::size_t got = stream_->read(chunk.data(), chunk.size()))
                text.append(chunk.data(), got);
            text_bytes_ += text.size();
            doc.text = repair(text, 0);
            doc.source = current_;
            doc.index = next_index_++;
            doc.line = 0;
            if (!doc.text.empty()) ++docs_per_source_[current_];
            open_next_source();
            if (doc.text.empty()) continue;
            return true;
        }
        std::string line;
        const uint64_t line_start = stream_offset_;
        if (!read_line(line)) {
            if (!open_next_source()) return false;
            continue;
        }
        ++line_number_;
        text_bytes_ += line.size() + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        const std::string where = src.path + ":" + std::to_string(line_number_);
        // Ordered: a chat template sees the keys as the line has them (tool-call arguments,
        // `tojson`, `.items()`), as transformers does.
        nlohmann::ordered_json j;
        try {
            j = nlohmann::ordered_json::parse(repair(line, line_start));
        } catch (const nlohmann::json::exception& e) {
            throw Error(where + ": not a JSON line: " + e.what());
        }
        if (!j.is_object()) throw Error(where + ": not a JSON object");
        auto it = j.find(field_);
        if (kind_ == FieldKind::json) {
            if (it == j.end()) throw Error(where + ": no \"" + field_ + "\" field");
            doc.text = it->dump();
            nlohmann::ordered_json context = nlohmann::ordered_json::object();
            for (const char* key : {"tools", "documents"})
                if (auto c = j.find(key); c != j.end() && !c->is_null()) context[key] = *c;
            doc.context = context.empty() ? std::string() : context.dump();
        } else {
            if (it == j.end() || !it->is_string())
                throw Error(where + ": no \"" + field_ + "\" string field");
            doc.text = it->get<std::string>();
        }
        doc.source = current_;
        doc.index = next_index_++;
        doc.line = line_number_;
        if (doc.text.empty()) continue;
        ++docs_per_source_[current_];
        return true;
    }
}

std::string describe_utf8_problem(const Utf8Problem& p) {
    return p.file + ": invalid UTF-8 at " +
           (p.count == 1 ? "byte " + std::to_string(p.offset)
                         : std::to_string(p.count) + " places, the first at byte " +
                               std::to_string(p.offset)) +
           " (replaced with U+FFFD)";
}

void split_lines(const std::string& text, std::vector<std::string>& out) {
    std::size_t start = 0;
    while (start <= text.size()) {
        auto nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        if (nl > start) out.emplace_back(text, start, nl - start);
        start = nl + 1;
    }
}

}  // namespace lathe::prepare
