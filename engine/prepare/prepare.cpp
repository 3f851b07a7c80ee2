#include "engine/prepare/prepare.h"
#include "engine/prepare/manifest.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace lathe::prepare {

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBatchTextBytes = 1 << 20;
constexpr std::size_t kBatchDocuments = 4096;

std::string shard_name(int64_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "part-%05lld.npy", static_cast<long long>(i));
    return buf;
}

void write_atomic(const fs::path& path, const std::string& bytes) {
    const fs::path tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.flush();
        if (!out) throw Error(tmp.string() + ": cannot write");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw Error(path.string() + ": cannot write: " + ec.message());
}

Json read_json(const fs::path& path) {
    std::ifstream in(path);
    try {
        return Json::parse(in);
    } catch (const Json::exception& e) {
        throw Error(path.string() + ": not JSON (" + e.what() +
                    "); remove the folder to start over");
    }
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Names the settings that differ between two settings objects.
std::string differences(const Json& a, const Json& b) {
    std::string out;
    for (const auto& [k, v] : b.items()) {
        if (!a.contains(k) || a.at(k) != v) out += (out.empty() ? "" : ", ") + k;
    }
    return out.empty() ? "the settings" : out;
}

// A pool of workers, each with its own tokenizer (their caches stay per thread), that tokenizes
// batches of documents.
class TokenizerPool {
public:
    using Batch = std::vector<Document>;
    using Tokens = std::vector<std::vector<uint32_t>>;

    TokenizerPool(const std::string& tokenizer, int threads, bool add_bos, int64_t bos, int64_t eos)
        : add_bos_(add_bos), bos_(bos), eos_(eos) {
        for (int i = 0; i < threads; ++i) {
            tokenizers_.push_back(tokenizer::load_tokenizer(tokenizer));
            workers_.emplace_back([this, i] { work(*tokenizers_[static_cast<std::size_t>(i)]); });
        }
    }
    ~TokenizerPool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& w : workers_) w.join();
    }

    std::future<Tokens> submit(std::shared_ptr<Batch> batch) {
        std::packaged_task<Tokens(const tokenizer::Tokenizer&)> task(
            [this, batch](const tokenizer::Tokenizer& tok) { return run(tok, *batch); });
        auto f = task.get_future();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(std::move(task));
        }
        cv_.notify_one();
        return f;
    }

private:
    Tokens run(const tokenizer::Tokenizer& tok, const Batch& batch) const {
        Tokens out(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const auto ids = tok.encode(batch[i].text, false);
            auto& t = out[i];
            t.reserve(ids.size() + 2);
            if (add_bos_) t.push_back(static_cast<uint32_t>(bos_));
            for (const int64_t id : ids) t.push_back(static_cast<uint32_t>(id));
            t.push_back(static_cast<uint32_t>(eos_));
        }
        return out;
    }
    void work(const tokenizer::Tokenizer& tok) {
        while (true) {
            std::packaged_task<Tokens(const tokenizer::Tokenizer&)> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;
                task = std::move(queue_.front());
                queue_.pop_front();
            }
            task(tok);
        }
    }

    bool add_bos_;
    int64_t bos_, eos_;
    std::vector<std::unique_ptr<tokenizer::Tokenizer>> tokenizers_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::packaged_task<Tokens(const tokenizer::Tokenizer&)>> queue_;
    bool stop_ = false;
};

// The shard being written: part-NNNNN.npy.partial until it is finished.
class ShardWriter {
public:
    ShardWriter(fs::path folder, int element) : folder_(std::move(folder)), element_(element) {}
    ~ShardWriter() { abandon(); }

    bool open() const { return file_ != nullptr; }
    uint64_t bytes() const {
        return static_cast<uint64_t>(tokens_) * static_cast<uint64_t>(element_);
    }

    void start(int64_t index) {
        index_ = index;
        tokens_ = documents_ = 0;
        partial_ = folder_ / (shard_name(index) + ".partial");
        file_ = std::fopen(partial_.c_str(), "wb");
        if (!file_) throw Error(partial_.string() + ": cannot create: " + std::strerror(errno));
    }
    void add(const std::vector<uint32_t>& ids) {
        if (element_ == 2) {
            buffer16_.assign(ids.begin(), ids.end());
            put(buffer16_.data(), buffer16_.size() * 2);
        } else {
            put(ids.data(), ids.size() * 4);
        }
        tokens_ += static_cast<int64_t>(ids.size());
        ++documents_;
    }
    Shard finish() {
        if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
            throw Error(partial_.string() + ": cannot write: " + std::strerror(errno));
        std::fclose(file_);
        file_ = nullptr;
        std::error_code ec;
        fs::rename(partial_, folder_ / shard_name(index_), ec);
        if (ec) throw Error(partial_.string() + ": cannot rename: " + ec.message());
        return Shard{shard_name(index_), tokens_, documents_};
    }
    void abandon() {
        if (!file_) return;
        std::fclose(file_);
        file_ = nullptr;
        std::error_code ec;
        fs::remove(partial_, ec);
    }

private:
    void put(const void* data, std::size_t n) {
        if (std::fwrite(data, 1, n, file_) != n)
            throw Error(partial_.string() + ": cannot write: " + std::strerror(errno));
    }
    fs::path folder_, partial_;
    int element_;
    FILE* file_ = nullptr;
    int64_t index_ = 0, tokens_ = 0, documents_ = 0;
    std::vector<uint16_t> buffer16_;
};

Json shard_json(const Shard& s) {
    return {{"file", s.file}, {"tokens", s.tokens}, {"documents", s.documents}};
}

}  // namespace

namespace {

// What a preparation will do, checked before anything is written: the tokenizer, the token type,
// the EOS id, the inputs, and the settings a finished or interrupted output must match.
struct Plan {
    std::unique_ptr<tokenizer::Tokenizer> tok;
    int64_t vocab = 0;
    int64_t eos = 0;
    std::string dtype;
    int element = 2;
    int threads = 1;
    std::vector<SourceFile> sources;
    Json settings;
};

Plan plan_preparation(const PrepareOptions& o) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian");
    if (o.out.empty()) throw Error("no output folder (--out DIR)");
    Plan p;
    p.tok = tokenizer::load_tokenizer(o.tokenizer);
    const auto& tok = p.tok;
    const int64_t vocab = p.vocab = tok->vocab_size();
    const auto eos = o.eos_id ? o.eos_id : tok->eos_id();
    if (!eos)
        throw Error(o.tokenizer +
                    ": the tokenizer has no EOS token to separate documents; give --eos-id");
    if (*eos < 0 || *eos >= vocab)
        throw Error("EOS id " + std::to_string(*eos) + " is outside the vocabulary (" +
                    std::to_string(vocab) + " tokens)");
    p.eos = *eos;
    if (o.add_bos && !tok->bos_id())
        throw Error(o.tokenizer + ": --add-bos, but the tokenizer has no BOS token");
    std::string dtype = o.dtype ? *o.dtype : (vocab <= 65536 ? "uint16" : "uint32");
    if (dtype != "uint16" && dtype != "uint32")
        throw Error("dtype '" + dtype + "': use uint16 or uint32");
    if (dtype == "uint16" && vocab > 65536)
        throw Error(o.tokenizer + ": " + std::to_string(vocab) +
                    " tokens do not fit uint16 (at most 65536); use uint32");
    p.dtype = dtype;
    p.element = dtype == "uint16" ? 2 : 4;
    p.threads = o.threads > 0 ? o.threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    auto sources = list_sources(o.paths);
    // The output folder may sit inside an input folder: its files are never input.
    const std::string out_prefix = fs::absolute(o.out).lexically_normal().string() + "/";
    sources.erase(std::remove_if(sources.begin(), sources.end(),
                                 [&](const SourceFile& s) {
                                     return fs::absolute(s.path).lexically_normal().string().rfind(
                                                out_prefix, 0) == 0;
                                 }),
                  sources.end());
    if (sources.empty()) throw Error("no input besides the output folder " + o.out);
    p.settings = {{"tokenizer_id", tok->id()},    {"field", o.field},
                  {"shard_bytes", o.shard_bytes}, {"dtype", dtype},
                  {"add_bos", o.add_bos},         {"eos_id", *eos},
                  {"sources", Json::array()}};
    for (const auto& s : sources)
        p.settings["sources"].push_back({{"path", fs::absolute(s.path).lexically_normal().string()},
                                         {"bytes", s.bytes},
                                         {"mtime_ns", s.mtime_ns}});
    p.sources = std::move(sources);
    return p;
}

// The output folder: new, finished with the same settings (its manifest: nothing to do), or
// interrupted (the shards it kept, checked, and the (source, document) of the next shard).
struct Output {
    std::optional<Json> done;
    std::vector<Shard> shards;
    std::pair<std::size_t, uint64_t> resume_at{0, 0};
};

Output open_output(const PrepareOptions& o, const Plan& p) {
    const fs::path out(o.out);
    const fs::path manifest_path = out / kManifestFile, state_path = out / kStateFile;
    const Json& settings = p.settings;
    const int element = p.element;
    std::error_code ec;
    Output r;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
        throw Error(o.out + ": exists and is not a folder");
    fs::create_directories(out, ec);
    if (ec) throw Error(o.out + ": cannot create: " + ec.message());
    // A manifest or state file made with other settings is refused, naming what differs.
    auto require_settings = [&](const Json& recorded, const std::string& what,
                                const std::string& advice) {
        if (!recorded.is_object() || recorded.value("settings", Json()) != settings)
            throw Error(o.out + ": holds " + what + " with other settings (" +
                        differences(recorded.is_object()
                                        ? recorded.value("settings", Json::object())
                                        : Json::object(),
                                    settings) +
                        "); " + advice);
    };
    if (fs::exists(manifest_path)) {
        Json done = read_json(manifest_path);
        require_settings(done, "token files made", "choose another --out, or remove it");
        r.done = std::move(done);
        return r;
    }
    if (fs::exists(state_path)) {
        try {
            Json state = read_json(state_path);
            require_settings(state, "an interrupted preparation",
                             "run it with those, choose another --out, or remove it");
            for (const auto& s : state.at("shards")) {
                Shard sh{s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(),
                         s.at("documents").get<int64_t>()};
                const auto size = fs::file_size(out / sh.file, ec);
                if (ec || size != static_cast<uint64_t>(sh.tokens) * element)
                    throw Error((out / sh.file).string() +
                                ": missing or changed since it was written; remove " + o.out +
                                " to start over");
                r.shards.push_back(sh);
            }
            r.resume_at = {state.at("next_source").get<std::size_t>(),
                           state.at("next_document").get<uint64_t>()};
        } catch (const Json::exception& e) {
            throw Error(state_path.string() + ": damaged (" + e.what() + "); remove " + o.out +
                        " to start over");
        }
    } else {
        for (const auto& e : fs::directory_iterator(out, ec)) {
            (void)e;
            throw Error(o.out +
                        ": not empty, and not a prepare-data folder; choose an empty or "
                        "new folder");
        }
    }
    // Anything but the kept shards goes (a partial shard, or shards written after the last
    // state save).
    for (const auto& e : fs::directory_iterator(out, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("part-", 0) != 0) continue;
        bool kept = false;
        for (const auto& s : r.shards) kept = kept || s.file == name;
        if (!kept) fs::remove(e.path(), ec);
    }
    return r;
}

// .prepare-state.json: the shards kept so far and where the next one starts.
void write_state(const fs::path& path, const Json& settings, const std::vector<Shard>& shards,
                 std::size_t next_source, uint64_t next_document) {
    Json state = {{"settings", settings},
                  {"shards", Json::array()},
                  {"next_source", next_source},
                  {"next_document", next_document}};
    for (const auto& s : shards) state["shards"].push_back(shard_json(s));
    write_atomic(path, state.dump(1) + "\n");
}

// The progress a resumed preparation starts from: what its kept shards hold.
Progress resumed_progress(const std::vector<Shard>& shards, uint64_t bytes_total) {
    Progress p;
    p.resumed_shards = p.shards = static_cast<int64_t>(shards.size());
    p.bytes_total = bytes_total;
    for (const auto& s : shards) {
        p.tokens += s.tokens;
        p.documents += s.documents;
    }
    return p;
}

// manifest.json of a finished preparation.
Json manifest_json(const PrepareOptions& o, const Plan& p, const std::vector<Shard>& shards,
                   const DocumentReader& reader, const Progress& progress,
                   const std::string& tokenizer_copy) {
    const auto& tok = p.tok;
    Json manifest = {
        {"format", kManifestFormat},
        {"version", kManifestVersion},
        {"created_by", "lathe-engine prepare-data"},
        {"tokenizer",
         {{"id", tok->id()},
          {"file", tokenizer_copy},
          {"source", o.tokenizer},
          {"kind", tok->kind()},
          {"vocab_size", p.vocab},
          {"padded_vocab_size", tokenizer::padded_vocab_size(p.vocab)},
          {"bos_id", tok->bos_id() ? Json(*tok->bos_id()) : Json(nullptr)},
          {"eos_id", tok->eos_id() ? Json(*tok->eos_id()) : Json(nullptr)}}},
        {"dtype", p.dtype},
        {"eos_id", p.eos},
        {"bos_prepended", o.add_bos},
        {"tokens", progress.tokens},
        {"documents", progress.documents},
        {"text_bytes", reader.text_bytes()},
        {"shards", Json::array()},
        {"sources", Json::array()},
        {"invalid_utf8", {{"count", reader.utf8_problem_count()}, {"first", Json::array()}}},
        {"settings", p.settings}};
    for (const auto& s : shards) manifest["shards"].push_back(shard_json(s));
    for (std::size_t i = 0; i < p.sources.size(); ++i)
        manifest["sources"].push_back({{"path", p.sources[i].path},
                                       {"bytes", p.sources[i].bytes},
                                       {"documents", reader.documents_per_source()[i]}});
    for (const auto& pr : reader.utf8_problems())
        manifest["invalid_utf8"]["first"].push_back({{"file", pr.file}, {"offset", pr.offset}});
    return manifest;
}

}  // namespace

Json prepare_data(const PrepareOptions& o) {
    const Plan plan = plan_preparation(o);
    const auto& tok = plan.tok;
    const auto& sources = plan.sources;
    const Json& settings = plan.settings;
    const int element = plan.element, threads = plan.threads;
    const int64_t eos = plan.eos;
    Output opened = open_output(o, plan);
    if (opened.done) {
        if (o.on_progress) o.on_progress(Progress{});
        return *opened.done;
    }
    const fs::path out(o.out);
    const fs::path manifest_path = out / kManifestFile, state_path = out / kStateFile;
    std::error_code ec;
    std::vector<Shard> shards = std::move(opened.shards);
    const auto resume_at = opened.resume_at;
    const std::string tokenizer_copy = tok->file_name();
    write_atomic(out / tokenizer_copy, read_bytes(o.tokenizer));

    auto save_state = [&](std::size_t next_source, uint64_t next_document) {
        write_state(state_path, settings, shards, next_source, next_document);
    };

    DocumentReader reader(sources, o.field);
    reader.on_problem = o.on_problem;
    TokenizerPool pool(o.tokenizer, threads, o.add_bos, tok->bos_id().value_or(0), eos);
    ShardWriter writer(out, element);
    std::deque<std::pair<std::shared_ptr<TokenizerPool::Batch>, std::future<TokenizerPool::Tokens>>>
        in_flight;
    const auto t0 = Clock::now();
    auto last_report = t0;
    Progress progress = resumed_progress(shards, reader.bytes_total());
    auto report = [&](bool force) {
        const auto now = Clock::now();
        if (!o.on_progress || (!force && now - last_report < std::chrono::milliseconds(500)))
            return;
        last_report = now;
        progress.bytes_done = reader.bytes_consumed();
        progress.text_bytes = reader.text_bytes();
        progress.seconds = std::chrono::duration<double>(now - t0).count();
        o.on_progress(progress);
    };
    auto drain = [&] {
        for (auto& f : in_flight) {
            try {
                f.second.wait();
            } catch (...) {
            }
        }
        in_flight.clear();
    };

    try {
        bool more = true;
        Document doc;
        while (more || !in_flight.empty()) {
            if (o.cancel && o.cancel->load()) {
                drain();
                writer.abandon();
                throw Cancelled{static_cast<int64_t>(shards.size())};
            }
            // Keep every worker busy: read batches until enough are in flight.
            while (more && in_flight.size() < static_cast<std::size_t>(2 * threads)) {
                auto batch = std::make_shared<TokenizerPool::Batch>();
                std::size_t bytes = 0;
                while (bytes < kBatchTextBytes && batch->size() < kBatchDocuments) {
                    if (!reader.next(doc)) {
                        more = false;
                        break;
                    }
                    if (std::make_pair(doc.source, doc.index) < resume_at) continue;
                    bytes += doc.text.size();
                    batch->push_back(std::move(doc));
                }
                if (batch->empty()) break;
                auto f = pool.submit(batch);
                in_flight.emplace_back(std::move(batch), std::move(f));
            }
            if (in_flight.empty()) break;
            auto [batch, future] = std::move(in_flight.front());
            in_flight.pop_front();
            const auto tokens = future.get();
            for (std::size_t i = 0; i < batch->size(); ++i) {
                const uint64_t doc_bytes = tokens[i].size() * static_cast<uint64_t>(element);
                if (writer.open() && writer.bytes() > 0 &&
                    writer.bytes() + doc_bytes > o.shard_bytes) {
                    shards.push_back(writer.finish());
                    save_state((*batch)[i].source, (*batch)[i].index);
                    ++progress.shards;
                }
                if (!writer.open()) writer.start(static_cast<int64_t>(shards.size()));
                writer.add(tokens[i]);
                progress.tokens += static_cast<int64_t>(tokens[i].size());
                ++progress.documents;
            }
            report(false);
        }
        if (writer.open()) {
            shards.push_back(writer.finish());
            ++progress.shards;
        }
    } catch (...) {
        drain();
        writer.abandon();
        throw;
    }
    if (shards.empty())
        throw Error("no text: every input document is empty (" + std::to_string(sources.size()) +
                    " file(s))");
    const Json manifest = manifest_json(o, plan, shards, reader, progress, tokenizer_copy);
    write_atomic(manifest_path, manifest.dump(2) + "\n");
    fs::remove(state_path, ec);
    report(true);
    return manifest;
}

}  // namespace lathe::prepare
