// lathe-engine slurm-script: a batch script for Slurm's sbatch that trains a config on a cluster
// (issue 46 item 2; docs/multi-node.md "Slurm").
//
// The script carries the resolved config inline (so the job trains exactly what was checked
// here, whatever happens to the file later), runs one engine per task with srun (each reads its
// rank from SLURM_PROCID) or one torchrun agent per node (--launcher torchrun), and asks Slurm for
// SIGTERM ahead of the time limit (--signal), which the engine answers with a final checkpoint.
// It is requeueable: a requeued job (scontrol requeue, a preemption, a node failure) runs the same
// command, and the engine resumes from the run's newest checkpoint.
#include "engine/cli/cli.h"
#include "engine/cli/run.h"
#include "engine/config/io.h"
#include "engine/run_folder/layout.h"
#include "engine/util/error.h"

#include <unistd.h>

#include <limits.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace lathe::cli {

namespace {

// 'text' for a POSIX shell: single quotes, each ' written as '\''.
std::string shell_quote(const std::string& text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string self_executable() {
    char self[PATH_MAX];
    const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return "lathe-engine";
    self[len] = '\0';
    return self;
}

// A whole number of at least `min` from option `name`, or an error naming it.
int64_t count_option(const ParsedArgs& p, const std::string& name, int64_t fallback, int64_t min) {
    if (!p.has(name)) return fallback;
    const std::string v = p.option(name);
    try {
        size_t used = 0;
        const long long n = std::stoll(v, &used);
        if (used == v.size() && n >= min) return n;
    } catch (const std::exception&) {
    }
    throw Error(name + " " + v + ": a whole number of at least " + std::to_string(min));
}

// Slurm's time limit forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
bool valid_time_limit(const std::string& t) {
    if (t.empty()) return false;
    for (char c : t)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == ':' || c == '-')) return false;
    return t.front() != ':' && t.back() != ':' && t.back() != '-';
}

}  // namespace

int cmd_slurm_script(const Args& args) {
    const char* usage =
        "usage: lathe-engine slurm-script CONFIG [a.b=value ...] --nodes N [--gpus-per-node G]\n"
        "         [--ntasks-per-node T] [--launcher srun|torchrun] [--torchrun PATH]\n"
        "         [--time LIMIT] [--partition P] [--account A] [--cpus-per-task C]\n"
        "         [--signal-seconds S] [--runs-dir DIR] [--engine PATH] [--out FILE]\n";
    auto p =
        parse_args(args, {"--nodes", "--gpus-per-node", "--ntasks-per-node", "--launcher",
                          "--torchrun", "--time", "--partition", "--account", "--cpus-per-task",
                          "--signal-seconds", "--runs-dir", "--engine", "--out"});
    if (p.spec.empty() && p.errors.empty()) {
        std::cerr << usage;
        return kExitUsage;
    }
    config::ExperimentConfig cfg;
    if (!load_config(p, "slurm-script", cfg)) {
        std::cerr << usage;
        return kExitUsage;
    }
    int64_t nodes = 0, gpus = 0, tasks = 0, cpus = 0, signal_s = 0;
    std::string launcher;
    try {
        nodes = count_option(p, "--nodes", 1, 1);
        gpus = count_option(p, "--gpus-per-node", 0, 0);
        tasks = count_option(p, "--ntasks-per-node", gpus > 0 ? gpus : 1, 1);
        cpus = count_option(p, "--cpus-per-task", 0, 1);
        signal_s = count_option(p, "--signal-seconds", 120, 10);
        if (gpus > 0 && tasks != gpus)
            throw Error("--ntasks-per-node " + std::to_string(tasks) + " with --gpus-per-node " +
                        std::to_string(gpus) + ": one rank per GPU, so give the same number");
        launcher = p.option("--launcher", "srun");
        if (launcher != "srun" && launcher != "torchrun")
            throw Error("--launcher " + launcher + ": srun or torchrun");
        if (p.has("--time") && !valid_time_limit(p.option("--time")))
            throw Error("--time " + p.option("--time") +
                        ": a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS)");
    } catch (const Error& e) {
        std::cerr << "lathe-engine slurm-script: " << e.what() << "\n" << usage;
        return kExitUsage;
    }
    const int64_t world = nodes * tasks;
    if (!layout_runs(cfg, world, nodes)) return kExitUsage;
    if (cfg.trainer.save_folder.empty() || cfg.trainer.save_folder.rfind("s3://", 0) != 0) {
        if (nodes > 1 && cfg.launch.shared_filesystem && !*cfg.launch.shared_filesystem)
            std::cerr << "lathe-engine slurm-script: warning: launch.shared_filesystem is false "
                         "and trainer.save_folder is not s3://: the nodes' checkpoints will not "
                         "meet\n";
    }
    const std::string runs_dir =
        std::filesystem::absolute(p.option("--runs-dir", run_folder::default_runs_root()))
            .lexically_normal()
            .string();
    const std::string engine = p.option("--engine", self_executable());
    const std::string config_json =
        config::dump_document(config::to_json(cfg), config::Format::json);
    if (config_json.find("\nLATHE_CONFIG_JSON\n") != std::string::npos)
        throw Error("the config contains the script's heredoc delimiter");

    std::ostringstream s;
    s << "#!/bin/bash\n"
      << "# Written by `lathe-engine slurm-script` for run '" << cfg.run_name << "': " << nodes
      << " node(s) x " << tasks << " rank(s), " << world << " rank(s) in all.\n"
      << "# Submit with sbatch. A requeued job resumes from the run's newest checkpoint.\n"
      << "#SBATCH --job-name=" << cfg.run_name << "\n"
      << "#SBATCH --nodes=" << nodes << "\n"
      << "#SBATCH --ntasks-per-node=" << (launcher == "srun" ? tasks : 1) << "\n";
    if (launcher == "torchrun" && cpus == 0) cpus = tasks;  // the agent's ranks share its CPUs
    if (cpus > 0) s << "#SBATCH --cpus-per-task=" << cpus << "\n";
    if (gpus > 0) s << "#SBATCH --gpus-per-node=" << gpus << "\n";
    if (p.has("--time")) s << "#SBATCH --time=" << p.option("--time") << "\n";
    if (p.has("--partition")) s << "#SBATCH --partition=" << p.option("--partition") << "\n";
    if (p.has("--account")) s << "#SBATCH --account=" << p.option("--account") << "\n";
    s << "# SIGTERM to every task " << signal_s
      << " s before the time limit: the engine stops with a final checkpoint.\n"
      << "#SBATCH --signal=TERM@" << signal_s << "\n"
      << "#SBATCH --requeue\n"
      << "#SBATCH --open-mode=append\n"
      << "set -euo pipefail\n"
      << "export LATHE_RUNS_DIR=" << shell_quote(runs_dir) << "\n"
      << "# Rank 0's node hosts the rendezvous; the port follows the job id.\n"
      << "export MASTER_ADDR=\"${MASTER_ADDR:-$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
         "| head -n 1)}\"\n"
      << "export MASTER_PORT=\"${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}\"\n"
      << "config=$(mktemp --suffix=.json)\n"
      << "trap 'rm -f \"$config\"' EXIT\n"
      << "cat > \"$config\" <<'LATHE_CONFIG_JSON'\n"
      << config_json << (!config_json.empty() && config_json.back() == '\n' ? "" : "\n")
      << "LATHE_CONFIG_JSON\n"
      << "echo \"lathe: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on "
         "$SLURM_JOB_NODELIST, rendezvous $MASTER_ADDR:$MASTER_PORT\"\n";
    if (launcher == "srun") {
        // Each task is a rank (SLURM_PROCID); one that fails ends the step.
        s << "srun --kill-on-bad-exit=1 " << shell_quote(engine) << " train \"$config\"\n";
    } else {
        // One torch elastic agent per node; the agents meet through c10d at rank 0's node.
        const std::string torchrun = p.option("--torchrun", "torchrun");
        s << "srun --kill-on-bad-exit=1 --ntasks-per-node=1 " << shell_quote(torchrun)
          << " --no-python --nnodes \"$SLURM_NNODES\" --nproc-per-node " << tasks
          << " --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\""
          << " --rdzv-id \"$SLURM_JOB_ID\" " << shell_quote(engine) << " train \"$config\"\n";
    }
    const std::string script = s.str();
    if (p.has("--out")) {
        const std::string out = p.option("--out");
        std::ofstream f(out, std::ios::binary | std::ios::trunc);
        if (!f || !(f << script) || !f.flush())
            throw Error("--out " + out + ": cannot write the script");
        std::filesystem::permissions(out, std::filesystem::perms::owner_exec,
                                     std::filesystem::perm_options::add);
        std::cerr << "wrote " << out << ": sbatch " << out << "\n";
    } else {
        std::cout << script;
    }
    return kExitOk;
}

}  // namespace lathe::cli
