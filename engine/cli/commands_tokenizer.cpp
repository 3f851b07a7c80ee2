// lathe-engine tokenizer: encode and decode with a tokenizer file, and describe one.
#include "engine/cli/cli.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

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
    "FILE is a Hugging Face tokenizer.json (byte-level BPE). --jsonl reads {\"text\": ...} lines\n"
    "and prints {\"ids\": [...]} lines (--decode adds \"decoded\": the ids as text again);\n"
    "--special adds the post-processor's tokens (BOS ...).\n";

}  // namespace

int cmd_tokenizer(const Args& args) {
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
        nlohmann::json j = {{"path", tok->path()},
                            {"id", tok->id()},
                            {"type", "byte-level BPE (tokenizer.json)"},
                            {"vocab_size", tok->vocab_size()}};
        j["bos_id"] = tok->bos_id() ? nlohmann::json(*tok->bos_id()) : nlohmann::json(nullptr);
        j["eos_id"] = tok->eos_id() ? nlohmann::json(*tok->eos_id()) : nlohmann::json(nullptr);
        std::cout << j.dump(2) << "\n";
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
