#include "engine/distributed/env.h"

#include "engine/util/error.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef LATHE_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace lathe::dist {

namespace {

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

// The rendezvous store's listening socket on rank 0, bound to MASTER_ADDR's address only (c10d's
// own server listens on every interface, IPv4 and IPv6, which exposes the store to the network
// even for a single-node job on 127.0.0.1). Returns the fd for TCPStoreOptions::masterListenFd,
// or nullopt when MASTER_ADDR is not an address of this machine (a NAT or a name that resolves
// elsewhere): c10d then listens as it always has.
std::optional<int> listen_on_master_addr(const std::string& addr, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0)
        return std::nullopt;
    std::optional<int> out;
    for (addrinfo* a = found; a && !out; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 2048) == 0) {
            out = fd;
        } else {
            const int err = errno;
            ::close(fd);
            if (err == EADDRINUSE) {
                ::freeaddrinfo(found);
                throw Error("rendezvous port " + addr + ":" + std::to_string(port) +
                            " is already in use");
            }
        }
    }
    ::freeaddrinfo(found);
    return out;
}

int env_int(const char* name, const std::string& value) {
    try {
        std::size_t pos = 0;
        int v = std::stoi(value, &pos);
        if (pos != value.size()) throw std::invalid_argument("trailing characters");
        return v;
    } catch (const std::exception&) {
        throw Error(std::string("environment variable ") + name + "='" + value +
                    "' is not an integer");
    }
}

// First host of a Slurm node list such as "node[003-005,9],gpu1" -> "node003".
std::string first_slurm_host(const std::string& list) {
    std::string host;
    for (std::size_t i = 0; i < list.size(); ++i) {
        char c = list[i];
        if (c == ',') break;
        if (c == '[') {
            std::size_t j = i + 1;
            while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j])))
                host += list[j++];
            break;
        }
        host += c;
    }
    return host;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
    switch (op) {
        case ReduceOp::max:
            return c10d::ReduceOp::MAX;
        case ReduceOp::min:
            return c10d::ReduceOp::MIN;
        default:
            return c10d::ReduceOp::SUM;
    }
}

}  // namespace

WorldInfo read_world_info() {
    WorldInfo w;
    if (env("RANK") || env("WORLD_SIZE")) {
        w.source = "torchrun variables";
        // torch elastic's restart of the group (--max-restarts): said in the log's world line.
        if (const auto restart = env("TORCHELASTIC_RESTART_COUNT"); restart && *restart != "0")
            w.source += ", restart " + *restart;
        w.rank = env_int("RANK", env("RANK").value_or("0"));
        w.world_size = env_int("WORLD_SIZE", env("WORLD_SIZE").value_or("1"));
        w.local_rank = env_int("LOCAL_RANK", env("LOCAL_RANK").value_or(std::to_string(w.rank)));
        w.local_world_size = env_int(
            "LOCAL_WORLD_SIZE", env("LOCAL_WORLD_SIZE").value_or(std::to_string(w.world_size)));
        w.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
        w.master_port = env_int("MASTER_PORT", env("MASTER_PORT").value_or("29500"));
    } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
        w.source = "slurm";
        w.rank = env_int("SLURM_PROCID", *env("SLURM_PROCID"));
        w.world_size = env_int("SLURM_NTASKS", *env("SLURM_NTASKS"));
        w.local_rank = env_int("SLURM_LOCALID", env("SLURM_LOCALID").value_or("0"));
        if (auto n = env("SLURM_NTASKS_PER_NODE")) {
            w.local_world_size =
                env_int("SLURM_NTASKS_PER_NODE", n->substr(0, n->find_first_not_of("0123456789")));
        } else {
            w.local_world_size = w.world_size;
        }
        w.master_addr =
            env("MASTER_ADDR")
                .value_or(first_slurm_host(env("SLURM_JOB_NODELIST").value_or("127.0.0.1")));
        w.master_port = env_int("MASTER_PORT", env("MASTER_PORT").value_or("29500"));
    }
    if (w.world_size < 1 || w.rank < 0 || w.rank >= w.world_size) {
        throw Error("inconsistent launcher environment: RANK=" + std::to_string(w.rank) +
                    " WORLD_SIZE=" + std::to_string(w.world_size));
    }
    if (w.local_rank < 0 || w.local_world_size < 1 || w.local_rank >= w.local_world_size) {
        throw Error(
            "inconsistent launcher environment: LOCAL_RANK=" + std::to_string(w.local_rank) +
            " LOCAL_WORLD_SIZE=" + std::to_string(w.local_world_size));
    }
    return w;
}

SharedFilesystem resolve_shared_filesystem(std::optional<bool> configured,
                                           bool remote_save_folder) {
    if (configured)
        return {*configured,
                std::string("launch.shared_filesystem=") + (*configured ? "true" : "false")};
    if (auto v = env("OLMO_SHARED_FS")) {
        std::string low = *v;
        for (auto& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (low == "1" || low == "true" || low == "yes") return {true, "OLMO_SHARED_FS=" + *v};
        if (low == "0" || low == "false" || low == "no") return {false, "OLMO_SHARED_FS=" + *v};
        throw Error("OLMO_SHARED_FS=" + *v + ": expected 1 or 0 (true/false, yes/no)");
    }
    if (remote_save_folder)
        return {false, "not assumed with a remote save folder (launch.shared_filesystem unset)"};
    return {true, "a local save folder needs one (launch.shared_filesystem unset)"};
}

std::string local_save_folder_problem(const std::string& save_folder, int64_t nodes,
                                      const SharedFilesystem& fs) {
    if (fs.shared || nodes <= 1) return {};
    return "trainer.save_folder " + save_folder + " is a local folder, but the " +
           std::to_string(nodes) + " nodes do not share a filesystem (" + fs.source +
           "): every rank writes its part of each checkpoint into that folder, so each node "
           "would hold pieces of every checkpoint. Save to an s3:// folder, or put the folder on "
           "a filesystem every node mounts and set launch.shared_filesystem=true "
           "(OLMO_SHARED_FS=1)";
}

bool should_log(const WorldInfo& w, config::LogFilterType filter) {
    if (auto e = env("LOG_FILTER_TYPE")) {
        if (auto f = config::enum_from_string<config::LogFilterType>(*e)) filter = *f;
    }
    switch (filter) {
        case config::LogFilterType::all_ranks:
            return true;
        case config::LogFilterType::local_rank0_only:
            return w.local_rank == 0;
        default:
            return w.rank == 0;
    }
}

Group::Group(c10::intrusive_ptr<c10d::Backend> backend, int rank, int size)
    : backend_(std::move(backend)), rank_(rank), size_(size) {}

void Group::all_reduce(torch::Tensor& t, ReduceOp op) const {
    if (!distributed()) return;
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    backend_->allreduce(v, o)->wait();
}

c10::intrusive_ptr<c10d::Work> Group::all_reduce_async(torch::Tensor& t, ReduceOp op) const {
    if (!distributed()) return {};
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    return backend_->allreduce(v, o);
}

void Group::broadcast(torch::Tensor& t, int root) const {
    if (!distributed()) return;
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    backend_->broadcast(v, o)->wait();
}

void Group::all_gather(std::vector<torch::Tensor>& out, torch::Tensor& in) const {
    if (!distributed()) {
        out.assign(1, in.clone());
        return;
    }
    if (static_cast<int>(out.size()) != size_) {
        out.clear();
        for (int i = 0; i < size_; ++i) out.push_back(torch::empty_like(in));
    }
    std::vector<std::vector<at::Tensor>> o{out};
    std::vector<at::Tensor> i{in};
    backend_->allgather(o, i)->wait();
    out = o[0];
}

void Group::reduce_scatter(torch::Tensor& out, std::vector<torch::Tensor>& in) const {
    if (!distributed()) {
        out.copy_(in.at(0));
        return;
    }
    std::vector<at::Tensor> o{out};
    std::vector<std::vector<at::Tensor>> i{in};
    backend_->reduce_scatter(o, i)->wait();
}

void Group::barrier() const {
    if (!distributed()) return;
    auto t = torch::zeros({1});
    all_reduce(t);
}

std::string Group::broadcast_string(const std::string& s, int root) const {
    if (!distributed()) return s;
    auto len = torch::tensor({static_cast<int64_t>(s.size())}, torch::kInt64);
    broadcast(len, root);
    auto bytes = torch::zeros({len.item<int64_t>()}, torch::kUInt8);
    if (rank_ == root && !s.empty()) std::memcpy(bytes.data_ptr<uint8_t>(), s.data(), s.size());
    if (bytes.numel() > 0) broadcast(bytes, root);
    return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                       static_cast<std::size_t>(bytes.numel()));
}

namespace {

// The rank whose file system this rank shares (FS_LOCAL_RANK, else this rank on a shared file
// system and the node's local rank 0 otherwise).
int fs_local_rank(const WorldInfo& w, const EnvironmentOptions& opts) {
    if (auto v = env("FS_LOCAL_RANK")) {
        const int r = env_int("FS_LOCAL_RANK", *v);
        if (r < 0 || r > w.rank)
            throw Error("FS_LOCAL_RANK=" + *v + " on rank " + std::to_string(w.rank) +
                        ": expected 0 to the rank");
        return r;
    }
    return opts.shared_filesystem.shared ? w.rank : w.local_rank;
}

// The mesh first: a layout that cannot run is refused on every rank before any work.
config::ParallelLayout checked_layout(const WorldInfo& w, const EnvironmentOptions& opts) {
    const int64_t nodes = std::max(1, w.world_size / std::max(1, w.local_world_size));
    config::ParallelLayout layout;
    if (opts.layout) {
        layout = opts.layout(w.world_size, nodes);
    } else {
        layout.world = layout.dp = layout.shard = w.world_size;
    }
    if (!layout.ok()) {
        std::string msg = "the parallel layout cannot run on " + std::to_string(w.world_size) +
                          (w.world_size == 1 ? " rank" : " ranks") + ": ";
        for (std::size_t i = 0; i < layout.problems.size(); ++i)
            msg += (i ? "; " : "") + layout.problems[i];
        throw Error(msg);
    }
    return layout;
}

// The training device: this local rank's GPU when CUDA is wanted (and made current), else the CPU.
torch::Device training_device(const WorldInfo& w, const EnvironmentOptions& opts) {
    const bool want_cuda =
        opts.device == config::DeviceKind::cuda ||
        (opts.device == config::DeviceKind::auto_ && torch::cuda::is_available());
    if (opts.device == config::DeviceKind::cuda && !torch::cuda::is_available()) {
        throw Error("launch.device is cuda but no CUDA device is available");
    }
    if (!want_cuda) return torch::Device(torch::kCPU);
#ifdef LATHE_WITH_CUDA
    const int count = static_cast<int>(static_cast<unsigned char>(torch::cuda::device_count()));
    int index = w.local_rank;
    // Slurm binding one GPU to each task (--gpus-per-task=1, --gpu-bind) leaves every rank one
    // visible device, its own: device 0. (Elsewhere one visible GPU for several local ranks
    // is a mistake, reported below.)
    const auto visible = env("CUDA_VISIBLE_DEVICES");
    if (count == 1 && env("SLURM_JOB_ID") && visible && !visible->empty() &&
        visible->find(',') == std::string::npos) {
        index = 0;
    }
    if (index >= count) {
        throw Error("LOCAL_RANK " + std::to_string(w.local_rank) + " has no GPU (" +
                    std::to_string(count) + " visible)");
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
#else
    (void)w;
    throw Error("this build of lathe-engine has no CUDA support");
#endif
}

// CPU threads: the cores divided by the local ranks, unless configured. LATHE_RESERVE_CORES
// leaves cores to other work on this machine first (the workbench sets 1 for itself: spinning
// OpenMP threads and a busy GUI on the same cores slow each other down).
void set_cpu_threads(const WorldInfo& w, const EnvironmentOptions& opts) {
    const int64_t cores =
        std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
    int64_t reserve = 0;
    if (auto r = env("LATHE_RESERVE_CORES")) {
        reserve = env_int("LATHE_RESERVE_CORES", *r);
        if (reserve < 0)
            throw Error("environment variable LATHE_RESERVE_CORES='" + *r + "' is negative");
        reserve = std::min(reserve, cores - 1);
    }
    const int64_t threads =
        opts.num_threads.value_or(std::max<int64_t>(1, (cores - reserve) / w.local_world_size));
    torch::set_num_threads(static_cast<int>(threads));
}

// The TCP store every rank meets at. Rank 0 serves it, unless torchrun's agent already does
// (TORCHELASTIC_USE_AGENT_STORE, torchrun's default): then every rank is a client of the agent's
// store at MASTER_ADDR:MASTER_PORT, under the prefix of this restart (TORCHELASTIC_RESTART_COUNT),
// as torch.distributed's own c10d store does, so a restarted group never reads the keys of the
// one before it.
c10::intrusive_ptr<c10d::Store> rendezvous(const WorldInfo& w, const EnvironmentOptions& opts) {
    const bool agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(w.master_port);
    so.isServer = w.rank == 0 && !agent_store;
    so.numWorkers = w.world_size;
    so.timeout = opts.timeout;
    so.waitWorkers = true;
    if (so.isServer) so.masterListenFd = listen_on_master_addr(w.master_addr, w.master_port);
    try {
        auto store = c10::make_intrusive<c10d::TCPStore>(w.master_addr, so);
        if (!agent_store) return store;
        const std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
        return c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + attempt, store);
    } catch (const std::exception& ex) {
        throw Error(
            "rendezvous at " + w.master_addr + ":" + std::to_string(w.master_port) + " failed", ex);
    }
}

// Makes a group of `size` ranks in which this rank is `rank`; `prefix` names it uniquely, so only
// its members rendezvous (c10d's new_group without the world-wide handshake).
using GroupMaker = std::function<Group(const std::string& prefix, int rank, int size)>;

GroupMaker gloo_groups(const c10::intrusive_ptr<c10d::Store>& world_store, const WorldInfo& w,
                       const EnvironmentOptions& opts) {
    return [world_store, addr = w.master_addr, timeout = opts.timeout](const std::string& prefix,
                                                                       int rank, int size) {
        if (size == 1) return Group();
        auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, world_store);
        auto o = c10d::ProcessGroupGloo::Options::create(timeout);
        const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
        if (iface && *iface) {
            o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
        } else if (addr == "127.0.0.1" || addr == "localhost") {
            o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        } else {
            o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        }
        o->threads = 2;
        c10::intrusive_ptr<c10d::Backend> pg =
            c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, o);
        return Group(pg, rank, size);
    };
}

// The training device's groups: Gloo on CPU, NCCL on CUDA.
GroupMaker device_groups(const c10::intrusive_ptr<c10d::Store>& world_store,
                         const torch::Device& device, const WorldInfo& w,
                         const EnvironmentOptions& opts) {
#ifdef LATHE_WITH_CUDA
    if (device.is_cuda()) {
        if (opts.backend.find("nccl") == std::string::npos) {
            throw Error("CUDA training needs nccl in launch.backend (got \"" + opts.backend +
                        "\")");
        }
        return
            [world_store, timeout = opts.timeout](const std::string& prefix, int rank, int size) {
                if (size == 1) return Group();
                auto store = c10::make_intrusive<c10d::PrefixStore>("nccl/" + prefix, world_store);
                auto o = c10d::ProcessGroupNCCL::Options::create();
                o->timeout = timeout;
                c10::intrusive_ptr<c10d::Backend> pg =
                    c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, o);
                return Group(pg, rank, size);
            };
    }
#else
    (void)device;
#endif
    return gloo_groups(world_store, w, opts);
}

// The mesh's groups for this rank: data parallel, tensor parallel, and HSDP's shard and
// replicate groups (without HSDP the shard group is the data-parallel one).
struct MeshGroups {
    Group dp, tp, shard, replicate;
};

MeshGroups mesh_groups(const config::ParallelLayout& l, const WorldInfo& w,
                       const torch::Device& device, const Group& cpu, const GroupMaker& make) {
    MeshGroups g;
    const auto r = static_cast<int64_t>(w.rank);
    const auto i32 = [](int64_t v) { return static_cast<int>(v); };
    const std::string tp_id = std::to_string(l.tp_index(r));
    if (l.tp == 1) {
        g.dp = device.is_cuda() ? make("", w.rank, w.world_size) : cpu;
    } else {
        // The ranks with this rank's tensor-parallel index, and this rank's TP neighbours.
        g.dp = make("dp/" + tp_id + "/", i32(l.dp_index(r)), i32(l.dp));
        g.tp = make("tp/" + std::to_string(l.dp_index(r)) + "/", i32(l.tp_index(r)), i32(l.tp));
    }
    if (l.strategy == config::DataParallelType::hsdp) {
        g.shard = make("shard/" + tp_id + "/" + std::to_string(l.replica_index(r)) + "/",
                       i32(l.shard_index(r)), i32(l.shard));
        g.replicate = make("replicate/" + tp_id + "/" + std::to_string(l.shard_index(r)) + "/",
                           i32(l.replica_index(r)), i32(l.replicas));
    } else {
        g.shard = g.dp;
    }
    return g;
}

}  // namespace

std::unique_ptr<Environment> prepare_training_environment(const EnvironmentOptions& opts) {
    std::unique_ptr<Environment> e(new Environment());
    e->world_ = read_world_info();
    e->shared_filesystem_ = opts.shared_filesystem;
    e->world_.fs_local_rank = fs_local_rank(e->world_, opts);
    const auto& w = e->world_;
    e->layout_ = checked_layout(w, opts);
    e->device_ = training_device(w, opts);
    set_cpu_threads(w, opts);
    if (opts.seed) torch::manual_seed(static_cast<uint64_t>(*opts.seed));
    if (w.world_size == 1) return e;

    if (opts.backend.find("gloo") == std::string::npos) {
        throw Error("launch.backend \"" + opts.backend +
                    "\" has no gloo: Lathe needs Gloo for CPU bookkeeping");
    }
    e->store_ = rendezvous(w, opts);
    const GroupMaker gloo = gloo_groups(e->store_, w, opts);
    e->cpu_ = gloo("cpu/", w.rank, w.world_size);
    e->bookkeeping_ = gloo("bookkeeping/", w.rank, w.world_size);
    e->checkpoint_ = gloo("checkpoint/", w.rank, w.world_size);
    MeshGroups mesh = mesh_groups(e->layout_, w, e->device_, e->cpu_,
                                  device_groups(e->store_, e->device_, w, opts));
    e->dp_ = std::move(mesh.dp);
    e->tp_ = std::move(mesh.tp);
    e->shard_ = std::move(mesh.shard);
    e->replicate_ = std::move(mesh.replicate);
    return e;
}

void Group::shutdown() const {
    if (backend_) backend_->shutdown();
}

void Environment::teardown(bool graceful) {
    if (torn_down_) return;
    torn_down_ = true;
    if (graceful && device_.is_cuda()) {
        for (const Group* g : {&dp_, &tp_, &shard_, &replicate_}) {
            if (!g->distributed()) continue;
            try {
                g->shutdown();
            } catch (const std::exception&) {
                // Releasing it below is all that is left to do.
            }
        }
    }
    // Release the groups before the store, so their destructors can still talk to it.
    dp_ = Group();
    tp_ = Group();
    shard_ = Group();
    replicate_ = Group();
    cpu_ = Group();
    bookkeeping_ = Group();
    checkpoint_ = Group();
    store_.reset();
}

Environment::~Environment() {
    teardown();
}

void teardown_training_environment(Environment& env) {
    env.teardown(/*graceful=*/true);
}

}  // namespace lathe::dist
