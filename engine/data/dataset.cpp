#include "engine/data/dataset.h"
#include "engine/token_files/manifest.h"
#include "engine/tokenizer/tokenizer.h"

#include "engine/config/rules.h"
#include "engine/data/builtin_corpus.h"
#include "engine/run_folder/file_io.h"
#include "engine/util/error.h"
#include "engine/util/log.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace lathe::data {

namespace fs = std::filesystem;

std::shared_ptr<TokenArray> TokenArray::owned(std::vector<uint8_t> bytes, std::string name) {
    std::shared_ptr<TokenArray> a(new TokenArray());
    a->owned_ = std::move(bytes);
    a->data_ = a->owned_.data();
    a->size_ = static_cast<int64_t>(a->owned_.size());
    a->element_size_ = 1;
    a->name_ = std::move(name);
    return a;
}

std::shared_ptr<TokenArray> TokenArray::map_file(const std::string& path, int element_size) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    if (st.st_size == 0) {
        ::close(fd);
        throw Error(path + ": file is empty");
    }
    if (st.st_size % element_size != 0) {
        ::close(fd);
        throw Error(path + ": size " + std::to_string(st.st_size) +
                    " bytes is not a multiple of the token size (" + std::to_string(element_size) +
                    " bytes); is dataset.token_dtype right?");
    }
    void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    ::close(fd);
    if (m == MAP_FAILED) throw Error(path + ": cannot read (mmap): " + std::strerror(e));
    ::madvise(m, static_cast<std::size_t>(st.st_size), MADV_RANDOM);
    std::shared_ptr<TokenArray> a(new TokenArray());
    a->map_ = m;
    a->map_size_ = static_cast<std::size_t>(st.st_size);
    a->data_ = static_cast<const uint8_t*>(m);
    a->element_size_ = element_size;
    a->size_ = static_cast<int64_t>(st.st_size / element_size);
    a->name_ = path;
    return a;
}

TokenArray::~TokenArray() {
    if (map_) ::munmap(map_, map_size_);
}

void TokenArray::read(int64_t offset, int64_t n, int64_t* out) const {
    const uint8_t* p = data_ + offset * element_size_;
    switch (element_size_) {
        case 1:
            for (int64_t i = 0; i < n; ++i) out[i] = p[i];
            break;
        case 2:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t v;
                std::memcpy(&v, p + 2 * i, 2);
                out[i] = v;
            }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) {
                uint32_t v;
                std::memcpy(&v, p + 4 * i, 4);
                out[i] = v;
            }
    }
}

namespace {

template <class T>
int64_t max_of(const uint8_t* data, int64_t n) {
    T best = 0;
    for (int64_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, data + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
        best = v > best ? v : best;
    }
    return static_cast<int64_t>(best);
}

}  // namespace

int64_t TokenArray::max_token() const {
    switch (element_size_) {
        case 1:
            return max_of<uint8_t>(data_, size_);
        case 2:
            return max_of<uint16_t>(data_, size_);
        default:
            return max_of<uint32_t>(data_, size_);
    }
}

int64_t TokenArray::first_at_least(int64_t bound) const {
    constexpr int64_t kChunk = 1 << 16;
    std::vector<int64_t> buf(static_cast<std::size_t>(kChunk));
    for (int64_t off = 0; off < size_; off += kChunk) {
        const int64_t n = std::min(kChunk, size_ - off);
        read(off, n, buf.data());
        for (int64_t i = 0; i < n; ++i)
            if (buf[static_cast<std::size_t>(i)] >= bound) return off + i;
    }
    return -1;
}

namespace {

// The largest token of each raw numpy file, kept in the run folder's token_ranges.json by path,
// size and modification time: read once when the dataset is built, written once after.
class TokenRangeCache {
public:
    explicit TokenRangeCache(std::string file) : file_(std::move(file)) {
        std::error_code ec;
        if (file_.empty() || !fs::exists(file_, ec)) return;
        all_ = nlohmann::json::parse(run_folder::read_text_file(file_), nullptr, false);
        if (!all_.is_object()) all_ = nlohmann::json::object();
    }

    int64_t max_token(const TokenArray& a) {
        std::error_code ec;
        const auto path = fs::absolute(a.name(), ec).string();
        const auto mtime =
            static_cast<int64_t>(fs::last_write_time(a.name(), ec).time_since_epoch().count());
        const auto it = all_.find(path);
        if (it != all_.end() && it->is_object() &&
            it->value("bytes", uint64_t{0}) == a.byte_size() &&
            it->value("mtime", int64_t{0}) == mtime)
            return it->value("max_token", int64_t{-1});
        const int64_t max = a.max_token();
        all_[path] = {{"bytes", a.byte_size()}, {"mtime", mtime}, {"max_token", max}};
        dirty_ = true;
        return max;
    }

    void save() {
        if (file_.empty() || !dirty_) return;
        try {
            run_folder::write_file_atomic(file_, all_.dump(1) + "\n");
            dirty_ = false;
        } catch (const std::exception& e) {
            log::warn("not caching the token ranges in {}: {}", file_, e.what());
        }
    }

private:
    std::string file_;
    nlohmann::json all_ = nlohmann::json::object();
    bool dirty_ = false;
};

// Every token of a raw numpy file below vocab_size, checked once per version of the file.
void check_token_range(const TokenArray& a, int64_t vocab_size, TokenRangeCache& cache) {
    const int64_t max = cache.max_token(a);
    if (max < vocab_size) return;
    cache.save();  // what the files before this one hold stays known
    const int64_t pos = a.first_at_least(vocab_size);
    std::vector<int64_t> token(1);
    a.read(pos, 1, token.data());
    throw Error(a.name() + ": token " + std::to_string(token[0]) + " at position " +
                std::to_string(pos) + " (byte " +
                std::to_string(pos * static_cast<int64_t>(a.element_size())) +
                ") is outside the vocabulary (model.vocab_size = " + std::to_string(vocab_size) +
                "; the file's largest token is " + std::to_string(max) +
                "): is it the right file, dataset.token_dtype or model.vocab_size?");
}

std::vector<std::string> expand_paths(const std::vector<std::string>& paths, std::size_t first,
                                      const std::string& field = "dataset.paths") {
    std::vector<std::string> files;
    for (std::size_t k = 0; k < paths.size(); ++k) {
        const auto& p = paths[k];
        const std::size_t i = first + k;
        std::error_code ec;
        auto st = fs::status(p, ec);
        if (ec || !fs::exists(st))
            throw Error(field + "[" + std::to_string(i) + "]: " + p + ": no such file or folder");
        if (fs::is_directory(st)) {
            std::vector<std::string> found;
            for (auto it = fs::recursive_directory_iterator(
                     p, fs::directory_options::skip_permission_denied, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
                if (it->is_regular_file() && it->path().filename().string()[0] != '.')
                    found.push_back(it->path().string());
            }
            if (ec) throw Error(p + ": cannot list folder: " + ec.message());
            if (found.empty()) throw Error(p + ": folder holds no files");
            std::sort(found.begin(), found.end());
            files.insert(files.end(), found.begin(), found.end());
        } else {
            files.push_back(p);
        }
    }
    return files;
}

// The shards of a prepare-data folder (`where` names it: dataset.paths[i]: DIR), in the
// manifest's order and dtype, after checking its tokenizer against dataset.tokenizer and
// model.vocab_size.
std::vector<std::tuple<std::string, int, std::string, std::string>> manifest_files(
    const config::DatasetConfig& cfg, const std::string& folder, const std::string& where,
    int64_t vocab_size, std::vector<std::pair<int64_t, std::string>>& eos_ids) {
    token_files::Manifest m;
    try {
        m = token_files::read_manifest(folder);
    } catch (const Error& e) {
        throw Error(where, e);
    }
    const std::string made_with =
        m.tokenizer.source.empty() ? m.tokenizer.file : m.tokenizer.source;
    if (cfg.tokenizer) {
        const std::string id = tokenizer::tokenizer_file_id(*cfg.tokenizer);
        if (id != m.tokenizer.id)
            throw Error("dataset.tokenizer: " + *cfg.tokenizer + " (" + id +
                        ") is not the tokenizer " + folder + " was prepared with (" + made_with +
                        ", " + m.tokenizer.id + "; its copy is " +
                        (fs::path(m.folder) / m.tokenizer.file).string() + ")");
    }
    if (m.tokenizer.vocab_size > vocab_size)
        throw Error(where + ": prepared with a tokenizer of " +
                    std::to_string(m.tokenizer.vocab_size) +
                    " tokens, more than model.vocab_size (" + std::to_string(vocab_size) +
                    "); set model.vocab_size=" +
                    std::to_string(tokenizer::padded_vocab_size(m.tokenizer.vocab_size)));
    if (m.instance_length() != 0 && m.instance_length() != cfg.sequence_length)
        throw Error(where + ": prepared as instances of " + std::to_string(m.instance_length()) +
                    " tokens, but dataset.sequence_length is " +
                    std::to_string(cfg.sequence_length) +
                    "; set dataset.sequence_length=" + std::to_string(m.instance_length()));
    eos_ids.emplace_back(m.eos_id, folder);
    std::vector<std::tuple<std::string, int, std::string, std::string>> out;
    for (const auto& s : m.shards)
        out.emplace_back(m.shard_path(s), m.element_size(), m.dtype, m.mask_path(s));
    return out;
}

// The token files of `paths` (the entries of `field`): raw files, folders of them, or (numpy)
// prepare-data folders, as (path, element size, the manifest's dtype and label mask when a
// prepare-data folder gave them).
std::vector<std::tuple<std::string, int, std::string, std::string>> collect_files(
    const config::DatasetConfig& cfg, const std::vector<std::string>& paths,
    const std::string& field, int64_t vocab_size,
    std::vector<std::pair<int64_t, std::string>>& manifest_eos) {
    std::vector<std::tuple<std::string, int, std::string, std::string>> files;
    const int element = cfg.source == config::DataSource::text
                            ? 1
                            : (cfg.token_dtype == config::TokenDType::uint16 ? 2 : 4);
    for (std::size_t i = 0; i < paths.size(); ++i) {
        const std::string& p = paths[i];
        if (cfg.source == config::DataSource::numpy && token_files::has_manifest(p)) {
            const std::string where = field + "[" + std::to_string(i) + "]: " + p;
            for (auto& f : manifest_files(cfg, p, where, vocab_size, manifest_eos))
                files.push_back(std::move(f));
            continue;
        }
        for (auto& f : expand_paths({p}, i, field))
            files.emplace_back(std::move(f), element, "", "");
    }
    return files;
}

// Document masking's EOS id: dataset.eos_token_id, else the prepared folders' (which must agree),
// else dataset.tokenizer's.
int64_t resolve_doc_eos(const config::DatasetConfig& cfg,
                        const std::vector<std::pair<int64_t, std::string>>& manifest_eos) {
    if (cfg.eos_token_id) return *cfg.eos_token_id;
    if (!manifest_eos.empty()) {
        for (const auto& [id, folder] : manifest_eos)
            if (id != manifest_eos.front().first)
                throw Error("dataset.generate_doc_lengths: " + manifest_eos.front().second +
                            " ends documents with token " +
                            std::to_string(manifest_eos.front().first) + " but " + folder +
                            " with " + std::to_string(id) + "; set dataset.eos_token_id");
        return manifest_eos.front().first;
    }
    if (cfg.tokenizer) {
        if (auto eos = tokenizer::load_tokenizer(*cfg.tokenizer)->eos_id()) return *eos;
        throw Error("dataset.generate_doc_lengths: dataset.tokenizer " + *cfg.tokenizer +
                    " has no EOS token; set dataset.eos_token_id");
    }
    throw Error(
        "dataset.generate_doc_lengths: no token ends a document: dataset.paths holds no "
        "prepare-data folder (whose manifest names its eos_id) and dataset.tokenizer is null; "
        "set dataset.eos_token_id");
}

}  // namespace

torch::Tensor document_ids(const torch::Tensor& input_ids, int64_t eos_id) {
    auto eos = input_ids.eq(eos_id).to(torch::kInt64);
    return eos.cumsum(1) - eos;  // the EOS itself belongs to the document it ends
}

void TokenDataset::add_label_masks(TokenDataset& ds, const config::DatasetConfig& cfg,
                                   std::size_t num_files, std::ostringstream& fp) {
    // OLMo-core's label_mask_paths: one mask file per token file, one byte per token.
    if (cfg.label_mask_paths.size() != cfg.paths.size() || num_files != cfg.paths.size())
        throw Error("dataset.label_mask_paths: " + std::to_string(cfg.label_mask_paths.size()) +
                    " mask file(s) for " + std::to_string(num_files) +
                    " token file(s); with masks, every entry of dataset.paths must be one token "
                    "file (not a folder) and have its mask at the same position");
    for (std::size_t i = 0; i < cfg.label_mask_paths.size(); ++i) {
        const std::string& m = cfg.label_mask_paths[i];
        const std::string where = "dataset.label_mask_paths[" + std::to_string(i) + "]: " + m;
        std::error_code ec;
        if (!fs::is_regular_file(m, ec)) throw Error(where + ": no such file");
        auto mask = TokenArray::map_file(m, 1);
        const auto& tokens = ds.files_[i];
        if (mask->size() != tokens->size())
            throw Error(where + ": " + std::to_string(mask->size()) +
                        " bytes, but its token file " + tokens->name() + " holds " +
                        std::to_string(tokens->size()) +
                        " tokens; a label mask has one byte per token");
        fp << ";mask=" << fs::path(m).filename().string() << ",bytes=" << mask->byte_size();
        ds.masks_.push_back(std::move(mask));
    }
}

void TokenDataset::add_manifest_masks(
    TokenDataset& ds, const config::DatasetConfig& cfg,
    const std::vector<std::tuple<std::string, int, std::string, std::string>>& files,
    std::ostringstream& fp) {
    // Label masks that prepare-data wrote (chat data, padded or packed instances): every file
    // must have one, or none.
    std::size_t with = 0;
    for (const auto& f : files) with += std::get<3>(f).empty() ? 0 : 1;
    if (with == 0) return;
    if (!cfg.label_mask_paths.empty())
        throw Error(
            "dataset.label_mask_paths: dataset.paths holds a prepared folder with label "
            "masks of its own; give one or the other");
    if (with != files.size())
        throw Error("dataset.paths: " + std::to_string(with) + " of " +
                    std::to_string(files.size()) +
                    " token files have label masks (prepared with --chat or --instances); "
                    "training needs all or none of them masked");
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string& m = std::get<3>(files[i]);
        auto mask = TokenArray::map_file(m, 1);
        if (mask->size() != ds.files_[i]->size())
            throw Error(m + ": " + std::to_string(mask->size()) + " bytes, but its token file " +
                        ds.files_[i]->name() + " holds " + std::to_string(ds.files_[i]->size()) +
                        " tokens; a label mask has one byte per token");
        fp << ";mask=" << fs::path(m).filename().string() << ",bytes=" << mask->byte_size();
        ds.masks_.push_back(std::move(mask));
    }
}

std::shared_ptr<TokenDataset> TokenDataset::build(const config::DatasetConfig& cfg,
                                                  int64_t vocab_size,
                                                  const std::string& range_cache,
                                                  int64_t global_batch_size) {
    auto ds = std::make_shared<TokenDataset>();
    ds->seq_len_ = cfg.sequence_length;
    ds->vocab_size_ = vocab_size;
    std::ostringstream fp;
    fp << "lathe-fsl-v1;source=" << config::enum_to_string(cfg.source)
       << ";seq=" << cfg.sequence_length;
    std::vector<std::pair<int64_t, std::string>> manifest_eos;
    if (cfg.mixture.enabled()) {
        if (cfg.source != config::DataSource::numpy || !cfg.paths.empty())
            throw Error(
                "dataset.mixture: needs dataset.source numpy and dataset.paths empty (its "
                "sources name the files)");
        add_mixture(*ds, cfg, vocab_size, global_batch_size, range_cache, manifest_eos, fp);
    } else if (cfg.source == config::DataSource::builtin) {
        auto bytes =
            generate_builtin_corpus(cfg.builtin_tokens, static_cast<uint64_t>(cfg.builtin_seed));
        ds->files_.push_back(TokenArray::owned(std::move(bytes), "builtin"));
        fp << ";builtin_tokens=" << cfg.builtin_tokens << ";builtin_seed=" << cfg.builtin_seed;
        ds->description_ = "built-in corpus (" + std::to_string(cfg.builtin_tokens) +
                           " tokens, seed " + std::to_string(cfg.builtin_seed) + ")";
    } else {
        const auto files = collect_files(cfg, cfg.paths, "dataset.paths", vocab_size, manifest_eos);
        TokenRangeCache ranges(range_cache);
        for (const auto& [f, elem, dtype, mask] : files) {
            auto a = TokenArray::map_file(f, elem);
            if (a->size() < cfg.sequence_length) {
                throw Error(f + ": too short: " + std::to_string(a->size()) +
                            " tokens, fewer than one instance of " +
                            std::to_string(cfg.sequence_length) + " (dataset.sequence_length)");
            }
            if (cfg.source == config::DataSource::numpy) check_token_range(*a, vocab_size, ranges);
            fp << ";file=" << fs::path(f).filename().string() << ",bytes=" << a->byte_size();
            if (!dtype.empty()) fp << ",dtype=" << dtype;
            ds->files_.push_back(std::move(a));
        }
        ranges.save();
        if (!cfg.label_mask_paths.empty()) add_label_masks(*ds, cfg, files.size(), fp);
        add_manifest_masks(*ds, cfg, files, fp);
        ds->description_ = std::to_string(files.size()) + " " + config::enum_to_string(cfg.source) +
                           " file(s)" + (ds->masks_.empty() ? "" : " with label masks");
        if (cfg.source == config::DataSource::numpy)
            fp << ";dtype=" << config::enum_to_string(cfg.token_dtype);
    }
    if (cfg.generate_doc_lengths) {
        if (cfg.source == config::DataSource::numpy) {
            ds->doc_eos_ = resolve_doc_eos(cfg, manifest_eos);
        } else if (!cfg.eos_token_id) {
            throw Error(
                "dataset.eos_token_id: dataset.generate_doc_lengths needs the token that "
                "ends a document, and the " +
                config::enum_to_string(cfg.source) +
                " source's tokens are bytes with no EOS of their own; set it (10 ends documents "
                "at newlines)");
        } else {
            ds->doc_eos_ = cfg.eos_token_id;
        }
    }
    if (ds->doc_eos_ && *ds->doc_eos_ >= vocab_size)
        throw Error("dataset.eos_token_id: " + std::to_string(*ds->doc_eos_) +
                    " is outside the vocabulary (model.vocab_size = " + std::to_string(vocab_size) +
                    ")");
    if (ds->doc_eos_)
        ds->description_ += ", documents masked at token " + std::to_string(*ds->doc_eos_);
    ds->instance_filter_ = cfg.instance_filter_config;
    if (const auto& f = ds->instance_filter_)
        ds->description_ += ", repetition filter (periods " +
                            std::to_string(f->repetition_min_period) + "-" +
                            std::to_string(f->repetition_max_period) + ", " +
                            std::to_string(f->repetition_max_count) + " repeats)";
    if (!cfg.mixture.enabled()) {  // every whole instance of every file, in order
        for (int32_t f = 0; f < static_cast<int32_t>(ds->files_.size()); ++f) {
            int64_t n = ds->files_[static_cast<std::size_t>(f)]->size() / ds->seq_len_;
            for (int64_t i = 0; i < n; ++i) ds->starts_.emplace_back(f, i * ds->seq_len_);
            ds->total_tokens_ += ds->files_[static_cast<std::size_t>(f)]->size();
        }
    }
    ds->fingerprint_ = fnv1a_hex(fp.str());
    return ds;
}

namespace {

// What source `src` with `population` tokens is asked for (one definition for the plan and the
// build).
MixtureSourcePlan plan_source(const config::MixtureSourceConfig& src, int64_t population,
                              int64_t requested) {
    MixtureSourcePlan p;
    p.name = src.source_name;
    p.available_tokens = population;
    p.needed_tokens = static_cast<int64_t>(static_cast<double>(requested) * src.target_ratio);
    p.allowed_tokens = static_cast<int64_t>(static_cast<double>(population) *
                                            src.max_source_fraction * src.max_repetition_ratio);
    const double usable = static_cast<double>(population) * src.max_source_fraction;
    p.repetitions = usable > 0 ? static_cast<double>(p.needed_tokens) / usable
                               : (p.needed_tokens > 0 ? INFINITY : 0.0);
    p.max_repetition_ratio = src.max_repetition_ratio;
    return p;
}

std::string plan_error(std::size_t s, const config::MixtureSourceConfig& src,
                       const MixtureSourcePlan& p, int64_t requested) {
    char need[32];
    std::snprintf(need, sizeof need, "%.3f", p.repetitions);
    return "dataset.mixture.sources[" + std::to_string(s) + "] (" + src.source_name + "): needs " +
           std::to_string(p.needed_tokens) + " tokens (target_ratio " +
           std::to_string(src.target_ratio) + " of requested_tokens " + std::to_string(requested) +
           ") but has " + std::to_string(p.available_tokens) +
           ", and max_source_fraction x max_repetition_ratio allow " +
           std::to_string(p.allowed_tokens) + "; that needs max_repetition_ratio >= " + need +
           ", or a smaller target_ratio or requested_tokens";
}

// A mixture's settings, checked before any file is read: the tokens requested, whole instances
// per batch, and ratios that sum to 1.
void check_mixture(const config::DatasetConfig& cfg, int64_t global_batch_size) {
    const auto& mix = cfg.mixture;
    const int64_t L = cfg.sequence_length;
    if (auto problem = config::mixture_tokens_problem(mix))
        throw Error("dataset.mixture.requested_tokens: " + *problem);
    if (global_batch_size <= 0 || global_batch_size % L != 0)
        throw Error(
            "dataset.mixture: data_loader.global_batch_size (" + std::to_string(global_batch_size) +
            ") must be a positive multiple of dataset.sequence_length (" + std::to_string(L) + ")");
    if (auto problem = config::mixture_ratio_problem(mix))
        throw Error("dataset.mixture.sources: " + *problem);
}

// Tokens wanted from one file in one repeat (OLMo-core's SourcePathTokens).
struct MixtureEntry {
    int32_t file;
    int64_t tokens, max_tokens;
    std::size_t source;
};

// Every source's entries: its share of each of its files, the files again, whole, for every
// repeat past the first. file_sizes: tokens per mapped file.
std::vector<MixtureEntry> mixture_entries(const config::SourceMixtureConfig& mix,
                                          const std::vector<std::vector<int32_t>>& source_files,
                                          const std::vector<int64_t>& file_sizes,
                                          int64_t requested) {
    std::vector<MixtureEntry> entries;
    for (std::size_t s = 0; s < mix.sources.size(); ++s) {
        const auto& src = mix.sources[s];
        int64_t population = 0;
        for (auto f : source_files[s]) population += file_sizes[static_cast<std::size_t>(f)];
        const MixtureSourcePlan plan = plan_source(src, population, requested);
        const int64_t needed = plan.needed_tokens;
        if (!plan.fits()) throw Error(plan_error(s, src, plan, requested));
        const double take = population > 0 ? static_cast<double>(needed) / population : 0.0;
        std::vector<double> passes;
        if (take > 1) {
            for (double remaining = take; remaining > 0;) {
                const double chunk = std::min(1.0, remaining);
                passes.push_back(chunk);
                remaining -= chunk;
            }
        } else {
            passes.push_back(take);
        }
        for (double r : passes)
            for (auto f : source_files[s]) {
                const int64_t avail = file_sizes[static_cast<std::size_t>(f)];
                entries.push_back(
                    {f, static_cast<int64_t>(std::ceil(static_cast<double>(avail) * r)), avail, s});
            }
    }
    return entries;
}

// Whole instances per entry, `wanted` in all where the files allow: each entry's floor, the
// shortfall spread evenly over the entries with room, then one more to the largest remainders
// (OLMo-core's rounding).
std::vector<int64_t> instances_per_entry(const std::vector<MixtureEntry>& entries, int64_t L,
                                         int64_t wanted) {
    std::vector<int64_t> count(entries.size()), cap(entries.size());
    std::vector<double> remainder(entries.size());
    int64_t total = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        cap[i] = entries[i].max_tokens / L;
        count[i] = std::min(entries[i].tokens / L, cap[i]);
        remainder[i] = count[i] < cap[i] ? static_cast<double>(entries[i].tokens % L) / L : 0.0;
        total += count[i];
    }
    if (wanted - total <= 0) return count;
    std::vector<std::size_t> eligible;
    for (std::size_t i = 0; i < entries.size(); ++i)
        if (count[i] < cap[i]) eligible.push_back(i);
    if (eligible.empty()) return count;
    const int64_t each = (wanted - total) / static_cast<int64_t>(eligible.size());
    if (each > 0)
        for (auto i : eligible) {
            const int64_t add = std::min(each, cap[i] - count[i]);
            count[i] += add;
            total += add;
        }
    std::vector<std::pair<double, std::size_t>> cands;
    for (auto i : eligible)
        if (count[i] < cap[i]) cands.emplace_back(remainder[i], i);
    std::sort(cands.rbegin(), cands.rend());  // largest first; ties: the later entry
    for (std::size_t k = 0; k < cands.size() && total < wanted; ++k) {
        ++count[cands[k].second];
        ++total;
    }
    return count;
}

// A mixture source's empty token file holds no instances: OLMo-core skips it, and so does Lathe,
// with a warning naming it (a source left with no tokens at all is refused by its plan).
bool skip_empty_source_file(const std::string& path, const std::string& field) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || size != 0) return false;  // missing or unreadable: map_file says why
    log::warn("{}: {} is empty; skipped (it holds no tokens)", field, path);
    return true;
}

}  // namespace

std::vector<MixtureSourcePlan> TokenDataset::plan_mixture(const config::DatasetConfig& cfg,
                                                          int64_t vocab_size) {
    const auto& mix = cfg.mixture;
    if (!mix.enabled()) throw Error("dataset.mixture.sources: empty (no mixture to plan)");
    if (!mix.requested_tokens)
        throw Error(
            "dataset.mixture.requested_tokens: a mixture needs the tokens it holds (its "
            "sources' ratios divide them)");
    std::vector<std::pair<int64_t, std::string>> manifest_eos;
    std::map<std::string, int64_t> sizes;  // each file mapped once
    std::vector<MixtureSourcePlan> plans;
    for (std::size_t s = 0; s < mix.sources.size(); ++s) {
        const auto& src = mix.sources[s];
        const std::string field = "dataset.mixture.sources[" + std::to_string(s) + "]";
        if (src.source_name.empty()) throw Error(field + ".source_name: empty");
        if (src.paths.empty()) throw Error(field + ".paths: empty (" + src.source_name + ")");
        int64_t population = 0;
        for (const auto& f :
             collect_files(cfg, src.paths, field + ".paths", vocab_size, manifest_eos)) {
            if (skip_empty_source_file(std::get<0>(f), field + ".paths")) continue;
            const std::string key = fs::absolute(std::get<0>(f)).lexically_normal().string();
            auto it = sizes.find(key);
            if (it == sizes.end())
                it =
                    sizes.emplace(key, TokenArray::map_file(std::get<0>(f), std::get<1>(f))->size())
                        .first;
            population += it->second;
        }
        plans.push_back(plan_source(src, population, *mix.requested_tokens));
    }
    return plans;
}

void TokenDataset::add_mixture(TokenDataset& ds, const config::DatasetConfig& cfg,
                               int64_t vocab_size, int64_t global_batch_size,
                               const std::string& range_cache,
                               std::vector<std::pair<int64_t, std::string>>& manifest_eos,
                               std::ostringstream& fp) {
    // OLMo-core's SourceMixtureDatasetConfig.build and NumpyFSLDatasetMixture: no sampling; each
    // source's share is a prefix of each of its files (the files again, whole, for every repeat),
    // rounded to whole instances so that the mixture fills whole global batches.
    check_mixture(cfg, global_batch_size);
    const auto& mix = cfg.mixture;
    const int64_t L = cfg.sequence_length;
    const int64_t requested = *mix.requested_tokens;

    // The files of every source, each mapped once however many sources or repeats use it.
    std::map<std::string, int32_t> file_index;
    std::vector<std::tuple<std::string, int, std::string, std::string>> mapped;
    std::vector<std::vector<int32_t>> source_files(mix.sources.size());
    TokenRangeCache ranges(range_cache);
    std::set<std::string> names;
    for (std::size_t s = 0; s < mix.sources.size(); ++s) {
        const auto& src = mix.sources[s];
        const std::string field = "dataset.mixture.sources[" + std::to_string(s) + "]";
        if (src.source_name.empty()) throw Error(field + ".source_name: empty");
        if (!names.insert(src.source_name).second)
            throw Error(field + ".source_name: " + src.source_name + " is used twice");
        if (src.paths.empty()) throw Error(field + ".paths: empty (" + src.source_name + ")");
        for (const auto& f :
             collect_files(cfg, src.paths, field + ".paths", vocab_size, manifest_eos)) {
            if (skip_empty_source_file(std::get<0>(f), field + ".paths")) continue;
            const std::string key = fs::absolute(std::get<0>(f)).lexically_normal().string();
            auto it = file_index.find(key);
            if (it == file_index.end()) {
                auto a = TokenArray::map_file(std::get<0>(f), std::get<1>(f));
                check_token_range(*a, vocab_size, ranges);
                it = file_index.emplace(key, static_cast<int32_t>(ds.files_.size())).first;
                ds.files_.push_back(std::move(a));
                mapped.push_back(f);
            }
            source_files[s].push_back(it->second);
        }
    }
    ranges.save();
    add_manifest_masks(ds, cfg, mapped, fp);

    std::vector<int64_t> file_sizes;
    for (const auto& f : ds.files_) file_sizes.push_back(f->size());
    const auto entries = mixture_entries(mix, source_files, file_sizes, requested);
    const auto steps = static_cast<int64_t>(
        std::ceil(static_cast<double>(requested) / static_cast<double>(global_batch_size)));
    const int64_t wanted = steps * (global_batch_size / L);
    const auto count = instances_per_entry(entries, L, wanted);

    // Instances: each entry's windows from the start of its file, in entry order.
    std::vector<int64_t> source_tokens(mix.sources.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto& e = entries[i];
        if (count[i] == 0) continue;
        for (int64_t k = 0; k < count[i]; ++k) ds.starts_.emplace_back(e.file, k * L);
        source_tokens[e.source] += count[i] * L;
        fp << ";entry="
           << fs::path(ds.files_[static_cast<std::size_t>(e.file)]->name()).filename().string()
           << ",bytes=" << ds.files_[static_cast<std::size_t>(e.file)]->byte_size()
           << ",instances=" << count[i];
    }
    fp << ";dtype=" << config::enum_to_string(cfg.token_dtype) << ";mixture";
    int64_t end = 0;
    for (std::size_t s = 0; s < mix.sources.size(); ++s) {
        ds.source_names_.push_back(mix.sources[s].source_name);
        end += source_tokens[s] / L;
        ds.source_end_.push_back(end);
        fp << ";source=" << mix.sources[s].source_name;
    }
    ds.total_tokens_ = static_cast<int64_t>(ds.starts_.size()) * L;
    int64_t total = 0;
    for (auto c : count) total += c;
    if (wanted != total)
        log::warn(
            "dataset.mixture: {} instances, short of the {} that {} batches need (every "
            "file is used whole)",
            total, wanted, steps);
    for (std::size_t s = 0; s < mix.sources.size(); ++s)
        log::info("mixture: {}: {} tokens ({:.4f} of {}, target {:.4f})",
                  mix.sources[s].source_name, source_tokens[s],
                  static_cast<double>(source_tokens[s]) / static_cast<double>(ds.total_tokens_),
                  ds.total_tokens_, mix.sources[s].target_ratio);
    ds.description_ = "mixture of " + std::to_string(mix.sources.size()) + " sources (" +
                      std::to_string(ds.files_.size()) + " numpy file(s)" +
                      (ds.masks_.empty() ? "" : " with label masks") + ")";
}

std::size_t TokenDataset::source_of(int64_t i) const {
    if (source_end_.empty()) return 0;
    // A slice keeps the full dataset's instance numbers only without a mixture (a mixture has no
    // validation split), so i indexes the mixture's own instances.
    return static_cast<std::size_t>(std::upper_bound(source_end_.begin(), source_end_.end(), i) -
                                    source_end_.begin());
}

void TokenDataset::instance(int64_t i, int64_t* out) const {
    const auto& [f, off] = starts_.at(static_cast<std::size_t>(i));
    const auto& file = files_[static_cast<std::size_t>(f)];
    file->read(off, seq_len_, out);
    for (int64_t k = 0; k < seq_len_; ++k) {
        if (out[k] >= vocab_size_) {
            throw Error(file->name() + ": token " + std::to_string(out[k]) + " at position " +
                        std::to_string(off + k) +
                        " is outside the vocabulary (model.vocab_size = " +
                        std::to_string(vocab_size_) + ")");
        }
    }
}

void TokenDataset::instance_mask(int64_t i, bool* out) const {
    const auto& [f, off] = starts_.at(static_cast<std::size_t>(i));
    std::vector<int64_t> bytes(static_cast<std::size_t>(seq_len_));
    masks_.at(static_cast<std::size_t>(f))->read(off, seq_len_, bytes.data());
    for (int64_t k = 0; k < seq_len_; ++k) out[k] = bytes[static_cast<std::size_t>(k)] != 0;
}

std::string TokenDataset::describe_instance(int64_t i) const {
    const auto& [f, off] = starts_.at(static_cast<std::size_t>(i));
    return files_.at(static_cast<std::size_t>(f))->name() + ", tokens " + std::to_string(off) +
           "-" + std::to_string(off + seq_len_ - 1);
}

std::shared_ptr<TokenDataset> TokenDataset::slice(int64_t begin, int64_t end,
                                                  const std::string& label) const {
    auto ds = std::make_shared<TokenDataset>(*this);
    ds->starts_.assign(starts_.begin() + begin, starts_.begin() + end);
    ds->fingerprint_ = fnv1a_hex(fingerprint_ + ";" + label + "=" + std::to_string(begin) + ":" +
                                 std::to_string(end));
    ds->description_ = description_ + ", " + label + " split";
    return ds;
}

DataSplit build_split(const config::DatasetConfig& cfg, int64_t vocab_size,
                      const std::string& range_cache, int64_t global_batch_size) {
    if (cfg.mixture.enabled() && cfg.validation_fraction > 0)
        throw Error(
            "dataset.validation_fraction: a mixture's instances are grouped by source, so "
            "a held-out tail would hold the last source only; use 0 with dataset.mixture");
    auto full = TokenDataset::build(cfg, vocab_size, range_cache, global_batch_size);
    const int64_t n = full->num_instances();
    int64_t n_val = 0;
    if (cfg.validation_fraction > 0)
        n_val = std::max<int64_t>(1, static_cast<int64_t>(n * cfg.validation_fraction));
    if (n - n_val < 1) {
        throw Error("dataset: " + std::to_string(n) + " instances of " +
                    std::to_string(cfg.sequence_length) +
                    " tokens leave none for training after the validation split");
    }
    DataSplit s;
    s.train = n_val > 0 ? full->slice(0, n - n_val, "train") : full;
    if (n_val > 0) s.validation = full->slice(n - n_val, n, "validation");
    return s;
}

}  // namespace lathe::data
