// lathe-engine slurm-script and k8s-manifest: what trains a config on a cluster (issue 46 items 2
// and 3; docs/multi-node.md "Slurm" and "Kubernetes").
//
// slurm-script: a batch script for Slurm's sbatch.
//
// The script carries the resolved config inline (so the job trains exactly what was checked
// here, whatever happens to the file later), runs one engine per task with srun (each reads its
// rank from SLURM_PROCID) or one torchrun agent per node (--launcher torchrun), and asks Slurm for
// SIGTERM ahead of the time limit (--signal), which the engine answers with a final checkpoint.
// It is requeueable: a requeued job (scontrol requeue, a preemption, a node failure) runs the same
// command, and the engine resumes from the run's newest checkpoint.
//
// k8s-manifest: Kubernetes objects (YAML) that run torchrun --no-python on every node with c10d
// rendezvous, the command test_launcher runs for real: a Kubeflow PyTorchJob, or for clusters
// without the training operator an indexed Job and the headless Service its pods meet through.
// The config travels in a ConfigMap; the run folder is a persistent volume claim, or the
// checkpoints go to an s3:// trainer.save_folder.
#include "engine/cli/cli.h"
#include "engine/cli/run.h"
#include "engine/config/io.h"
#include "engine/run_folder/control_requests.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/util/error.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <limits.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

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

namespace {

using Json = config::Json;

// A Kubernetes object name: lowercase letters, digits and '-', starting and ending alphanumeric,
// at most `max` characters (a Service name is a DNS label of 63; a Job's pods add "-N-xxxxx").
std::string k8s_name(const std::string& run, size_t max) {
    std::string out;
    for (char c : run) {
        const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (std::isalnum(static_cast<unsigned char>(l)))
            out += l;
        else if (!out.empty() && out.back() != '-')
            out += '-';
    }
    if (out.size() > max) out.resize(max);
    while (!out.empty() && out.back() == '-') out.pop_back();
    if (out.empty() || !std::isalpha(static_cast<unsigned char>(out.front()))) out = "lathe-" + out;
    if (out.size() > max) out.resize(max);
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out;
}

// Kubernetes quantities: "4", "500m", "16Gi".
bool valid_quantity(const std::string& q) {
    static const char* suffixes[] = {"", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"};
    size_t i = 0;
    while (i < q.size() && (std::isdigit(static_cast<unsigned char>(q[i])) || q[i] == '.')) ++i;
    if (i == 0) return false;
    const std::string suffix = q.substr(i);
    for (const char* s : suffixes)
        if (suffix == s) return true;
    return false;
}

// What k8s-manifest writes, from its checked options.
struct K8sPlan {
    std::string name, ns, engine, image, kind, pvc, cpu, memory;
    int64_t nodes = 1, nproc = 1, gpus = 0, restarts = 0;
};

constexpr int kRendezvousPort = 29500;
const char* const kRunsMount = "/lathe/runs";
const char* const kConfigMount = "/lathe/config";

Json k8s_labels(const K8sPlan& plan) {
    return {{"app.kubernetes.io/name", "lathe"}, {"app.kubernetes.io/instance", plan.name}};
}

Json k8s_metadata(const K8sPlan& plan, const std::string& object) {
    Json m = {{"name", object}, {"labels", k8s_labels(plan)}};
    if (!plan.ns.empty()) m["namespace"] = plan.ns;
    return m;
}

// The resolved config, as the engine will read it: written by hand, so that the JSON is a
// readable block (|) instead of one escaped string.
std::string k8s_config_map(const K8sPlan& plan, const config::ExperimentConfig& cfg) {
    std::ostringstream out;
    out << config::dump_document({{"apiVersion", "v1"},
                                  {"kind", "ConfigMap"},
                                  {"metadata", k8s_metadata(plan, plan.name + "-config")}},
                                 config::Format::yaml);
    out << "data:\n  config.json: |\n";
    std::istringstream lines(config::dump_document(config::to_json(cfg), config::Format::json));
    for (std::string line; std::getline(lines, line);) out << "    " << line << "\n";
    return out.str();
}

// torchrun --no-python with c10d rendezvous at rank 0's pod, as test_launcher runs it.
Json k8s_torchrun(const K8sPlan& plan, const std::string& endpoint) {
    return Json::array({"torchrun", "--no-python", "--nnodes", std::to_string(plan.nodes),
                        "--nproc-per-node", std::to_string(plan.nproc), "--max-restarts",
                        std::to_string(plan.restarts), "--rdzv-backend", "c10d", "--rdzv-endpoint",
                        endpoint, "--rdzv-id", plan.name, plan.engine, "train",
                        std::string(kConfigMount) + "/config.json"});
}

Json k8s_container(const K8sPlan& plan, const Json& command) {
    Json c = {{"name", "lathe"},
              {"image", plan.image},
              {"command", command},
              {"env", Json::array({{{"name", "LATHE_RUNS_DIR"}, {"value", kRunsMount}},
                                   {{"name", "LOG_FILTER_TYPE"}, {"value", "rank0_only"}}})},
              {"ports", Json::array({{{"name", "c10d"}, {"containerPort", kRendezvousPort}}})},
              {"volumeMounts",
               Json::array({{{"name", "config"}, {"mountPath", kConfigMount}, {"readOnly", true}},
                            {{"name", "runs"}, {"mountPath", kRunsMount}},
                            {{"name", "dshm"}, {"mountPath", "/dev/shm"}}})}};
    Json limits = Json::object(), requests = Json::object();
    if (plan.gpus > 0) limits["nvidia.com/gpu"] = std::to_string(plan.gpus);
    if (!plan.cpu.empty()) requests["cpu"] = plan.cpu;
    if (!plan.memory.empty()) {
        requests["memory"] = plan.memory;
        limits["memory"] = plan.memory;
    }
    Json resources = Json::object();
    if (!limits.empty()) resources["limits"] = limits;
    if (!requests.empty()) resources["requests"] = requests;
    if (!resources.empty()) c["resources"] = resources;
    return c;
}

Json k8s_volumes(const K8sPlan& plan) {
    Json runs = {{"name", "runs"}};
    if (!plan.pvc.empty())
        runs["persistentVolumeClaim"] = {{"claimName", plan.pvc}};
    else
        runs["emptyDir"] = Json::object();  // logs only: the checkpoints go to s3://
    return Json::array(
        {{{"name", "config"}, {"configMap", {{"name", plan.name + "-config"}}}},
         runs,
         // NCCL and the data loader's workers need more shared memory than a pod's 64 MB.
         {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}});
}

Json k8s_pod_template(const K8sPlan& plan, const std::string& endpoint, bool indexed) {
    Json spec = Json::object();
    if (indexed) {
        spec["subdomain"] = plan.name;
        spec["restartPolicy"] = "Never";
    }
    spec["containers"] = Json::array({k8s_container(plan, k8s_torchrun(plan, endpoint))});
    spec["volumes"] = k8s_volumes(plan);
    return {{"metadata", {{"labels", k8s_labels(plan)}}}, {"spec", spec}};
}

// The PyTorchJob, or the headless Service and the indexed Job.
std::vector<Json> k8s_workload(const K8sPlan& plan) {
    if (plan.kind == "pytorchjob") {
        // The training operator sets MASTER_ADDR and MASTER_PORT to the Master replica's service.
        auto replica = [&](int64_t replicas) {
            return Json{
                {"replicas", replicas},
                {"restartPolicy", "OnFailure"},
                {"template", k8s_pod_template(plan, "$(MASTER_ADDR):$(MASTER_PORT)", false)}};
        };
        Json specs = {{"Master", replica(1)}};
        if (plan.nodes > 1) specs["Worker"] = replica(plan.nodes - 1);
        return {{{"apiVersion", "kubeflow.org/v1"},
                 {"kind", "PyTorchJob"},
                 {"metadata", k8s_metadata(plan, plan.name)},
                 {"spec",
                  {{"nprocPerNode", std::to_string(plan.nproc)},
                   {"runPolicy", {{"backoffLimit", plan.restarts}}},
                   {"pytorchReplicaSpecs", specs}}}}};
    }
    // Pods of an indexed Job are named NAME-INDEX; with subdomain = the headless Service,
    // NAME-0.NAME resolves to rank 0's pod, which hosts the c10d rendezvous.
    const std::string endpoint =
        plan.name + "-0." + plan.name + ":" + std::to_string(kRendezvousPort);
    Json service = {
        {"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata", k8s_metadata(plan, plan.name)},
        {"spec",
         {{"clusterIP", "None"},
          {"selector", {{"job-name", plan.name}}},
          {"ports",
           Json::array(
               {{{"name", "c10d"}, {"port", kRendezvousPort}, {"targetPort", kRendezvousPort}}})},
          {"publishNotReadyAddresses", true}}}};
    Json job = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", k8s_metadata(plan, plan.name)},
                {"spec",
                 {{"completionMode", "Indexed"},
                  {"completions", plan.nodes},
                  {"parallelism", plan.nodes},
                  {"backoffLimit", plan.restarts},
                  {"template", k8s_pod_template(plan, endpoint, true)}}}};
    return {service, job};
}

}  // namespace

int cmd_k8s_manifest(const Args& args) {
    const char* usage =
        "usage: lathe-engine k8s-manifest CONFIG [a.b=value ...] --image IMAGE --nodes N\n"
        "         [--gpus-per-node G] [--nproc-per-node P] [--kind pytorchjob|job]\n"
        "         [--pvc CLAIM] [--namespace NS] [--name NAME] [--cpu Q] [--memory Q]\n"
        "         [--max-restarts R] [--engine PATH] [--out FILE]\n";
    auto p = parse_args(args, {"--image", "--nodes", "--gpus-per-node", "--nproc-per-node",
                               "--kind", "--pvc", "--namespace", "--name", "--cpu", "--memory",
                               "--max-restarts", "--engine", "--out"});
    if (p.spec.empty() && p.errors.empty()) {
        std::cerr << usage;
        return kExitUsage;
    }
    config::ExperimentConfig cfg;
    if (!load_config(p, "k8s-manifest", cfg)) {
        std::cerr << usage;
        return kExitUsage;
    }
    int64_t nodes = 0, gpus = 0, nproc = 0, restarts = 0;
    std::string kind, image;
    const bool s3 = cfg.trainer.save_folder.rfind("s3://", 0) == 0;
    try {
        nodes = count_option(p, "--nodes", 1, 1);
        gpus = count_option(p, "--gpus-per-node", 0, 0);
        nproc = count_option(p, "--nproc-per-node", gpus > 0 ? gpus : 1, 1);
        restarts = count_option(p, "--max-restarts", 3, 0);
        if (gpus > 0 && nproc != gpus)
            throw Error("--nproc-per-node " + std::to_string(nproc) + " with --gpus-per-node " +
                        std::to_string(gpus) + ": one rank per GPU, so give the same number");
        kind = p.option("--kind", "pytorchjob");
        if (kind != "pytorchjob" && kind != "job")
            throw Error("--kind " + kind + ": pytorchjob (Kubeflow) or job (an indexed Job)");
        image = p.option("--image");
        if (image.empty()) throw Error("--image: the container image that has lathe-engine");
        if (!p.has("--pvc") && !s3)
            throw Error(
                "no --pvc CLAIM and trainer.save_folder is not s3://: the checkpoints "
                "would vanish with the pods; give a persistent volume claim for the "
                "runs folder or an s3:// save folder");
        for (const char* q : {"--cpu", "--memory"})
            if (p.has(q) && !valid_quantity(p.option(q)))
                throw Error(std::string(q) + " " + p.option(q) +
                            ": a Kubernetes quantity (4, 500m, 16Gi)");
        if (p.has("--name") && k8s_name(p.option("--name"), 40) != p.option("--name"))
            throw Error("--name " + p.option("--name") +
                        ": lowercase letters, digits and '-', starting with a letter, at most "
                        "40 characters");
    } catch (const Error& e) {
        std::cerr << "lathe-engine k8s-manifest: " << e.what() << "\n" << usage;
        return kExitUsage;
    }
    if (!layout_runs(cfg, nodes * nproc, nodes)) return kExitUsage;

    K8sPlan plan;
    plan.name = p.option("--name", k8s_name(cfg.run_name, 40));
    plan.ns = p.option("--namespace", "");
    plan.engine = p.option("--engine", "lathe-engine");
    plan.image = image;
    plan.kind = kind;
    plan.nodes = nodes;
    plan.nproc = nproc;
    plan.gpus = gpus;
    plan.restarts = restarts;
    plan.pvc = p.option("--pvc", "");
    plan.cpu = p.option("--cpu", "");
    plan.memory = p.option("--memory", "");
    const std::string config_map = k8s_config_map(plan, cfg);
    const std::vector<Json> objects = k8s_workload(plan);
    std::ostringstream out;
    out << "# Written by `lathe-engine k8s-manifest` for run '" << cfg.run_name << "': " << nodes
        << " node(s) x " << nproc << " rank(s). Apply with kubectl apply -f.\n";
    out << "---\n" << config_map;
    for (const auto& o : objects) out << "---\n" << config::dump_document(o, config::Format::yaml);
    const std::string text = out.str();
    if (p.has("--out")) {
        const std::string path = p.option("--out");
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        if (!f || !(f << text) || !f.flush()) throw Error("--out " + path + ": cannot write it");
        std::cerr << "wrote " << path << ": kubectl apply -f " << path << "\n";
    } else {
        std::cout << text;
    }
    return kExitOk;
}

int cmd_control(const Args& args) {
    const char* usage =
        "usage: lathe-engine control RUN_DIR checkpoint|stop [--no-checkpoint] [--wait SECONDS]\n";
    // RUN_DIR and the command come first; the options after them.
    Args positional, rest;
    for (const auto& a : args)
        (a.rfind("--", 0) == 0 || !rest.empty() ? rest : positional).push_back(a);
    auto p = parse_args(rest, {"--wait"}, {"--no-checkpoint"});
    if (!p.errors.empty() || !p.spec.empty() || positional.size() != 2) {
        std::cerr << "lathe-engine control: "
                  << (!p.errors.empty()    ? p.errors[0]
                      : !p.spec.empty()    ? "unexpected argument " + p.spec
                      : positional.empty() ? std::string("no run folder given")
                      : positional.size() == 1
                          ? std::string("no command given (checkpoint or stop)")
                          : "unexpected argument " + positional[2])
                  << "\n"
                  << usage;
        return kExitUsage;
    }
    const std::string& run = positional[0];
    const std::string& what = positional[1];
    run_folder::ControlCommand command{};
    if (what == "checkpoint" && !p.has("--no-checkpoint")) {
        command = run_folder::ControlCommand::checkpoint;
    } else if (what == "stop") {
        command = p.has("--no-checkpoint") ? run_folder::ControlCommand::stop_without_checkpoint
                                           : run_folder::ControlCommand::stop;
    } else {
        std::cerr << "lathe-engine control: " << what
                  << (what == "checkpoint" ? ": --no-checkpoint goes with stop"
                                           : ": not a command (checkpoint or stop)")
                  << "\n"
                  << usage;
        return kExitUsage;
    }
    int64_t wait_s = 0;
    try {
        wait_s = count_option(p, "--wait", 0, 0);
    } catch (const Error& e) {
        std::cerr << "lathe-engine control: " << e.what() << "\n" << usage;
        return kExitUsage;
    }
    if (!run_folder::is_run_folder(run)) {
        std::cerr << "lathe-engine control: " << run << ": not a run folder\n";
        return kExitFailure;
    }
    // A request waits for the run's next start otherwise, and would stop that instead.
    std::string error;
    const auto status = run_folder::read_record<run_folder::RunStatus>(
        run_folder::join(run, run_folder::kStatusFile), &error);
    if (!status || status->state != run_folder::RunStatus::kRunning) {
        std::cerr << "lathe-engine control: " << run << ": the run is not running ("
                  << (status ? "status " + status->state : "no status: " + error)
                  << "); nothing to ask\n";
        return kExitFailure;
    }
    const std::string path = run_folder::write_control_request(run, command);
    std::cout << "asked " << run << " to " << (what == "stop" ? "stop" : "save a checkpoint")
              << (command == run_folder::ControlCommand::stop_without_checkpoint
                      ? " without a final checkpoint"
                      : "")
              << ": " << path << "\n";
    if (wait_s == 0) {
        std::cout << "rank 0 takes it at its next step\n";
        return kExitOk;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    while (std::chrono::steady_clock::now() < deadline) {
        if (!std::filesystem::exists(path)) {
            const std::string refused =
                run_folder::join(run_folder::join(run, run_folder::kControlDir),
                                 ".refused-" + std::filesystem::path(path).filename().string());
            if (std::filesystem::exists(refused)) {
                std::cerr << "lathe-engine control: the run refused the request (its log says "
                             "why)\n";
                return kExitFailure;
            }
            std::cout << "taken by the run\n";
            return kExitOk;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::cerr << "lathe-engine control: not taken within " << wait_s
              << " s: is the run on another machine whose folder this is not, or stuck? The "
                 "request stays until the run takes it\n";
    return kExitFailure;
}

}  // namespace lathe::cli
