// schema, validate, config, presets, lr-schedule: the torch-free subcommands.
#include "engine/cli/cli.h"
#include "engine/config/io.h"
#include "engine/config/memory_estimate.h"
#include "engine/hf/finetune.h"
#include "engine/protocol/cli_output.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/train/scheduler.h"
#include "engine/util/error.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

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
    auto loaded = hf::load_spec(p.spec, p.overrides);
    if (loaded.ok()) {
        // What it will need, at the world size it asks for (launch.nproc): the estimate `train`
        // checks; with no device known here, only one that no device holds is refused.
        const auto estimate =
            config::estimate_training_memory(loaded.config, loaded.config.launch.nproc);
        const std::string refusal = config::memory_refusal(estimate, 0, "any device", 1);
        if (!refusal.empty()) {
            std::cout << loaded.origin << ": " << refusal << "\n";
            return kExitUsage;
        }
        std::cout << loaded.origin << ": valid\n";
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
    auto loaded = hf::load_spec(p.spec, p.overrides);
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

int cmd_lr_schedule(const Args& args) {
    auto p = parse_args(args, {"--t-max", "--points", "--at"}, {"--json"});
    auto usage = [&](const std::string& why) {
        std::cerr << "lathe-engine lr-schedule: " << why
                  << "\nusage: lathe-engine lr-schedule [CONFIG] [a.b=value ...] [--t-max N] "
                     "[--points N | --at A,B,...] [--json]\n";
        return kExitUsage;
    };
    for (const auto& e : p.errors) return usage(e);
    auto loaded = hf::load_spec(p.spec, p.overrides);
    if (!loaded.ok()) {
        for (const auto& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
        return kExitUsage;
    }
    const auto& c = loaded.config;
    const auto& sch = c.train_module.scheduler;
    const bool tokens = sch.units == config::SchedulerUnits::tokens;
    const int64_t batch = c.data_loader.global_batch_size;
    auto parse_int = [](const std::string& s, int64_t& out) {
        try {
            std::size_t used = 0;
            out = std::stoll(s, &used);
            return used == s.size() && out >= 0;
        } catch (const std::exception&) {
            return false;
        }
    };
    // The end of the schedule: the run's length in the scheduler's units, as the trainer has it.
    int64_t t_max = 0;
    if (p.has("--t-max")) {
        if (!parse_int(p.option("--t-max"), t_max) || t_max < 1)
            return usage("--t-max must be a positive integer");
    } else {
        const auto& d = c.trainer.max_duration;
        if (d.unit == config::DurationUnit::epochs)
            return usage(
                "trainer.max_duration is in epochs, which depend on the data: give --t-max");
        const int64_t steps =
            d.unit == config::DurationUnit::steps ? d.value : (d.value + batch - 1) / batch;
        t_max = tokens ? (d.unit == config::DurationUnit::tokens ? d.value : steps * batch) : steps;
    }
    std::vector<int64_t> at;
    if (p.has("--at")) {
        std::stringstream ss(p.option("--at"));
        for (std::string item; std::getline(ss, item, ',');) {
            int64_t v = 0;
            if (!parse_int(item, v)) return usage("--at takes non-negative integers: " + item);
            at.push_back(v);
        }
    } else {
        int64_t n = 11;
        if (p.has("--points") && (!parse_int(p.option("--points"), n) || n < 2))
            return usage("--points must be an integer >= 2");
        for (int64_t i = 0; i < n; ++i) at.push_back(t_max * i / (n - 1));
    }
    // The groups' peaks: each group override's LR, then optim.lr.
    std::vector<std::pair<std::string, double>> groups;
    for (std::size_t i = 0; i < c.train_module.optim.group_overrides.size(); ++i) {
        const auto& g = c.train_module.optim.group_overrides[i];
        if (g.lr) groups.emplace_back("group_overrides[" + std::to_string(i) + "]", *g.lr);
    }
    groups.emplace_back("optim.lr", c.train_module.optim.lr);
    if (p.has("--json")) {
        config::Json out{{"name", config::enum_to_string(sch.name)},
                         {"units", config::enum_to_string(sch.units)},
                         {"t_max", t_max},
                         {"at", at}};
        config::Json gs = config::Json::array();
        for (const auto& [name, lr] : groups) {
            config::Json lrs = config::Json::array();
            for (int64_t x : at) lrs.push_back(train::scheduler_lr(sch, lr, x, t_max));
            gs.push_back({{"group", name}, {"initial_lr", lr}, {"lr", lrs}});
        }
        out["groups"] = gs;
        std::cout << out.dump() << "\n";
        return kExitOk;
    }
    std::cout << config::enum_to_string(sch.name) << " over " << t_max << " "
              << config::enum_to_string(sch.units) << " (peak " << groups.back().second << ")\n";
    for (int64_t x : at) {
        char line[96];
        std::snprintf(line, sizeof line, "%12lld  %.6g\n", static_cast<long long>(x),
                      train::scheduler_lr(sch, groups.back().second, x, t_max));
        std::cout << line;
    }
    return kExitOk;
}

int cmd_presets(const Args&) {
    for (const auto& n : config::preset_names()) std::cout << n << "\n";
    return kExitOk;
}

int cmd_runs(const Args& args) {
    bool json = false;
    std::string root;
    for (const auto& a : args) {
        if (a == "--json") {
            json = true;
        } else if (root.empty() && a.rfind("--", 0) != 0) {
            root = a;
        } else {
            std::cerr << "lathe-engine runs: unexpected argument " << a
                      << "\nusage: lathe-engine runs [ROOT] [--json]\n";
            return kExitUsage;
        }
    }
    if (root.empty()) root = run_folder::default_runs_root();
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
        std::cerr << "lathe-engine runs: " << root << ": no such folder\n";
        return kExitFailure;
    }
    std::vector<std::string> folders;
    for (const auto& e : fs::directory_iterator(root, ec))
        if (e.is_directory() && run_folder::is_run_folder(e.path().string()))
            folders.push_back(e.path().string());
    std::sort(folders.begin(), folders.end());
    for (const auto& f : folders) {
        protocol::RunRow row;
        row.name = fs::path(f).filename().string();
        row.path = f;
        std::string error;
        const auto s = run_folder::read_record<run_folder::RunStatus>(
            run_folder::join(f, run_folder::kStatusFile), &error);
        if (s) {
            row.state = run_folder::effective_state(*s);
            row.reason = row.state == s->state
                             ? s->reason
                             : "its process " + std::to_string(s->pid) +
                                   " is gone without a final status (killed or crashed)";
            row.step = s->step;
            row.max_steps = s->max_steps;
            row.updated_at = s->updated_at;
            row.model = s->model;
            row.last_loss = s->last_loss;
        } else {
            row.state = "unknown";
            row.reason = error.empty() ? "no status.json" : error;
        }
        std::string tags;
        if (const auto n = run_folder::read_record<run_folder::RunNotes>(
                run_folder::join(f, run_folder::kNotesFile))) {
            row.tags = n->tags;
            row.notes = n->notes;
            for (const auto& t : n->tags) tags += (tags.empty() ? "[" : ", ") + t;
            if (!tags.empty()) tags += "] ";
        }
        if (json) {
            std::cout << protocol::write_output(row) << "\n";
            continue;
        }
        std::printf("%-28s %-12s %8s  %s%s\n", row.name.c_str(), row.state.c_str(),
                    row.step ? std::to_string(*row.step).c_str() : "-", tags.c_str(),
                    row.reason.c_str());
    }
    if (!json && folders.empty()) std::cout << "no runs in " << root << "\n";
    return kExitOk;
}

int cmd_notes(const Args& args) {
    auto p = parse_args(args, {"--tags", "--notes"});
    const char* usage = "usage: lathe-engine notes RUN_DIR [--tags a,b] [--notes TEXT]\n";
    if (!p.errors.empty() || p.spec.empty() || !p.overrides.empty()) {
        std::cerr << "lathe-engine notes: "
                  << (!p.errors.empty()      ? p.errors[0]
                      : !p.overrides.empty() ? "unexpected argument " + p.overrides[0]
                                             : std::string("no run folder given"))
                  << "\n"
                  << usage;
        return kExitUsage;
    }
    if (!run_folder::is_run_folder(p.spec)) {
        std::cerr << "lathe-engine notes: " << p.spec << ": not a run folder\n";
        return kExitFailure;
    }
    const std::string file = run_folder::join(p.spec, run_folder::kNotesFile);
    std::string error;
    auto notes = run_folder::read_record<run_folder::RunNotes>(file, &error);
    if (!notes && std::filesystem::exists(file))
        throw lathe::Error(file + ": " + error + " (fix or remove it to write notes)");
    run_folder::RunNotes n = notes.value_or(run_folder::RunNotes{});
    if (p.has("--tags")) n.tags = run_folder::parse_tags(p.option("--tags"));
    if (p.has("--notes")) n.notes = p.option("--notes");
    if (p.has("--tags") || p.has("--notes")) run_folder::write_record(file, n);
    std::cout << run_folder::to_json(n).dump() << "\n";
    return kExitOk;
}

}  // namespace lathe::cli
