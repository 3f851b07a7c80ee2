// lathe-engine prepare-data: text to OLMo-core token files (engine/prepare); and lathe-engine
// dataset: what a config's dataset is, instance by instance (what the model will see).
#include "engine/chat/conversation.h"
#include "engine/cli/cli.h"
#include "engine/config/rules.h"
#include "engine/data/dataset.h"
#include "engine/data/instance_filter.h"
#include "engine/prepare/prepare.h"
#include "engine/protocol/cli_output.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "engine/util/size.h"
#include "engine/util/stop_signals.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

namespace lathe::cli {

namespace {

const char* kPrepareUsage =
    "usage: lathe-engine prepare-data PATHS... --tokenizer FILE --out DIR\n"
    "           [--shard-size 1GB] [--dtype uint16|uint32] [--field text] [--add-bos]\n"
    "           [--eos-id N] [--threads N] [--progress text|json|none]\n"
    "           [--chat [--chat-template FILE] [--train-on assistant|all]\n"
    "                   [--template-arg NAME=VALUE]... [--unmaskable stop|skip]]\n"
    "           [--instances stream|padded|packed --sequence-length N [--pad-id N]]\n"
    "Tokenizes UTF-8 text files (one document each), JSONL files (one document per line, from\n"
    "the --field string) and folders of them, .gz and .zst too, on every core. Writes OLMo-core\n"
    "token files DIR/part-NNNNN.npy (documents separated by EOS) and DIR/manifest.json. An\n"
    "interrupted run (Ctrl-C) keeps its finished shards: run the same command again to go on.\n"
    "--chat: each JSONL line is a conversation (--field messages: role/content objects),\n"
    "rendered with the model's chat template (tokenizer_config.json or chat_template.jinja beside\n"
    "the tokenizer, or --chat-template) and written with label masks DIR/label-mask-NNNNN.npy\n"
    "that train on the assistant's turns only (--train-on all: every token). A line's top-level\n"
    "\"tools\" and \"documents\" reach the template as transformers passes them; --template-arg\n"
    "sets a template variable for every line (enable_thinking=false; VALUE is JSON or a string).\n"
    "--unmaskable skip leaves out (and counts) a line whose assistant turns the template does not\n"
    "let be told apart, instead of stopping at it.\n"
    "--instances padded|packed: each document in instances of its own, or documents packed\n"
    "best-fit into instances, of --sequence-length tokens; the padding is masked out.\n";

// --train-on assistant|all: whether every token is trained.
bool train_on_all(const std::string& v) {
    if (v != "assistant" && v != "all") throw Error("--train-on " + v + ": use assistant or all");
    return v == "all";
}

std::atomic<bool> g_cancel{false};
void on_stop_signal(int, SignalSender) {
    g_cancel.store(true);
}

std::string megabytes(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    return buf;
}

// prepare-data's progress: JSON events (json), a line rewritten in place (text), a line every 5 s
// (text-lines, for logs), or nothing (none).
std::function<void(const prepare::Progress&)> progress_printer(const std::string& progress_mode) {
    const bool json = progress_mode == "json";
    auto last = std::make_shared<double>(-10);
    return [progress_mode, json, last](const prepare::Progress& p) {
        double& last_line = *last;
        const double rate = p.seconds > 0 ? static_cast<double>(p.bytes_done) / p.seconds : 0;
        const double eta = rate > 0 ? static_cast<double>(p.bytes_total - p.bytes_done) / rate : -1;
        if (json) {
            protocol::PrepareProgress e;
            e.bytes_done = static_cast<int64_t>(p.bytes_done);
            e.bytes_total = static_cast<int64_t>(p.bytes_total);
            e.text_bytes = static_cast<int64_t>(p.text_bytes);
            e.tokens = p.tokens;
            e.documents = p.documents;
            e.shards = p.shards;
            e.seconds = p.seconds;
            e.mb_per_s = rate / 1e6;
            e.eta_s = eta;
            std::cout << protocol::write_output(e) << std::endl;
            return;
        }
        if (progress_mode == "none") return;
        if (progress_mode == "text-lines" && p.seconds - last_line < 5) return;
        last_line = p.seconds;
        const double pct = p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0;
        std::fprintf(
            stderr,
            "%sprepare-data: %5.1f%%  %s of %s  %.1f MB/s  ETA %s  %lld tokens  %lld shards%s",
            progress_mode == "text" ? "\r" : "", pct,
            megabytes(static_cast<double>(p.bytes_done)).c_str(),
            megabytes(static_cast<double>(p.bytes_total)).c_str(), rate / 1e6,
            eta < 0 ? "?" : (std::to_string(std::llround(eta)) + " s").c_str(),
            static_cast<long long>(p.tokens), static_cast<long long>(p.shards),
            progress_mode == "text" ? "   " : "\n");
    };
}

// What prepare-data made: a JSON event, or the folder's summary and the command that trains on it.
int report_prepared(const token_files::Manifest& manifest, const std::string& out, bool json) {
    const std::string folder = std::filesystem::absolute(out).lexically_normal().string();
    const std::string tokenizer_copy =
        (std::filesystem::path(folder) / manifest.tokenizer.file).string();
    const int64_t padded = manifest.tokenizer.padded_vocab_size;
    if (json) {
        protocol::PrepareDone done;
        done.folder = folder;
        done.tokenizer = tokenizer_copy;
        done.dtype = manifest.dtype;
        done.tokens = manifest.tokens;
        done.documents = manifest.documents;
        done.shards = static_cast<int64_t>(manifest.shards.size());
        done.trained_tokens = manifest.trained_tokens;
        done.padded_vocab_size = padded;
        std::cout << protocol::write_output(done) << std::endl;
        return kExitOk;
    }
    std::cout << folder << ": " << manifest.tokens << " tokens (" << manifest.dtype << "), "
              << manifest.documents << " documents, " << manifest.shards.size() << " shard(s)\n";
    if (manifest.trained_tokens)
        std::cout << "label masks: the loss is taken on " << *manifest.trained_tokens
                  << " of them ("
                  << (manifest.tokens > 0 ? 100.0 * static_cast<double>(*manifest.trained_tokens) /
                                                static_cast<double>(manifest.tokens)
                                          : 0.0)
                  << "%)\n";
    if (manifest.chat && manifest.chat->skipped_lines > 0) {
        std::cout << manifest.chat->skipped_lines
                  << " line(s) left out: their assistant turns cannot be told apart "
                     "(--unmaskable skip); the first:\n";
        for (const auto& why : manifest.chat->skipped) std::cout << "  " << why << "\n";
    }
    if (manifest.invalid_utf8.count > 0)
        std::cout << "invalid UTF-8 replaced at " << manifest.invalid_utf8.count
                  << " place(s); manifest.json lists the first\n";
    std::cout << "train on it:\n  lathe-engine train tiny dataset.source=numpy 'dataset.paths=[\""
              << folder << "\"]' dataset.tokenizer=" << tokenizer_copy
              << " model.vocab_size=" << padded;
    if (manifest.instance_length() > 0)
        std::cout << " dataset.sequence_length=" << manifest.instance_length();
    std::cout << "\n";
    return kExitOk;
}

}  // namespace

int cmd_prepare_data(const Args& args) {
    prepare::PrepareOptions o;
    std::string progress_mode = isatty(2) ? "text" : "text-lines";
    bool chat = false, field_given = false;
    prepare::ChatOptions chat_options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw Error(a + " needs a value");
            return args[++i];
        };
        if (a == "--tokenizer")
            o.tokenizer = value();
        else if (a == "--out")
            o.out = value();
        else if (a == "--shard-size")
            o.shard_bytes = parse_size(value());
        else if (a == "--dtype")
            o.dtype = value();
        else if (a == "--field") {
            o.field = value();
            field_given = true;
        } else if (a == "--add-bos")
            o.add_bos = true;
        else if (a == "--eos-id")
            o.eos_id = std::stoll(value());
        else if (a == "--threads")
            o.threads = std::stoi(value());
        else if (a == "--progress")
            progress_mode = value();
        else if (a == "--chat")
            chat = true;
        else if (a == "--chat-template")
            chat_options.template_path = value();
        else if (a == "--train-on")
            chat_options.train_on_all = train_on_all(value());
        else if (a == "--template-arg")
            chat::add_template_arg(chat_options.template_args, value());
        else if (a == "--unmaskable") {
            const std::string v = value();
            if (v != "stop" && v != "skip") throw Error("--unmaskable " + v + ": use stop or skip");
            chat_options.skip_unmaskable = v == "skip";
        } else if (a == "--instances") {
            const std::string v = value();
            if (v == "stream")
                o.instances = prepare::Instances::stream;
            else if (v == "padded")
                o.instances = prepare::Instances::padded;
            else if (v == "packed")
                o.instances = prepare::Instances::packed;
            else
                throw Error("--instances " + v + ": use stream, padded or packed");
        } else if (a == "--sequence-length")
            o.sequence_length = std::stoll(value());
        else if (a == "--pad-id")
            o.pad_id = std::stoll(value());
        else if (a == "--help" || a == "-h") {
            std::cout << kPrepareUsage;
            return kExitOk;
        } else if (a.rfind("--", 0) == 0) {
            std::cerr << "lathe-engine prepare-data: unexpected option " << a << "\n"
                      << kPrepareUsage;
            return kExitUsage;
        } else {
            o.paths.push_back(a);
        }
    }
    if (o.paths.empty() || o.tokenizer.empty() || o.out.empty()) {
        std::cerr << kPrepareUsage;
        return kExitUsage;
    }
    if (chat) {
        o.chat = chat_options;
        if (!field_given) o.field = "messages";
    } else if (!chat_options.template_path.empty() || chat_options.train_on_all ||
               !chat_options.template_args.empty() || chat_options.skip_unmaskable) {
        throw Error("--chat-template, --train-on, --template-arg and --unmaskable go with --chat");
    }
    if (progress_mode != "text" && progress_mode != "text-lines" && progress_mode != "json" &&
        progress_mode != "none")
        throw Error("--progress " + progress_mode + ": use text, json or none");
    const bool json = progress_mode == "json";
    o.on_progress = progress_printer(progress_mode);
    o.on_problem = [&](const prepare::Utf8Problem& p) {
        if (json) {
            protocol::PrepareInvalidUtf8 e;
            e.file = p.file;
            e.offset = static_cast<int64_t>(p.offset);
            e.count = static_cast<int64_t>(p.count);
            std::cout << protocol::write_output(e) << std::endl;
        } else {
            std::cerr << "\nwarning: " << prepare::describe_utf8_problem(p) << "\n";
        }
    };
    g_cancel = false;
    o.cancel = &g_cancel;
    StopSignalHandler signals(on_stop_signal);
    token_files::Manifest manifest;
    try {
        manifest = prepare::prepare_data(o);
    } catch (const prepare::Cancelled& c) {
        if (progress_mode == "text") std::cerr << "\n";
        if (json) {
            protocol::PrepareInterrupted e;
            e.kept_shards = static_cast<int64_t>(c.kept_shards);
            std::cout << protocol::write_output(e) << std::endl;
        }
        std::cerr << "lathe-engine prepare-data: interrupted; " << c.kept_shards
                  << " finished shard(s) kept in " << o.out
                  << ". Run the same command again to go on.\n";
        return kExitInterrupted;
    }
    if (progress_mode == "text") std::cerr << "\n";
    return report_prepared(manifest, o.out, json);
}

// lathe-engine chat: conversations rendered and tokenized as prepare-data --chat does, one JSON
// line each ({"text", "ids", "mask"}), or the text alone; what the workbench's chat preview shows.
int cmd_chat(const Args& args) {
    const char* usage =
        "usage: lathe-engine chat FILE.jsonl --tokenizer FILE [--chat-template FILE]\n"
        "           [--field messages] [--train-on assistant|all] [--generation-prompt] [--text]\n"
        "           [--template-arg NAME=VALUE]...\n"
        "Renders each line's conversation with the model's chat template and prints\n"
        "{\"text\", \"ids\", \"mask\"} per line (mask 1: the loss is taken there), or with\n"
        "--text the rendered text alone (--generation-prompt: ready for the assistant's reply).\n";
    std::string file, tokenizer_file, template_path, field = "messages";
    bool all = false, generation_prompt = false, text_only = false;
    nlohmann::ordered_json template_args = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw Error(a + " needs a value");
            return args[++i];
        };
        if (a == "--tokenizer")
            tokenizer_file = value();
        else if (a == "--chat-template")
            template_path = value();
        else if (a == "--field")
            field = value();
        else if (a == "--train-on")
            all = train_on_all(value());
        else if (a == "--generation-prompt")
            generation_prompt = true;
        else if (a == "--template-arg")
            chat::add_template_arg(template_args, value());
        else if (a == "--text")
            text_only = true;
        else if (a == "--help" || a == "-h") {
            std::cout << usage;
            return kExitOk;
        } else if (a.rfind("--", 0) == 0 || !file.empty()) {
            std::cerr << "lathe-engine chat: unexpected argument " << a << "\n" << usage;
            return kExitUsage;
        } else {
            file = a;
        }
    }
    if (file.empty() || tokenizer_file.empty()) {
        std::cerr << usage;
        return kExitUsage;
    }
    const auto tok = tokenizer::load_tokenizer(tokenizer_file);
    std::optional<chat::ChatTemplate> tmpl =
        template_path.empty() ? chat::ChatTemplate::beside_tokenizer(tokenizer_file)
                              : std::make_optional(chat::ChatTemplate::load(template_path));
    if (!tmpl)
        throw Error(tokenizer_file +
                    ": no chat template beside the tokenizer; give "
                    "--chat-template FILE");
    tmpl->update_kwargs(template_args);
    prepare::DocumentReader reader(prepare::list_sources({file}), field, prepare::FieldKind::json);
    prepare::Document doc;
    while (reader.next(doc)) {
        const std::string where = file + ":" + std::to_string(doc.line);
        const auto messages = nlohmann::ordered_json::parse(doc.text);
        const auto context = doc.context.empty() ? nlohmann::ordered_json()
                                                 : nlohmann::ordered_json::parse(doc.context);
        if (text_only) {
            std::string text;
            chat::check_conversation(messages, where, /*need_assistant=*/false);
            chat::check_context(context, where);
            try {
                text = tmpl->render(messages, generation_prompt, context);
            } catch (const Error& e) {
                throw Error(where, e);  // the checks above name the place themselves
            }
            std::cout << text << std::flush;
            continue;
        }
        const auto e = chat::encode_conversation(
            *tmpl, *tok, messages, all ? chat::TrainOn::all : chat::TrainOn::assistant, where,
            context);
        std::cout << nlohmann::json({{"text", e.text}, {"ids", e.ids}, {"mask", e.mask}}).dump()
                  << "\n";
    }
    return kExitOk;
}

int cmd_dataset(const Args& args) {
    auto p = parse_args(args, {"--instances"}, {"--decode", "--plan"});
    config::ExperimentConfig cfg;
    if (!load_config(p, "dataset", cfg)) return kExitUsage;
    if (p.has("--plan")) {  // a mixture's sources: what they hold and need, before building it
        protocol::MixturePlan out;
        out.requested_tokens = *cfg.dataset.mixture.requested_tokens;
        out.ratio_sum = config::mixture_ratio_sum(cfg.dataset.mixture);
        for (const auto& plan : data::TokenDataset::plan_mixture(cfg.dataset, cfg.model.vocab_size))
            out.sources.push_back({plan.name, plan.available_tokens, plan.needed_tokens,
                                   plan.allowed_tokens, plan.repetitions, plan.max_repetition_ratio,
                                   plan.fits()});
        std::cout << protocol::write_output(out) << "\n";
        return kExitOk;
    }
    const auto ds = data::TokenDataset::build(cfg.dataset, cfg.model.vocab_size, {},
                                              cfg.data_loader.global_batch_size);
    std::unique_ptr<tokenizer::Tokenizer> tok;
    if (p.has("--decode") && cfg.dataset.tokenizer)
        tok = tokenizer::load_tokenizer(*cfg.dataset.tokenizer);
    nlohmann::json summary = {{"description", ds->description()},
                              {"fingerprint", ds->fingerprint()},
                              {"sequence_length", ds->sequence_length()},
                              {"instances", ds->num_instances()},
                              {"tokens", ds->total_tokens()}};
    if (!ds->source_names().empty()) {  // a mixture: each source's instances and tokens
        nlohmann::json sources = nlohmann::json::array();
        int64_t begin = 0;
        for (std::size_t s = 0; s < ds->source_names().size(); ++s) {
            int64_t end = begin;
            while (end < ds->num_instances() && ds->source_of(end) == s) ++end;
            sources.push_back({{"name", ds->source_names()[s]},
                               {"instances", end - begin},
                               {"tokens", (end - begin) * ds->sequence_length()}});
            begin = end;
        }
        summary["sources"] = sources;
    }
    std::cout << summary.dump() << "\n";
    const std::string range = p.option("--instances");
    if (range.empty()) return kExitOk;
    const auto colon = range.find(':');
    int64_t begin = 0, end = 0;
    try {
        begin = std::stoll(range.substr(0, colon));
        end = colon == std::string::npos ? begin + 1 : std::stoll(range.substr(colon + 1));
    } catch (const std::exception&) {
        throw Error("--instances " + range + ": use A:B (instances A to B-1) or A");
    }
    end = std::min(end, ds->num_instances());
    if (begin < 0 || begin >= end)
        throw Error("--instances " + range + ": the dataset has " +
                    std::to_string(ds->num_instances()) + " instances");
    std::vector<int64_t> ids(static_cast<std::size_t>(ds->sequence_length()));
    for (int64_t i = begin; i < end; ++i) {
        ds->instance(i, ids.data());
        nlohmann::json j = {{"index", i}, {"ids", ids}};
        if (const auto& filter = ds->instance_filter())  // false: the repetition filter masks it
            j["keep"] = data::passes_instance_filter(ids.data(), ds->sequence_length(), *filter);
        if (tok)
            j["text"] = tok->decode(ids);
        else if (p.has("--decode") && cfg.dataset.tokens_are_bytes())
            j["text"] = std::string(ids.begin(), ids.end());
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return kExitOk;
}

}  // namespace lathe::cli
