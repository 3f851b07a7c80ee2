// sampler: text generated from the model while it trains. Every `interval` steps and at the end,
// rank 0 generates from each prompt and appends one line per prompt to samples.jsonl in the run
// folder; the control channel forwards them to the GUI. Generation runs without gradients, in eval
// mode (restored after), from a generator of its own seeded the same way every time, so the run's
// losses are bitwise the same with the sampler on or off, and the samples of two steps differ
// only by what the model learned in between.
#include "engine/model/generate.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/train_module.h"
#include "engine/train/trainer.h"
#include "engine/util/log.h"

#include <chrono>
#include <fstream>

namespace lathe::train {

namespace {

std::string ids_text(const std::vector<int64_t>& ids) {
    std::string s;
    for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
    return s;
}

// Bytes as text; an id that is no byte (a vocabulary wider than 256) becomes U+FFFD.
std::string bytes_text(const std::vector<int64_t>& ids) {
    std::string s;
    for (auto id : ids)
        s += id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
    return s;
}

class Sampler : public Callback {
public:
    explicit Sampler(const config::SamplerConfig& c) : cfg_(c) {}

    void post_attach() override {
        const auto& dataset = trainer().config().dataset;
        bytes_ = dataset.tokens_are_bytes();
        if (dataset.tokenizer) tokenizer_ = tokenizer::load_tokenizer(*dataset.tokenizer);
        for (const auto& p : cfg_.prompts) {
            std::vector<int64_t> ids;
            if (tokenizer_) {
                ids = tokenizer_->encode(p);
            } else {
                for (unsigned char ch : p) ids.push_back(ch);
            }
            prompts_.push_back(ids);
            labels_.push_back(p);
        }
        for (const auto& ids : cfg_.prompt_ids) {
            prompts_.push_back(ids);
            labels_.push_back(text_of(ids));
        }
    }

    void post_step() override {
        if (step() % cfg_.interval == 0) sample();
    }
    void post_train() override {
        if (last_ != step()) sample();
    }

private:
    void sample() {
        last_ = step();
        auto& tm = trainer().train_module();
        const auto& layout = trainer().env().layout();
        const bool sharded =
            (layout.shard > 1 && layout.strategy != config::DataParallelType::ddp) || layout.tp > 1;
        // Under FSDP, HSDP or TP every rank takes part in gathering the parameters; rank 0
        // generates.
        std::map<std::string, torch::Tensor> gathered;
        if (sharded) gathered = tm.full_model_parameters();
        if (trainer().env().rank() != 0) return;
        const auto t0 = std::chrono::steady_clock::now();
        model::Transformer net = tm.model();
        if (sharded) {
            net = model::Transformer(trainer().config().model);
            torch::NoGradGuard no_grad;
            for (auto& p : net->named_parameters()) p.value().copy_(gathered.at(p.key()));
            net->to(trainer().env().device());
            gathered.clear();
        }
        model::GenerateOptions o;
        o.max_new_tokens = cfg_.max_new_tokens;
        o.temperature = cfg_.temperature;
        o.top_k = cfg_.top_k;
        o.top_p = cfg_.top_p;
        o.seed = static_cast<uint64_t>(cfg_.seed);
        if (tokenizer_ && tokenizer_->eos_id()) o.stop_ids.push_back(*tokenizer_->eos_id());
        if (tokenizer_) o.sample_vocab = tokenizer_->vocab_size();
        // Without autocast, as a user's `generate` would run; the model's mode is restored.
        const auto gens = model::generate(net, prompts_, o);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        nlohmann::json samples = nlohmann::json::array();
        std::string lines;
        const nlohmann::json settings = {{"max_new_tokens", o.max_new_tokens},
                                         {"temperature", o.temperature},
                                         {"top_k", o.top_k},
                                         {"top_p", o.top_p},
                                         {"seed", cfg_.seed}};
        for (std::size_t i = 0; i < gens.size(); ++i) {
            const std::string text = text_of(gens[i].ids);
            nlohmann::json line = {{"step", step()},       {"time", run_folder::iso_time_now()},
                                   {"prompt", labels_[i]}, {"prompt_ids", prompts_[i]},
                                   {"text", text},         {"ids", gens[i].ids},
                                   {"settings", settings}};
            lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
            samples.push_back({{"prompt", labels_[i]}, {"text", text}});
        }
        const std::string path =
            run_folder::join(trainer().save_folder(), run_folder::kSamplesFile);
        std::ofstream f(path, std::ios::app | std::ios::binary);
        f << lines;
        f.flush();
        if (!f) log::warn("sampler: cannot append to {}", path);
        log::info("sampler: step {}: {} samples in {:.2f} s{}", step(), gens.size(), seconds,
                  gens.empty() ? ""
                               : ": " + labels_[0] + "|" +
                                     samples[0]["text"].get<std::string>().substr(0, 60));
        trainer().publish_samples(step(), samples);
    }

    std::string text_of(const std::vector<int64_t>& ids) const {
        if (tokenizer_) return tokenizer_->decode(ids, /*skip_special=*/true);
        return bytes_ ? bytes_text(ids) : ids_text(ids);
    }

    config::SamplerConfig cfg_;
    bool bytes_ = true;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    std::vector<std::vector<int64_t>> prompts_;
    std::vector<std::string> labels_;
    int64_t last_ = -1;
};

}  // namespace

std::unique_ptr<Callback> make_sampler(const config::SamplerConfig& c) {
    return std::make_unique<Sampler>(c);
}

}  // namespace lathe::train
