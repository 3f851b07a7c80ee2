// lathe-fake-engine: speaks the engine's side of the control protocol for the GUI's tests, without
// LibTorch. Usage as the real engine: `train CONFIG [a.b=value ...] --control-socket PATH`.
// Behaviour from the environment:
//   LATHE_FAKE_MODE   normal (default) | crash (abort after 3 metrics) | garbage (random and
//                     malformed lines between the real ones) | ignore-stop (never stops; spawns
//                     a child in its process group, to test kill) | exit-early (exit 3 before
//                     connecting) | fail (error + bye failed, exit 1)
//   LATHE_FAKE_STEPS  steps to run (default 20); LATHE_FAKE_STEP_MS  ms per step (default 20)
//   LATHE_FAKE_PIDFILE  where ignore-stop writes its child's pid
//   LATHE_FAKE_SAMPLES  send a "samples" event every N steps (default 0: none)
// `generate MODEL --prompt TEXT ... --json` answers as `lathe-engine generate` does, with the
// prompt reversed as its text (with --chat --messages FILE: "turn N: " and the prompt reversed,
// N counted from the conversation in FILE); LATHE_FAKE_GENERATE_MS delays the answer (to test Stop), and
// LATHE_FAKE_MODE=fail makes it fail with an error on stderr.
#include "engine/config/io.h"
#include "engine/protocol/cli_output.h"
#include "engine/protocol/control_client.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace proto = lathe::protocol;

namespace {

std::string env(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

volatile std::sig_atomic_t g_interrupted = 0;

}  // namespace

int generate(int argc, char** argv) {
    std::string prompt, ids, messages;
    bool chat = false;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--chat") chat = true;
        if (i + 1 >= argc) continue;
        if (a == "--prompt") prompt = argv[i + 1];
        if (a == "--prompt-ids") ids = argv[i + 1];
        if (a == "--messages") messages = argv[i + 1];
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::stoi(env("LATHE_FAKE_GENERATE_MS", "0"))));
    if (env("LATHE_FAKE_MODE", "normal") == "fail") {
        std::fprintf(stderr, "lathe-engine generate: error: %s: no such folder\n", argv[2]);
        return 1;
    }
    // The real engine's message (engine/protocol/cli_output.h), so the workbench reads this
    // fake's answer exactly as it reads the engine's.
    proto::Generation line;
    line.ids = {1, 2, 3};
    line.logprobs = {-0.5, -0.25, -0.125};
    line.finish_reason = "length";
    if (ids.empty()) {
        line.prompt = prompt;
        line.text = std::string(prompt.rbegin(), prompt.rend());
        line.reply = line.text;
    }
    if (chat) {  // "turn N: " + the prompt reversed, N from the conversation it was given
        std::ifstream in(messages);
        const auto history = lathe::config::Json::parse(in, nullptr, false);
        if (!history.is_array()) {
            std::fprintf(stderr, "lathe-engine generate: error: %s: not a conversation\n",
                         messages.c_str());
            return 1;
        }
        const std::string reply = "turn " + std::to_string(history.size() / 2 + 1) + ": " +
                                  std::string(prompt.rbegin(), prompt.rend());
        line.reply = reply;
        line.text = reply + "<|im_end|>";
        line.finish_reason = "stop_id";
    }
    proto::GenerationSummaryLine summary;
    summary.summary.prompts = 1;
    summary.summary.new_tokens = 3;
    std::printf("%s\n%s\n", proto::write_output(line).c_str(),
                proto::write_output(summary).c_str());
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 2 && std::string(argv[1]) == "generate") return generate(argc, argv);
    std::string config_path, socket_path;
    std::vector<std::string> overrides;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--control-socket" && i + 1 < argc) {
            socket_path = argv[++i];
        } else if ((a == "--runs-dir" || a == "--resume-from") && i + 1 < argc) {
            ++i;  // accepted and ignored: the fake engine writes no run folder
        } else if (i == 1 && a == "train") {
        } else if (config_path.empty()) {
            config_path = a;
        } else {
            overrides.push_back(a);
        }
    }
    const std::string mode = env("LATHE_FAKE_MODE", "normal");
    const int steps = std::stoi(env("LATHE_FAKE_STEPS", "20"));
    const int step_ms = std::stoi(env("LATHE_FAKE_STEP_MS", "20"));
    const int samples_every = std::stoi(env("LATHE_FAKE_SAMPLES", "0"));
    std::signal(SIGTERM, [](int) { g_interrupted = 1; });

    std::printf("fake engine: mode %s, config %s\n", mode.c_str(), config_path.c_str());
    std::fflush(stdout);
    if (mode == "exit-early") {
        std::fprintf(stderr, "[error] fake engine: exiting before connecting\n");
        return 3;
    }
    // The GUI must have written a valid config: read it as the real engine would.
    lathe::config::Loaded loaded = lathe::config::load(config_path, overrides);
    if (!loaded.ok()) {
        for (const auto& i : loaded.issues) std::fprintf(stderr, "%s\n", i.to_string().c_str());
        return 2;
    }
    proto::ControlClient client;
    std::string error;
    int raw_fd = -1;  // garbage mode writes raw bytes itself, on a socket of its own making
    if (mode == "garbage") {
        raw_fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
        if (::connect(raw_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
            std::perror("fake engine: connect");
            return 1;
        }
    } else if (!client.connect(socket_path, &error)) {
        std::fprintf(stderr, "fake engine: %s\n", error.c_str());
        return 1;
    }
    auto write_raw = [&](const std::string& bytes) {
        std::size_t off = 0;
        while (off < bytes.size()) {
            ssize_t n = ::send(raw_fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return;
            off += static_cast<std::size_t>(n);
        }
    };
    std::mt19937 rng(7);
    auto send = [&](const proto::Event& e) {
        if (raw_fd < 0) return client.send(e);
        write_raw(proto::encode(e));
    };
    // Between real events: random bytes, truncated and mutated lines, an oversized line, other
    // versions, unknown types, wrong field types, events out of order.
    auto send_garbage = [&] {
        if (raw_fd < 0) return;
        std::uniform_int_distribution<int> byte(0, 255);
        std::string junk(std::uniform_int_distribution<int>(1, 200)(rng), ' ');
        for (auto& c : junk) c = static_cast<char>(byte(rng));
        std::string line = proto::encode(proto::Metrics{1, 2, 3.0, {{"x", 1.0}}});
        write_raw(junk + "\n");
        write_raw(line.substr(0, line.size() / 2) + "\n");
        write_raw("{\"v\":2,\"type\":\"metrics\"}\n{\"v\":1,\"type\":\"party\"}\n");
        write_raw("{\"v\":1,\"type\":\"status\",\"state\":7}\n[[[[[[\n\n");
        write_raw(proto::encode(proto::Hello{}));  // a second hello: out of order
    };
    send(proto::Hello{proto::kVersion, loaded.config.launch.nproc, "cpu", "/tmp/fake-run",
                      lathe::config::to_json(loaded.config)});
    send(proto::Status{proto::RunState::starting, 0, steps, 0.0, std::nullopt});
    send(proto::Log{"info", 0, "fake engine: training starts"});
    if (mode == "fail") {
        send(proto::ErrorEvent{"fake failure: the loss is NaN"});
        send(proto::Bye{proto::ExitReason::failed});
        client.close();
        return 1;
    }
    if (mode == "ignore-stop") {
        pid_t child = fork();
        if (child == 0) {
            for (;;) pause();
        }
        std::ofstream(env("LATHE_FAKE_PIDFILE", "/dev/null")) << child << "\n";
        std::signal(SIGTERM, SIG_IGN);
    }
    const int64_t tokens_per_step = loaded.config.data_loader.global_batch_size;
    bool stop = false, stop_checkpoint = true;
    auto begin = std::chrono::steady_clock::now();
    int step = 0;
    for (step = 1; step <= steps || mode == "ignore-stop"; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
        double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        send(proto::Metrics{step,
                            step * tokens_per_step,
                            wall,
                            {{"train/CE loss", 5.0 / (1 + 0.1 * step)},
                             {"optim/LR", 1e-3},
                             {"throughput/device/TPS", 1000.0 + step}}});
        send(proto::Status{proto::RunState::running, step, steps,
                           tokens_per_step / (step_ms / 1000.0),
                           (steps - step) * step_ms / 1000.0});
        if (samples_every > 0 && step % samples_every == 0)
            send(proto::Samples{step, {{"The ", "text at step " + std::to_string(step)}}});
        if (step % 2 == 0) send_garbage();
        if (step == 5 && raw_fd >= 0) write_raw(std::string(3 << 20, 'z') + "\n");
        if (mode == "crash" && step == 3) {
            client.flush(std::chrono::seconds(2));
            std::abort();
        }
        for (const auto& w : client.poll_invalid().reasons)
            send(proto::Log{"warning", 0, "control channel: " + w});
        for (const auto& c : client.poll_commands()) {
            if (std::holds_alternative<proto::SaveCheckpoint>(c)) {
                send(proto::Status{proto::RunState::checkpointing, step, steps, 0.0, std::nullopt});
                send(proto::CheckpointSaved{step, "/tmp/fake-run/step" + std::to_string(step),
                                            0.01});
                send(proto::Status{proto::RunState::running, step, steps, 0.0, std::nullopt});
            } else if (auto* s = std::get_if<proto::Stop>(&c)) {
                if (mode == "ignore-stop") {
                    send(proto::Log{"warning", 0, "fake engine: ignoring stop"});
                } else {
                    stop = true;
                    stop_checkpoint = s->checkpoint;
                }
            }
        }
        if (stop || g_interrupted) break;
        if (raw_fd < 0 && !client.connected()) break;
    }
    if (step > steps && mode != "ignore-stop") step = steps;
    if (g_interrupted) return 130;
    if (stop) {
        send(proto::Status{proto::RunState::stopping, step, steps, 0.0, std::nullopt});
        if (stop_checkpoint)
            send(proto::CheckpointSaved{step, "/tmp/fake-run/step" + std::to_string(step), 0.01});
    }
    send(proto::Status{proto::RunState::finished, step, steps, 0.0, 0.0});
    send(proto::Bye{stop ? proto::ExitReason::stopped : proto::ExitReason::finished});
    client.close();
    if (raw_fd >= 0) ::close(raw_fd);
    std::printf("fake engine: done at step %d\n", step);
    return 0;
}
