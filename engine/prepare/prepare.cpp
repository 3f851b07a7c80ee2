#include "engine/prepare/prepare.h"
#include "engine/chat/conversation.h"
#include "engine/token_files/manifest.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "engine/util/record_json.h"

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
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace lathe::prepare {

namespace {

using Json = nlohmann::json;
using token_files::kManifestFile;
using token_files::Manifest;
using token_files::Shard;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBatchTextBytes = 1 << 20;
constexpr std::size_t kBatchDocuments = 4096;

std::string shard_name(int64_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "part-%05lld.npy", static_cast<long long>(i));
    return buf;
}
std::string mask_name(int64_t i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "label-mask-%05lld.npy", static_cast<long long>(i));
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

// One document, tokenized: its ids and, when the folder gets label masks, one byte per id.
struct Encoded {
    std::vector<uint32_t> ids;
    std::vector<uint8_t> mask;
    std::string skipped;  ///< why the line is left out (--unmaskable skip); "" when it is not
};

// How a worker turns a document into tokens.
struct Encoding {
    std::string tokenizer;                   ///< the tokenizer file
    std::optional<chat::ChatTemplate> chat;  ///< conversations: rendered with this first
    chat::TrainOn train_on = chat::TrainOn::assistant;
    bool skip_unmaskable = false;
    bool masks = false;  ///< write label masks
    bool add_bos = false;
    int64_t bos = 0, eos = 0;
    std::vector<std::string> source_paths;  ///< to name a document's file in errors
};

// A pool of workers, each with its own tokenizer and chat template (their caches stay per
// thread), that tokenizes batches of documents.
class TokenizerPool {
public:
    using Batch = std::vector<Document>;
    using Tokens = std::vector<Encoded>;

    TokenizerPool(Encoding encoding, int threads) : enc_(std::move(encoding)) {
        for (int i = 0; i < threads; ++i) {
            Worker w;
            w.tok = tokenizer::load_tokenizer(enc_.tokenizer);
            if (enc_.chat) w.chat = std::make_unique<chat::ChatTemplate>(enc_.chat->copy());
            workers_.push_back(std::move(w));
        }
        for (int i = 0; i < threads; ++i)
            threads_.emplace_back([this, i] { work(workers_[static_cast<std::size_t>(i)]); });
    }
    ~TokenizerPool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }

    struct Worker {
        std::unique_ptr<tokenizer::Tokenizer> tok;
        std::unique_ptr<chat::ChatTemplate> chat;
    };

    std::future<Tokens> submit(const std::shared_ptr<Batch>& batch) {
        std::packaged_task<Tokens(const Worker&)> task(
            [this, batch](const Worker& w) { return run(w, *batch); });
        auto f = task.get_future();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(std::move(task));
        }
        cv_.notify_one();
        return f;
    }

private:
    Encoded encode(const Worker& w, const Document& doc) const {
        Encoded e;
        if (w.chat) {
            const std::string where =
                enc_.source_paths.at(doc.source) + ":" + std::to_string(doc.line);
            const auto messages = nlohmann::ordered_json::parse(doc.text);
            const auto context = doc.context.empty() ? nlohmann::ordered_json()
                                                     : nlohmann::ordered_json::parse(doc.context);
            chat::Encoded c;
            try {
                c = chat::encode_conversation(*w.chat, *w.tok, messages, enc_.train_on, where,
                                              context);
            } catch (const chat::Unmaskable& u) {
                if (!enc_.skip_unmaskable) throw;
                e.skipped = u.what();
                return e;
            }
            e.ids.assign(c.ids.begin(), c.ids.end());
            e.mask = c.mask;
            // Documents end with EOS; one the template did not write is not trained on.
            if (e.ids.empty() || e.ids.back() != static_cast<uint32_t>(enc_.eos)) {
                e.ids.push_back(static_cast<uint32_t>(enc_.eos));
                e.mask.push_back(0);
            }
            return e;
        }
        const auto ids = w.tok->encode(doc.text, false);
        e.ids.reserve(ids.size() + 2);
        if (enc_.add_bos) e.ids.push_back(static_cast<uint32_t>(enc_.bos));
        for (const int64_t id : ids) e.ids.push_back(static_cast<uint32_t>(id));
        e.ids.push_back(static_cast<uint32_t>(enc_.eos));
        if (enc_.masks) e.mask.assign(e.ids.size(), 1);
        return e;
    }
    Tokens run(const Worker& w, const Batch& batch) const {
        Tokens out(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) out[i] = encode(w, batch[i]);
        return out;
    }
    void work(const Worker& w) {
        while (true) {
            std::packaged_task<Tokens(const Worker&)> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;
                task = std::move(queue_.front());
                queue_.pop_front();
            }
            task(w);
        }
    }

    const Encoding enc_;
    std::vector<Worker> workers_;
    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::packaged_task<Tokens(const Worker&)>> queue_;
    bool stop_ = false;
};

// Instances of exactly `length` tokens from documents, as OLMo-core's padded and packed datasets
// make them; padding gets `pad` and a 0 in the mask.
class InstanceMaker {
public:
    InstanceMaker(Instances layout, int64_t length, uint32_t pad)
        : layout_(layout), length_(static_cast<std::size_t>(length)), pad_(pad) {}

    // padded: the document cut into pieces of `length` (the last one padded).
    std::vector<Encoded> padded(const Encoded& doc) const {
        std::vector<Encoded> out;
        for (std::size_t at = 0; at < doc.ids.size(); at += length_) {
            const std::size_t n = std::min(length_, doc.ids.size() - at);
            Encoded e;
            e.ids.assign(doc.ids.begin() + static_cast<std::ptrdiff_t>(at),
                         doc.ids.begin() + static_cast<std::ptrdiff_t>(at + n));
            e.mask.assign(doc.mask.begin() + static_cast<std::ptrdiff_t>(at),
                          doc.mask.begin() + static_cast<std::ptrdiff_t>(at + n));
            pad(e);
            out.push_back(std::move(e));
        }
        return out;
    }
    // packed: whole documents (truncated to `length`) best-fit-decreasing into instances: the
    // longest first, each into the fullest instance it fits, a new one when none has room.
    std::vector<Encoded> packed(std::vector<Encoded> docs) const {
        std::vector<std::size_t> order(docs.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return docs[a].ids.size() > docs[b].ids.size();
        });
        std::vector<Encoded> out;
        std::multimap<std::size_t, std::size_t> room;  // space left -> instance
        for (const std::size_t d : order) {
            Encoded& doc = docs[d];
            if (doc.ids.size() > length_) {
                doc.ids.resize(length_);
                doc.mask.resize(length_);
            }
            const std::size_t n = doc.ids.size();
            auto it = room.lower_bound(n);
            std::size_t inst;
            if (it == room.end()) {
                inst = out.size();
                out.emplace_back();
            } else {
                inst = it->second;
                room.erase(it);
            }
            auto& e = out[inst];
            e.ids.insert(e.ids.end(), doc.ids.begin(), doc.ids.end());
            e.mask.insert(e.mask.end(), doc.mask.begin(), doc.mask.end());
            if (e.ids.size() < length_) room.emplace(length_ - e.ids.size(), inst);
        }
        for (auto& e : out) pad(e);
        return out;
    }
    Instances layout() const { return layout_; }
    std::size_t length() const { return length_; }

private:
    void pad(Encoded& e) const {
        e.ids.resize(length_, pad_);
        e.mask.resize(length_, 0);
    }
    Instances layout_;
    std::size_t length_;
    uint32_t pad_;
};

// The shard being written: part-NNNNN.npy.partial (and label-mask-NNNNN.npy.partial) until it is
// finished.
class ShardWriter {
public:
    ShardWriter(fs::path folder, int element, bool masks)
        : folder_(std::move(folder)), element_(element), masks_(masks) {}
    ~ShardWriter() { abandon(); }

    bool open() const { return file_ != nullptr; }
    void count_document() { ++documents_; }
    uint64_t bytes() const {
        return static_cast<uint64_t>(tokens_) * static_cast<uint64_t>(element_);
    }

    void start(int64_t index) {
        index_ = index;
        tokens_ = documents_ = 0;
        partial_ = folder_ / (shard_name(index) + ".partial");
        file_ = create(partial_);
        if (masks_) {
            mask_partial_ = folder_ / (mask_name(index) + ".partial");
            mask_file_ = create(mask_partial_);
        }
    }
    // Tokens (and their mask bytes) of `documents` documents.
    void add(const Encoded& e, int64_t documents = 1) {
        if (element_ == 2) {
            buffer16_.assign(e.ids.begin(), e.ids.end());
            put(file_, partial_, buffer16_.data(), buffer16_.size() * 2);
        } else {
            put(file_, partial_, e.ids.data(), e.ids.size() * 4);
        }
        if (masks_) put(mask_file_, mask_partial_, e.mask.data(), e.mask.size());
        tokens_ += static_cast<int64_t>(e.ids.size());
        documents_ += documents;
    }
    Shard finish() {
        close(file_, partial_);
        if (masks_) close(mask_file_, mask_partial_);
        rename(partial_, shard_name(index_));
        Shard s{shard_name(index_), tokens_, documents_, std::nullopt};
        if (masks_) {
            rename(mask_partial_, mask_name(index_));
            s.label_mask = mask_name(index_);
        }
        return s;
    }
    void abandon() {
        for (auto [f, path] :
             {std::pair{&file_, &partial_}, std::pair{&mask_file_, &mask_partial_}}) {
            if (!*f) continue;
            std::fclose(*f);
            *f = nullptr;
            std::error_code ec;
            fs::remove(*path, ec);
        }
    }

private:
    static FILE* create(const fs::path& path) {
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) throw Error(path.string() + ": cannot create: " + std::strerror(errno));
        return f;
    }
    static void put(FILE* f, const fs::path& path, const void* data, std::size_t n) {
        if (std::fwrite(data, 1, n, f) != n)
            throw Error(path.string() + ": cannot write: " + std::strerror(errno));
    }
    static void close(FILE*& f, const fs::path& path) {
        if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
            throw Error(path.string() + ": cannot write: " + std::strerror(errno));
        std::fclose(f);
        f = nullptr;
    }
    void rename(const fs::path& from, const std::string& to) const {
        std::error_code ec;
        fs::rename(from, folder_ / to, ec);
        if (ec) throw Error(from.string() + ": cannot rename: " + ec.message());
    }
    fs::path folder_, partial_, mask_partial_;
    int element_;
    bool masks_;
    FILE* file_ = nullptr;
    FILE* mask_file_ = nullptr;
    int64_t index_ = 0, tokens_ = 0, documents_ = 0;
    std::vector<uint16_t> buffer16_;
};

Json shard_json(const Shard& s) {
    return Json::parse(record_json::to_message(s).dump());
}

}  // namespace

namespace {

// What a preparation will do, checked before anything is written: the tokenizer, the token type,
// the EOS id, the inputs, and the settings a finished or interrupted output must match.
struct Plan {
    std::unique_ptr<tokenizer::Tokenizer> tok;
    std::optional<chat::ChatTemplate> chat;
    int64_t vocab = 0;
    int64_t eos = 0;
    int64_t pad = 0;
    bool masks = false;  ///< label-mask files beside the token files
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
    if (o.chat) {
        if (o.add_bos)
            throw Error(
                "--add-bos with --chat: the chat template writes BOS where the model wants it");
        if (!o.chat->template_path.empty()) {
            p.chat = chat::ChatTemplate::load(o.chat->template_path);
        } else {
            p.chat = chat::ChatTemplate::beside_tokenizer(o.tokenizer);
            if (!p.chat)
                throw Error(o.tokenizer +
                            ": no chat template beside the tokenizer (no "
                            "tokenizer_config.json with a chat_template, no chat_template.jinja "
                            "in its folder); give --chat-template FILE");
        }
        p.chat->update_kwargs(o.chat->template_args);
    }
    if (o.instances != Instances::stream && o.sequence_length < 1)
        throw Error("padded or packed instances need --sequence-length N");
    if (o.instances == Instances::stream && o.sequence_length != 0)
        throw Error("--sequence-length goes with --instances padded or packed");
    // A chat model's EOS is its tokenizer config's eos_token (<|im_end|>, <|eot_id|>), which
    // transformers uses, rather than the tokenizer file's end of text; it is also the EOS of a
    // tokenizer that names none itself (DeepSeek- and Cohere-style folders).
    std::optional<int64_t> eos = o.eos_id ? o.eos_id : tok->eos_id();
    std::string eos_from = o.eos_id ? "--eos-id" : o.tokenizer;
    if (p.chat && !o.eos_id && p.chat->special_tokens().contains("eos_token")) {
        const auto name = p.chat->special_tokens()["eos_token"].get<std::string>();
        const auto ids = tok->encode(name);
        if (ids.size() == 1) {
            eos = ids[0];
        } else if (!eos) {
            throw Error(p.chat->origin() + ": eos_token \"" + name + "\" is " +
                        std::to_string(ids.size()) + " tokens of " + o.tokenizer +
                        ", not one; give --eos-id");
        }
    }
    if (!eos)
        throw Error(o.tokenizer +
                    ": the tokenizer has no EOS token to separate documents (and no "
                    "tokenizer_config.json eos_token beside it); give --eos-id");
    if (*eos < 0 || *eos >= vocab)
        throw Error("EOS id " + std::to_string(*eos) + " (" + eos_from +
                    ") is outside the vocabulary (" + std::to_string(vocab) + " tokens)");
    p.eos = *eos;
    p.masks = o.chat.has_value() || o.instances != Instances::stream;
    // The padding token: --pad-id, the tokenizer config's pad_token, else EOS.
    p.pad = p.eos;
    if (o.pad_id) {
        p.pad = *o.pad_id;
    } else if (p.chat && p.chat->special_tokens().contains("pad_token")) {
        const auto ids = tok->encode(p.chat->special_tokens()["pad_token"].get<std::string>());
        if (ids.size() == 1) p.pad = ids[0];
    }
    if (p.pad < 0 || p.pad >= vocab)
        throw Error("pad id " + std::to_string(p.pad) + " is outside the vocabulary (" +
                    std::to_string(vocab) + " tokens)");
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
                  {"add_bos", o.add_bos},         {"eos_id", p.eos},
                  {"sources", Json::array()}};
    // Only what is set goes in, so folders made before these options still match.
    if (p.chat)
        p.settings["chat"] = {{"template_id", p.chat->id()},
                              {"train_on", o.chat->train_on_all ? "all" : "assistant"}};
    if (o.instances != Instances::stream)
        p.settings["instances"] = {
            {"layout", o.instances == Instances::padded ? "padded" : "packed"},
            {"sequence_length", o.sequence_length},
            {"pad_id", p.pad}};
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
    bool created = false;  ///< the folder did not exist before
    std::optional<Manifest> done;
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
    r.created = !fs::exists(out, ec);
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
        require_settings(read_json(manifest_path), "token files made",
                         "choose another --out, or remove it");
        r.done = token_files::read_manifest(manifest_path.string());
        return r;
    }
    if (fs::exists(state_path)) {
        try {
            Json state = read_json(state_path);
            require_settings(state, "an interrupted preparation",
                             "run it with those, choose another --out, or remove it");
            for (const auto& s : state.at("shards")) {
                const auto sh = record_json::from_json_strict<Shard>(s, "shards");
                const auto size = fs::file_size(out / sh.file, ec);
                if (ec || size != static_cast<uint64_t>(sh.tokens) * element)
                    throw Error((out / sh.file).string() +
                                ": missing or changed since it was written; remove " + o.out +
                                " to start over");
                if (sh.label_mask &&
                    fs::file_size(out / *sh.label_mask, ec) != static_cast<uint64_t>(sh.tokens))
                    throw Error((out / *sh.label_mask).string() +
                                ": missing or changed since it was written; remove " + o.out +
                                " to start over");
                r.shards.push_back(sh);
            }
            r.resume_at = {state.at("next_source").get<std::size_t>(),
                           state.at("next_document").get<uint64_t>()};
        } catch (const Json::exception& e) {
            throw Error(state_path.string() + ": damaged (" + e.what() + "); remove " + o.out +
                        " to start over");
        } catch (const Error& e) {
            if (std::string(e.what()).rfind("shards: ", 0) != 0) throw;
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
        if (name.rfind("part-", 0) != 0 && name.rfind("label-mask-", 0) != 0) continue;
        bool kept = false;
        for (const auto& s : r.shards) kept = kept || s.file == name || s.label_mask == name;
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
Manifest make_manifest(const PrepareOptions& o, const Plan& p, const std::vector<Shard>& shards,
                       const DocumentReader& reader, const Progress& progress,
                       const std::string& tokenizer_copy) {
    const auto& tok = p.tok;
    Manifest m;
    m.tokenizer.id = tok->id();
    m.tokenizer.file = tokenizer_copy;
    m.tokenizer.source = o.tokenizer;
    m.tokenizer.kind = tok->kind();
    m.tokenizer.vocab_size = p.vocab;
    m.tokenizer.padded_vocab_size = tokenizer::padded_vocab_size(p.vocab);
    m.tokenizer.bos_id = tok->bos_id();
    m.tokenizer.eos_id = tok->eos_id();
    m.dtype = p.dtype;
    m.eos_id = p.eos;
    m.bos_prepended = o.add_bos;
    m.tokens = progress.tokens;
    m.documents = progress.documents;
    m.text_bytes = static_cast<int64_t>(reader.text_bytes());
    m.shards = shards;
    for (std::size_t i = 0; i < p.sources.size(); ++i)
        m.sources.push_back({p.sources[i].path, static_cast<int64_t>(p.sources[i].bytes),
                             static_cast<int64_t>(reader.documents_per_source()[i])});
    m.invalid_utf8.count = static_cast<int64_t>(reader.utf8_problem_count());
    for (const auto& pr : reader.utf8_problems())
        m.invalid_utf8.first.push_back({pr.file, static_cast<int64_t>(pr.offset)});
    m.label_masks = p.masks;
    m.settings = nlohmann::ordered_json::parse(p.settings.dump());
    if (p.chat)
        m.chat = token_files::ChatInfo{p.chat->origin(), p.chat->id(),
                                       o.chat->train_on_all ? "all" : "assistant",
                                       "chat_template.jinja", p.chat->kwargs()};
    if (p.settings.contains("instances"))
        m.instances = nlohmann::ordered_json::parse(p.settings["instances"].dump());
    if (p.masks) {
        // The tokens the loss is taken on: the mask files' ones.
        int64_t trained = 0;
        std::vector<char> buf(1 << 20);
        for (const auto& s : shards) {
            std::ifstream in(fs::path(o.out) / *s.label_mask, std::ios::binary);
            while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount()) {
                for (std::streamsize k = 0; k < in.gcount(); ++k)
                    trained += buf[static_cast<std::size_t>(k)] != 0;
            }
        }
        m.trained_tokens = trained;
    }
    m.folder = o.out;
    return m;
}

// How the workers encode: the tokenizer, the chat template and the mask and BOS/EOS settings.
Encoding encoding_for(const PrepareOptions& o, const Plan& plan) {
    Encoding e;
    e.tokenizer = o.tokenizer;
    e.chat = plan.chat ? std::make_optional(plan.chat->copy()) : std::nullopt;
    e.train_on = o.chat && o.chat->train_on_all ? chat::TrainOn::all : chat::TrainOn::assistant;
    e.skip_unmaskable = o.chat && o.chat->skip_unmaskable;
    e.masks = plan.masks;
    e.add_bos = o.add_bos;
    e.bos = plan.tok->bos_id().value_or(0);
    e.eos = plan.eos;
    for (const auto& src : plan.sources) e.source_paths.push_back(src.path);
    return e;
}

// Reads documents in batches, from the resume point on, and keeps every tokenizer worker busy;
// hands the encoded batches back in reading order.
class EncodingPipeline {
public:
    EncodingPipeline(DocumentReader& reader, TokenizerPool& pool, int threads,
                     std::pair<std::size_t, uint64_t> resume_at)
        : reader_(reader),
          pool_(pool),
          depth_(2 * static_cast<std::size_t>(threads)),
          resume_at_(resume_at) {}

    // The next batch and its tokens; false when every document has been handed out.
    bool next(std::shared_ptr<TokenizerPool::Batch>& batch, TokenizerPool::Tokens& tokens) {
        fill();
        if (in_flight_.empty()) return false;
        auto front = std::move(in_flight_.front());
        in_flight_.pop_front();
        batch = std::move(front.first);
        tokens = front.second.get();
        return true;
    }

    // Waits for the batches still being encoded, ignoring their errors (the caller is failing
    // or cancelling already).
    void drain() {
        for (auto& f : in_flight_) {
            try {
                f.second.wait();
            } catch (...) {
            }
        }
        in_flight_.clear();
    }

private:
    void fill() {
        while (more_ && in_flight_.size() < depth_) {
            auto batch = std::make_shared<TokenizerPool::Batch>();
            std::size_t bytes = 0;
            while (bytes < kBatchTextBytes && batch->size() < kBatchDocuments) {
                if (!reader_.next(doc_)) {
                    more_ = false;
                    break;
                }
                if (std::make_pair(doc_.source, doc_.index) < resume_at_) continue;
                bytes += doc_.text.size();
                batch->push_back(std::move(doc_));
            }
            if (batch->empty()) break;
            auto f = pool_.submit(batch);
            in_flight_.emplace_back(std::move(batch), std::move(f));
        }
    }

    DocumentReader& reader_;
    TokenizerPool& pool_;
    std::size_t depth_;
    std::pair<std::size_t, uint64_t> resume_at_;
    bool more_ = true;
    Document doc_;
    std::deque<std::pair<std::shared_ptr<TokenizerPool::Batch>, std::future<TokenizerPool::Tokens>>>
        in_flight_;
};

// Lays encoded documents out as the instances setting says (streamed, padded or packed) into
// shards of about shard_bytes. Cutting a shard saves the state, so that an interrupted
// preparation resumes at the document that did not fit.
class ShardAssembler {
public:
    ShardAssembler(const PrepareOptions& o, const Plan& plan, std::vector<Shard> kept,
                   Progress& progress)
        : o_(o),
          settings_(plan.settings),
          element_(plan.element),
          state_path_(fs::path(o.out) / kStateFile),
          shards_(std::move(kept)),
          writer_(fs::path(o.out), plan.element, plan.masks),
          maker_(o.instances, o.sequence_length, static_cast<uint32_t>(plan.pad)),
          progress_(progress) {}

    void add(Encoded encoded, std::size_t source, uint64_t index) {
        const uint64_t doc_bytes = bytes_of(encoded);
        const uint64_t held = packed() ? to_pack_bytes_ : writer_.bytes();
        if (held > 0 && held + doc_bytes > o_.shard_bytes) {
            finish_shard();
            write_state(state_path_, settings_, shards_, source, index);
        }
        if (!writer_.open()) writer_.start(static_cast<int64_t>(shards_.size()));
        ++progress_.documents;
        if (packed()) {
            writer_.count_document();
            to_pack_bytes_ += doc_bytes;
            to_pack_tokens_ += static_cast<int64_t>(encoded.ids.size());
            progress_.tokens += static_cast<int64_t>(encoded.ids.size());
            to_pack_.push_back(std::move(encoded));
        } else if (o_.instances == Instances::padded) {
            auto pieces = maker_.padded(encoded);
            for (std::size_t k = 0; k < pieces.size(); ++k) {
                writer_.add(pieces[k], k == 0 ? 1 : 0);
                progress_.tokens += static_cast<int64_t>(pieces[k].ids.size());
            }
        } else {
            writer_.add(encoded);
            progress_.tokens += static_cast<int64_t>(encoded.ids.size());
        }
    }

    // The last shard, once every document is in.
    void finish() {
        if (writer_.open()) finish_shard();
    }
    void abandon() { writer_.abandon(); }
    const std::vector<Shard>& shards() const { return shards_; }

private:
    bool packed() const { return o_.instances == Instances::packed; }

    // What the document adds to the shard, in bytes.
    uint64_t bytes_of(const Encoded& encoded) const {
        const uint64_t instance = maker_.length() * static_cast<uint64_t>(element_);
        const uint64_t bytes = encoded.ids.size() * static_cast<uint64_t>(element_);
        if (o_.instances == Instances::padded)
            return (encoded.ids.size() + maker_.length() - 1) / maker_.length() * instance;
        if (packed()) return std::min<uint64_t>(bytes, instance);
        return bytes;
    }

    void finish_shard() {
        if (packed()) flush_packed();
        shards_.push_back(writer_.finish());
        ++progress_.shards;
    }

    // packed: the documents of the shard being made, packed when it is full. Their tokens are
    // counted already; the padding counts when they are packed.
    void flush_packed() {
        int64_t written = 0;
        for (const auto& e : maker_.packed(std::move(to_pack_))) {
            writer_.add(e, 0);
            written += static_cast<int64_t>(e.ids.size());
        }
        progress_.tokens += written - to_pack_tokens_;
        to_pack_.clear();
        to_pack_bytes_ = 0;
        to_pack_tokens_ = 0;
    }

    const PrepareOptions& o_;
    const Json& settings_;
    const int element_;
    const fs::path state_path_;
    std::vector<Shard> shards_;
    ShardWriter writer_;
    const InstanceMaker maker_;
    Progress& progress_;
    std::vector<Encoded> to_pack_;
    uint64_t to_pack_bytes_ = 0;
    int64_t to_pack_tokens_ = 0;
};

// Calls on_progress at most twice a second (or when forced), with the reader's figures.
class ProgressReport {
public:
    ProgressReport(const PrepareOptions& o, const DocumentReader& reader, Progress& progress)
        : o_(o), reader_(reader), progress_(progress), t0_(Clock::now()), last_(t0_) {}

    void operator()(bool force) {
        const auto now = Clock::now();
        if (!o_.on_progress || (!force && now - last_ < std::chrono::milliseconds(500))) return;
        last_ = now;
        progress_.bytes_done = reader_.bytes_consumed();
        progress_.text_bytes = reader_.text_bytes();
        progress_.seconds = std::chrono::duration<double>(now - t0_).count();
        o_.on_progress(progress_);
    }

private:
    const PrepareOptions& o_;
    const DocumentReader& reader_;
    Progress& progress_;
    Clock::time_point t0_, last_;
};

}  // namespace

Manifest prepare_data(const PrepareOptions& o) {
    const Plan plan = plan_preparation(o);
    Output opened = open_output(o, plan);
    if (opened.done) {
        if (o.on_progress) o.on_progress(Progress{});
        return *opened.done;
    }
    const fs::path out(o.out);
    const fs::path state_path = out / kStateFile;
    const std::string tokenizer_copy = plan.tok->file_name();
    write_atomic(out / tokenizer_copy, read_bytes(o.tokenizer));

    DocumentReader reader(plan.sources, o.field, plan.chat ? FieldKind::json : FieldKind::string);
    reader.on_problem = o.on_problem;
    TokenizerPool pool(encoding_for(o, plan), plan.threads);
    Progress progress = resumed_progress(opened.shards, reader.bytes_total());
    ProgressReport report(o, reader, progress);
    ShardAssembler assembler(o, plan, std::move(opened.shards), progress);
    EncodingPipeline pipeline(reader, pool, plan.threads, opened.resume_at);
    int64_t skipped_lines = 0;  // --unmaskable skip (this run's: a resumed run counts its own)
    std::vector<std::string> skipped;
    try {
        std::shared_ptr<TokenizerPool::Batch> batch;
        TokenizerPool::Tokens tokens;
        while (true) {
            if (o.cancel && o.cancel->load()) {
                pipeline.drain();
                assembler.abandon();
                throw Cancelled{static_cast<int64_t>(assembler.shards().size())};
            }
            if (!pipeline.next(batch, tokens)) break;
            for (std::size_t i = 0; i < batch->size(); ++i) {
                if (!tokens[i].skipped.empty()) {
                    if (skipped.size() < 5) skipped.push_back(tokens[i].skipped);
                    ++skipped_lines;
                    continue;
                }
                assembler.add(std::move(tokens[i]), (*batch)[i].source, (*batch)[i].index);
            }
            report(false);
        }
        assembler.finish();
    } catch (const Cancelled&) {
        throw;
    } catch (...) {
        pipeline.drain();
        assembler.abandon();
        // Bad input before the first shard was finished: nothing worth keeping, so the folder
        // goes back to how it was and the same command works once the input is fixed. Finished
        // shards stay, for a resume.
        if (assembler.shards().empty()) {
            std::error_code ec;
            fs::remove(out / tokenizer_copy, ec);
            fs::remove(state_path, ec);
            if (opened.created) fs::remove(out, ec);  // only when empty
        }
        throw;
    }
    // The template travels with the data: beside the tokenizer copy, where a run's checkpoints,
    // generate --chat, Try it and the Hugging Face export find it (ChatTemplate::load). Written
    // with the manifest, once every shard is there.
    if (plan.chat) plan.chat->save(out.string());
    const auto& shards = assembler.shards();
    if (shards.empty())
        throw Error("no text: every input document is empty (" +
                    std::to_string(plan.sources.size()) + " file(s))");
    Manifest manifest = make_manifest(o, plan, shards, reader, progress, tokenizer_copy);
    if (manifest.chat) {
        manifest.chat->skipped_lines = skipped_lines;
        manifest.chat->skipped = skipped;
    }
    write_atomic(out / kManifestFile, token_files::manifest_json(manifest).dump(2) + "\n");
    std::error_code ec;
    fs::remove(state_path, ec);
    report(true);
    return manifest;
}

}  // namespace lathe::prepare
