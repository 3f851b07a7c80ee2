// schema, validate, config, presets: the torch-free subcommands.
#include "engine/cli/cli.h"
#include "engine/config/io.h"
#include "engine/config/memory_estimate.h"

#include <iostream>

namespace lathe::cli {

std::string ParsedArgs::option(const std::string& name, const std::string& fallback) const {
    for (const auto& [k, v] : options) {
        if (k == name) return v;
    }
    return fallback;
}

bool ParsedArgs::has(const std::string& name) const {
    for (const auto& [k, v] : options) {
        if (k == name) return true;
    }
    return false;
}

ParsedArgs parse_args(const Args& args, const std::vector<std::string>& value_options,
                      const std::vector<std::string>& flag_options) {
    ParsedArgs p;
    auto in = [](const std::vector<std::string>& v, const std::string& s) {
        return std::find(v.begin(), v.end(), s) != v.end();
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string name = a, value;
        bool has_value = false;
        if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            name = a.substr(0, eq);
            value = a.substr(eq + 1);
            has_value = true;
        }
        if (in(value_options, name)) {
            if (!has_value) {
                if (i + 1 >= args.size()) {
                    p.errors.push_back(name + " needs a value");
                    continue;
                }
                value = args[++i];
            }
            p.options.emplace_back(name, value);
        } else if (in(flag_options, a)) {
            p.options.emplace_back(a, "1");
        } else if (a.find('=') != std::string::npos ||
                   (a.rfind("--", 0) == 0 && a.find('.') != std::string::npos)) {
            p.overrides.push_back(a);
        } else if (a.rfind("--", 0) == 0 || (a.size() > 1 && a[0] == '-')) {
            p.errors.push_back("unknown option " + a);
        } else if (p.spec.empty()) {
            p.spec = a;
        } else {
            p.errors.push_back("unexpected argument " + a + " (overrides look like a.b.c=value)");
        }
    }
    return p;
}

int cmd_schema(const Args& args) {
    if (!args.empty()) {
        std::cerr << "lathe-engine schema: takes no arguments\n";
        return kExitUsage;
    }
    std::cout << config::json_schema().dump(2) << "\n";
    return kExitOk;
}

int cmd_validate(const Args& args) {
    auto p = parse_args(args, {});
    if (!p.errors.empty()) {
        for (const auto& e : p.errors) std::cerr << "lathe-engine validate: " << e << "\n";
        return kExitUsage;
    }
    if (p.spec.empty()) {
        std::cerr << "usage: lathe-engine validate FILE|PRESET [a.b.c=value ...]\n";
        return kExitUsage;
    }
    auto loaded = config::load(p.spec, p.overrides);
    if (loaded.ok()) {
        std::cout << loaded.origin << ": valid\n";
        // What it will need, at the world size it asks for (launch.nproc).
        const auto estimate =
            config::estimate_training_memory(loaded.config, loaded.config.launch.nproc);
        std::cout << "memory: " << estimate.describe() << "\n";
        return kExitOk;
    }
    for (const auto& issue : loaded.issues) std::cout << issue.to_string() << "\n";
    return kExitUsage;
}

int cmd_config(const Args& args) {
    auto p = parse_args(args, {"--format"});
    if (!p.errors.empty()) {
        for (const auto& e : p.errors) std::cerr << "lathe-engine config: " << e << "\n";
        return kExitUsage;
    }
    auto loaded = config::load(p.spec, p.overrides);
    if (!loaded.ok()) {
        for (const auto& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
        return kExitUsage;
    }
    std::string fmt = p.option("--format", "json");
    if (fmt != "json" && fmt != "yaml") {
        std::cerr << "lathe-engine config: --format must be json or yaml\n";
        return kExitUsage;
    }
    std::cout << config::dump_document(config::to_json(loaded.config),
                                       fmt == "yaml" ? config::Format::yaml : config::Format::json);
    return kExitOk;
}

int cmd_presets(const Args&) {
    for (const auto& n : config::preset_names()) std::cout << n << "\n";
    return kExitOk;
}

}  // namespace lathe::cli
