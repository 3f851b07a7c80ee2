// The local launcher, like torchrun: spawns one `lathe-engine train` worker per rank with
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, prefixes their
// output with the rank, forwards SIGINT/SIGTERM, and when one rank fails terminates the others.
#include "engine/checkpoint/checkpointer.h"
#include "engine/cli/cli.h"
#include "engine/cli/run.h"
#include "engine/config/io.h"
#include "engine/config/layout.h"
#include "engine/distributed/env.h"
#include "engine/hf/finetune.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/util/stop_signals.h"

#include <torch/cuda.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace lathe::cli {

bool layout_runs(const config::ExperimentConfig& cfg, int64_t world, int64_t nodes) {
    const auto layout = config::parallel_layout(cfg, world, nodes);
    if (layout.ok()) return true;
    std::cerr << "lathe-engine launch: the parallel layout cannot run on " << world
              << (world == 1 ? " rank" : " ranks") << ":\n";
    for (const auto& problem : layout.problems) std::cerr << "  " << problem << "\n";
    return false;
}

namespace {

volatile sig_atomic_t g_first_signal = 0;    // the first SIGINT/SIGTERM: a graceful stop
volatile sig_atomic_t g_forward_signal = 0;  // ... still to be passed on to the ranks
volatile sig_atomic_t g_stop_now = 0;        // a second one, not from our parent: stop at once

// The ranks see the launcher as their parent, so they never take what it forwards as "stop now"
// (engine/util/stop_signals.h): the launcher decides that, and kills them.
void launcher_on_signal(int sig, SignalSender sender) {
    if (g_first_signal == 0) {
        g_first_signal = sig;
        g_forward_signal = sig;
    } else if (sender == SignalSender::other) {
        g_stop_now = sig;
    }
}

struct Child {
    int rank = 0;
    pid_t pid = -1;
    int fd = -1;
    std::string partial;
    bool exited = false;
    int status = 0;
};

int free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(s);
        return 29500;
    }
    int port = ntohs(a.sin_port);
    ::close(s);
    return port;
}

bool port_in_use(int port) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool busy = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE;
    ::close(s);
    return busy;
}

// "SIGINT", "SIGKILL" ...; "signal N" for one without a name.
std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
    return "status " + std::to_string(status);
}

void emit_lines(Child& c, const char* data, ssize_t n, bool flush) {
    c.partial.append(data, static_cast<std::size_t>(n));
    std::size_t pos;
    while ((pos = c.partial.find('\n')) != std::string::npos) {
        std::cout << "[rank " << c.rank << "] " << c.partial.substr(0, pos + 1);
        c.partial.erase(0, pos + 1);
    }
    if (flush && !c.partial.empty()) {
        std::cout << "[rank " << c.rank << "] " << c.partial << "\n";
        c.partial.clear();
    }
    std::cout.flush();
}

struct LaunchOptions {
    int nproc = 1, nnodes = 1, node_rank = 0, master_port = 0;
    std::string master_addr = "127.0.0.1";
    std::vector<std::string> worker_args;  // after the command
    std::string command = "train";         // the subcommand each worker runs
    std::string run_folder;                // where rank 0 writes status.json; empty for bench
    std::string checkpoint_folder;         // trainer.save_folder when remote, else empty
};

// The master port: --master-port, else a free one. nullopt (with the message printed) when the
// given port is taken or a multi-node job has none.
std::optional<int> choose_master_port(const LaunchOptions& o) {
    if (o.master_port == 0) {
        if (o.nnodes > 1) {
            std::cerr << "lathe-engine launch: --master-port is required with --nnodes > 1\n";
            return std::nullopt;
        }
        return free_port();
    }
    if (o.node_rank == 0 && port_in_use(o.master_port)) {
        std::cerr << "lathe-engine launch: master port " << o.master_port
                  << " is already in use; choose another --master-port "
                  << "or leave it out to pick a free one\n";
        return std::nullopt;
    }
    return o.master_port;
}

// Forks and execs local rank `local` of this node with torchrun's variables; its stdout and
// stderr come back through a pipe. nullopt when the pipe cannot be made.
std::optional<Child> spawn_rank(const LaunchOptions& o, const std::string& self, int local,
                                int port) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        std::perror("pipe");
        return std::nullopt;
    }
    const int rank = o.node_rank * o.nproc + local;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
        ::dup2(fds[1], STDOUT_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ::setenv("RANK", std::to_string(rank).c_str(), 1);
        ::setenv("WORLD_SIZE", std::to_string(o.nproc * o.nnodes).c_str(), 1);
        ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
        ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
        ::setenv("NUM_NODES", std::to_string(o.nnodes).c_str(), 1);
        ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
        ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        ::setenv("LATHE_LAUNCHED", "1", 1);
        std::vector<std::string> argv_s = {self, o.command};
        argv_s.insert(argv_s.end(), o.worker_args.begin(), o.worker_args.end());
        argv_s.push_back("launch.nproc=" + std::to_string(o.nproc));
        std::vector<char*> argv;
        argv.reserve(argv_s.size() + 1);
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(self.c_str(), argv.data());
        std::perror("execv");
        ::_exit(127);
    }
    ::close(fds[1]);
    return Child{rank, pid, fds[0], "", false, 0};
}

// Waits up to 200 ms for output of any rank and prints it line by line, prefixed by the rank.
void pump_output(std::vector<Child>& children) {
    std::vector<pollfd> pfds;
    std::vector<Child*> owners;
    for (auto& c : children) {
        if (c.fd >= 0) {
            pfds.push_back({c.fd, POLLIN, 0});
            owners.push_back(&c);
        }
    }
    if (pfds.empty()) {
        ::usleep(100000);
        return;
    }
    ::poll(pfds.data(), pfds.size(), 200);
    for (std::size_t i = 0; i < pfds.size(); ++i) {
        if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[65536];
        const ssize_t n = ::read(pfds[i].fd, buf, sizeof buf);
        if (n > 0) {
            emit_lines(*owners[i], buf, n, false);
        } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
            emit_lines(*owners[i], "", 0, true);
            ::close(owners[i]->fd);
            owners[i]->fd = -1;
        }
    }
}

void signal_all(std::vector<Child>& children, int sig) {
    for (auto& c : children)
        if (!c.exited) ::kill(c.pid, sig);
}

// The first rank that failed; the others get SIGTERM at once and SIGKILL 10 s later.
struct JobFailure {
    int rank = -1;
    int status = 0;
    std::chrono::steady_clock::time_point kill_at = std::chrono::steady_clock::time_point::max();
    bool killed = false;
};

// Collects the ranks that exited; on the first failure starts stopping the rest. `stopping`: a
// SIGINT/SIGTERM was forwarded, so a rank that ends with exit code 130 stopped as asked.
void reap_ranks(std::vector<Child>& children, JobFailure& failure, bool stopping,
                bool stopped_now) {
    for (auto& c : children) {
        if (c.exited) continue;
        int st = 0;
        if (::waitpid(c.pid, &st, WNOHANG) != c.pid) continue;
        c.exited = true;
        c.status = st;
        const bool ok = (WIFEXITED(st) && (WEXITSTATUS(st) == 0 ||
                                           (stopping && WEXITSTATUS(st) == kExitInterrupted))) ||
                        (stopped_now && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        if (ok || failure.rank >= 0) continue;
        failure.rank = c.rank;
        failure.status = st;
        std::cerr << "lathe-engine launch: rank " << c.rank << " failed (" << describe_status(st)
                  << "); terminating the other ranks\n";
        signal_all(children, SIGTERM);
        failure.kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
    if (!failure.killed && std::chrono::steady_clock::now() > failure.kill_at) {
        signal_all(children, SIGKILL);
        failure.killed = true;
    }
}

// A rank that dies without a word (SIGKILL, a segfault) cannot mark its run: when rank 0's
// status.json still says "running" with its pid, the launcher writes the final status itself.
void write_final_status(const LaunchOptions& o, const std::vector<Child>& children,
                        const JobFailure& failure) {
    if (o.run_folder.empty() || o.node_rank != 0 || children.empty()) return;
    const std::string path = run_folder::join(o.run_folder, run_folder::kStatusFile);
    auto status = run_folder::read_record<run_folder::RunStatus>(path);
    if (!status || status->state != run_folder::RunStatus::kRunning ||
        status->pid != children.front().pid)
        return;
    status->state = run_folder::RunStatus::kFailed;
    status->reason = "rank " + std::to_string(failure.rank) + " " + describe_status(failure.status);
    status->updated_at = run_folder::iso_time_now();
    try {
        run_folder::write_record(path, *status, run_folder::WhenFull::overwrite_in_place);
    } catch (const std::exception& e) {
        std::cerr << "lathe-engine launch: " << e.what() << "\n";
    }
}

// "final checkpoint saved at step N" after a stop by signal, from the run's own files.
std::string stop_summary(const LaunchOptions& o) {
    if (o.run_folder.empty()) return {};
    const auto status = run_folder::read_record<run_folder::RunStatus>(
        run_folder::join(o.run_folder, run_folder::kStatusFile));
    const auto saved = checkpoint::Checkpointer::complete_checkpoints(
        o.checkpoint_folder.empty() ? o.run_folder : o.checkpoint_folder);
    if (saved.empty()) return "; no checkpoint saved";
    if (status && status->step == saved.back().step)
        return "; final checkpoint saved at step " + std::to_string(saved.back().step);
    return "; latest checkpoint: step " + std::to_string(saved.back().step) +
           (status && status->step >= 0 ? " (stopped at step " + std::to_string(status->step) + ")"
                                        : std::string());
}

int run_launcher(const LaunchOptions& o) {
    const auto port = choose_master_port(o);
    if (!port) return o.master_port == 0 ? kExitUsage : kExitFailure;
    char self[4096];
    const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        std::cerr << "lathe-engine launch: cannot find its own executable\n";
        return kExitFailure;
    }
    self[len] = '\0';

    g_first_signal = g_forward_signal = g_stop_now = 0;
    StopSignalHandler forward(launcher_on_signal);  // SIGINT/SIGTERM go on to the ranks
    std::vector<Child> children;
    for (int local = 0; local < o.nproc; ++local) {
        auto child = spawn_rank(o, self, local, *port);
        if (!child) {
            signal_all(children, SIGKILL);
            return kExitFailure;
        }
        children.push_back(std::move(*child));
    }
    JobFailure failure;
    int forwarded = 0;         // the first SIGINT/SIGTERM passed on to the ranks
    bool stopped_now = false;  // a second one killed them
    auto running = [&] {
        return std::any_of(children.begin(), children.end(),
                           [](const Child& c) { return !c.exited || c.fd >= 0; });
    };
    while (running()) {
        if (g_forward_signal) {
            const int sig = g_forward_signal;
            g_forward_signal = 0;
            forwarded = sig;
            signal_all(children, sig);
        }
        if (g_stop_now != 0 && !stopped_now) {
            stopped_now = true;
            std::cerr << "lathe-engine launch: a second " << signal_name(g_stop_now)
                      << ": stopping the ranks now (SIGKILL), without a final checkpoint\n";
            signal_all(children, SIGKILL);
        }
        pump_output(children);
        reap_ranks(children, failure, forwarded != 0, stopped_now);
    }
    if (failure.rank < 0 && forwarded != 0) {
        std::cerr << "lathe-engine launch: stopped by " << signal_name(forwarded) << stop_summary(o)
                  << "\n";
        return kExitInterrupted;
    }
    if (failure.rank < 0) return kExitOk;
    write_final_status(o, children, failure);
    std::cerr << "lathe-engine launch: job failed: rank " << failure.rank << " "
              << describe_status(failure.status) << "\n";
    if (WIFEXITED(failure.status) && WEXITSTATUS(failure.status) == kExitInterrupted)
        return kExitInterrupted;
    if (WIFEXITED(failure.status) && WEXITSTATUS(failure.status) == kExitUsage)
        return kExitUsage;  // a config the ranks refused (a model that does not fit)
    return kExitFailure;
}

// The value of an integer option, within its range: std::invalid_argument naming the option,
// the range and the value otherwise.
int int_option(const std::string& name, const std::string& value) {
    // launch.nproc (ranks on a node times nodes) is at most 1024; port 0 picks a free one.
    int lo = 1, hi = 1024;
    std::string alternatives;
    if (name == "--nproc" || name == "--nproc-per-node") {
        alternatives = ", gpu or auto";
    } else if (name == "--node-rank") {
        lo = 0;
        hi = 1023;
    } else if (name == "--master-port") {
        lo = 0;
        hi = 65535;
    }
    int v = 0;
    const char* end = value.data() + value.size();
    const auto [stop, ec] = std::from_chars(value.data(), end, v);
    if (ec != std::errc() || stop != end || v < lo || v > hi) {
        throw std::invalid_argument(name + " must be an integer from " + std::to_string(lo) +
                                    " to " + std::to_string(hi) + alternatives + " (got '" + value +
                                    "')");
    }
    return v;
}

}  // namespace

int cmd_launch(const Args& args) {
    LaunchOptions o;
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
        auto take = [&](const std::string& name, auto& out) -> bool {
            const std::string& a = args[i];
            std::string value;
            if (a == name) {
                if (i + 1 >= args.size()) throw std::invalid_argument(name + " needs a value");
                value = args[++i];
            } else if (a.rfind(name + "=", 0) == 0) {
                value = a.substr(name.size() + 1);
            } else {
                return false;
            }
            if constexpr (std::is_same_v<std::decay_t<decltype(out)>, std::string>) {
                out = value;
            } else if ((name == "--nproc" || name == "--nproc-per-node") &&
                       (value == "gpu" || value == "auto")) {
                // As torchrun: one rank per visible GPU; "auto" falls back to one CPU rank.
                const int gpus =
                    static_cast<int>(static_cast<unsigned char>(torch::cuda::device_count()));
                if (gpus == 0 && value == "gpu")
                    throw std::invalid_argument(name + " gpu: no CUDA device is visible");
                out = std::max(1, gpus);
            } else {
                out = int_option(name, value);
            }
            return true;
        };
        try {
            if (take("--nproc", o.nproc) || take("--nproc-per-node", o.nproc) ||
                take("--nnodes", o.nnodes) || take("--node-rank", o.node_rank) ||
                take("--master-addr", o.master_addr) || take("--master-port", o.master_port)) {
                continue;
            }
        } catch (const std::exception& e) {
            std::cerr << "lathe-engine launch: " << e.what() << "\n";
            return kExitUsage;
        }
        rest.push_back(args[i]);
    }
    if (o.nproc < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
        std::cerr << "lathe-engine launch: need --nproc >= 1 and 0 <= --node-rank < --nnodes\n";
        return kExitUsage;
    }
    // Validate once here, with the world size the job will have, before spawning anything.
    auto p = parse_args(rest, {"--control-socket", "--runs-dir", "--resume-from"}, {"--force"});
    auto overrides = p.overrides;
    overrides.push_back("launch.nproc=" + std::to_string(o.nproc * o.nnodes));
    auto loaded = hf::load_spec(p.spec, overrides);
    if (!p.errors.empty() || !loaded.ok()) {
        for (const auto& e : p.errors) std::cerr << "lathe-engine launch: " << e << "\n";
        for (const auto& i : loaded.issues) std::cerr << "  " << i.to_string() << "\n";
        return kExitUsage;
    }
    if (!layout_runs(loaded.config, o.nproc * o.nnodes, o.nnodes)) return kExitUsage;
    if (!remote::is_remote_path(loaded.config.trainer.save_folder)) {
        const auto problem = dist::local_save_folder_problem(
            resolve_save_folder(loaded.config, p.option("--runs-dir")), o.nnodes,
            dist::resolve_shared_filesystem(loaded.config.launch.shared_filesystem, false));
        if (!problem.empty()) {
            std::cerr << "lathe-engine launch: " << problem << "\n";
            return kExitUsage;
        }
    }
    o.worker_args = rest;
    o.run_folder = resolve_save_folder(loaded.config, p.option("--runs-dir"));
    if (remote::is_remote_path(loaded.config.trainer.save_folder))
        o.checkpoint_folder = loaded.config.trainer.save_folder;
    return run_launcher(o);
}

int launch_from_train(const config::ExperimentConfig& cfg, const Args& args,
                      const std::string& command, const std::string& run_folder) {
    LaunchOptions o;
    o.nproc = static_cast<int>(cfg.launch.nproc);
    o.worker_args = args;
    o.command = command;
    o.run_folder = run_folder;
    return run_launcher(o);
}

}  // namespace lathe::cli
