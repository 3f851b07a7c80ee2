// lathe-engine tokenizer: encode and decode with a tokenizer file, describe one, and train a
// SentencePiece one.
#include "engine/cli/cli.h"
#include "engine/prepare/documents.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace lathe::cli {

namespace {

const char* kTokenizerUsage =
    "usage: lathe-engine tokenizer info FILE\n"
    "       lathe-engine tokenizer encode FILE (--text TEXT | --jsonl PATH [--decode]) "
    "[--special]\n"
    "       lathe-engine tokenizer decode FILE --ids 1,2,3 [--skip-special]\n"
    "       lathe-engine tokenizer train PATHS... --vocab-size N --out FILE [--type bpe|unigram]\n"
    "               [--field text] [--max-sentences 2000000] [--character-coverage 0.9995]\n"
    "               [--no-byte-fallback] [--threads N] [--seed 0]\n"
    "FILE is a Hugging Face tokenizer.json (byte-level BPE) or a SentencePiece model. train makes\n"
    "a SentencePiece model from text files, JSONL files (the --field string; .gz/.zst too) and\n"
    "folders of them, line by line, lossless (no normalization, bytes for rare characters).\n"
    "--jsonl reads {\"text\": ...} lines\n"
    "and prints {\"ids\": [...]} lines (--decode adds \"decoded\": the ids as text again);\n"
    "--special adds the post-processor's tokens (BOS ...).\n";

nlohmann::json describe(const tokenizer::Tokenizer& tok) {
    nlohmann::json j = {{"path", tok.path()},
                        {"id", tok.id()},
                        {"type", tok.kind()},
                        {"vocab_size", tok.vocab_size()},
                        {"padded_vocab_size", tokenizer::padded_vocab_size(tok.vocab_size())}};
    j["bos_id"] = tok.bos_id() ? nlohmann::json(*tok.bos_id()) : nlohmann::json(nullptr);
    j["eos_id"] = tok.eos_id() ? nlohmann::json(*tok.eos_id()) : nlohmann::json(nullptr);
    return j;
}

int64_t int_option(const std::string& name, const std::string& text) {
    try {
        std::size_t used = 0;
        const int64_t v = std::stoll(text, &used);
        if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    throw Error(name + ": '" + text + "' is not a whole number");
}

int train(const Args& args) {
    std::vector<std::string> paths;
    std::map<std::string, std::string> options;
    tokenizer::SentencePieceTrainOptions o;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--no-byte-fallback") {
            o.byte_fallback = false;
        } else if (a.rfind("--", 0) == 0) {
            if (i + 1 >= args.size()) {
                std::cerr << "lathe-engine tokenizer train: " << a << " needs a value\n";
                return kExitUsage;
            }
            options[a] = args[++i];
        } else {
            paths.push_back(a);
        }
    }
    for (const auto& [k, v] : options) {
        if (k == "--vocab-size")
            o.vocab_size = int_option(k, v);
        else if (k == "--type")
            o.model_type = v;
        else if (k == "--max-sentences")
            o.max_sentences = int_option(k, v);
        else if (k == "--threads")
            o.threads = static_cast<int>(int_option(k, v));
        else if (k == "--seed")
            o.seed = static_cast<uint32_t>(int_option(k, v));
        else if (k == "--character-coverage")
            o.character_coverage = std::stod(v);
        else if (k != "--out" && k != "--field") {
            std::cerr << "lathe-engine tokenizer train: unexpected option " << k << "\n"
                      << kTokenizerUsage;
            return kExitUsage;
        }
    }
    if (paths.empty() || !options.count("--out") || !options.count("--vocab-size")) {
        std::cerr << kTokenizerUsage;
        return kExitUsage;
    }
    const std::string out = options["--out"];
    prepare::DocumentReader reader(prepare::list_sources(paths),
                                   options.count("--field") ? options["--field"] : "text");
    reader.on_problem = [](const prepare::Utf8Problem& p) {
        std::cerr << "warning: " << prepare::describe_utf8_problem(p) << "\n";
    };
    std::vector<std::string> lines;
    std::size_t next_line = 0;
    prepare::Document doc;
    int64_t sentences = 0;
    const auto model = tokenizer::train_sentencepiece(
        [&](std::string& sentence) {
            while (next_line >= lines.size()) {
                lines.clear();
                next_line = 0;
                if (!reader.next(doc)) return false;
                prepare::split_lines(doc.text, lines);
            }
            sentence = std::move(lines[next_line++]);
            ++sentences;
            return true;
        },
        o);
    const std::string tmp = out + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(model.data(), static_cast<std::streamsize>(model.size()));
        if (!f) throw Error(out + ": cannot write");
    }
    if (std::rename(tmp.c_str(), out.c_str()) != 0) throw Error(out + ": cannot write");
    auto j = describe(*tokenizer::load_tokenizer(out));
    j["trained_on"] = {{"files", reader.sources().size()},
                       {"sentences", sentences},
                       {"text_bytes", reader.text_bytes()}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
}

}  // namespace

int cmd_tokenizer(const Args& args) {
    if (!args.empty() && args[0] == "train") return train(args);
    if (args.size() < 2) {
        std::cerr << kTokenizerUsage;
        return kExitUsage;
    }
    const std::string& verb = args[0];
    std::map<std::string, std::string> options;
    for (std::size_t i = 2; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--special" || a == "--skip-special" || a == "--decode") {
            options[a] = "1";
        } else if ((a == "--text" || a == "--jsonl" || a == "--ids") && i + 1 < args.size()) {
            options[a] = args[++i];
        } else {
            std::cerr << "lathe-engine tokenizer: unexpected argument " << a << "\n"
                      << kTokenizerUsage;
            return kExitUsage;
        }
    }
    const auto tok = tokenizer::load_tokenizer(args[1]);
    if (verb == "info") {
        std::cout << describe(*tok).dump(2) << "\n";
        return kExitOk;
    }
    if (verb == "encode") {
        const bool special = options.count("--special") > 0;
        if (options.count("--text")) {
            std::cout << nlohmann::json(tok->encode(options["--text"], special)).dump() << "\n";
            return kExitOk;
        }
        if (!options.count("--jsonl")) {
            std::cerr << kTokenizerUsage;
            return kExitUsage;
        }
        const std::string path = options["--jsonl"];
        std::ifstream in(path, std::ios::binary);
        if (!in) throw Error(path + ": cannot open");
        std::string line;
        int64_t n = 0;
        while (std::getline(in, line)) {
            ++n;
            if (line.empty()) continue;
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(line);
            } catch (const std::exception& e) {
                throw Error(path + ":" + std::to_string(n) + ": not JSON: " + e.what());
            }
            if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
                throw Error(path + ":" + std::to_string(n) + ": no \"text\" string");
            std::string text = j["text"].get<std::string>();
            try {
                const auto ids = tok->encode(text, special);
                nlohmann::json out = {{"ids", ids}};
                if (options.count("--decode")) out["decoded"] = tok->decode(ids);
                std::cout << out.dump() << "\n";
            } catch (const Error& e) {
                throw Error(path + ":" + std::to_string(n), e);
            }
        }
        return kExitOk;
    }
    if (verb == "decode") {
        if (!options.count("--ids")) {
            std::cerr << kTokenizerUsage;
            return kExitUsage;
        }
        std::vector<int64_t> ids;
        std::stringstream s(options["--ids"]);
        std::string item;
        while (std::getline(s, item, ',')) {
            try {
                ids.push_back(std::stoll(item));
            } catch (const std::exception&) {
                throw Error("--ids: '" + item + "' is not a token id");
            }
        }
        std::cout << tok->decode(ids, options.count("--skip-special") > 0) << "\n";
        return kExitOk;
    }
    std::cerr << "lathe-engine tokenizer: unknown action '" << verb << "'\n" << kTokenizerUsage;
    return kExitUsage;
}

}  // namespace lathe::cli
