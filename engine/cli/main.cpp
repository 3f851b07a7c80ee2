// lathe-engine: the headless engine. See `lathe-engine help`.
#include "engine/cli/cli.h"
#include "engine/cli/torch_info.h"
#include "engine/util/log.h"
#include "engine/util/torch_error.h"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>

namespace {

const char* kUsage = R"(usage: lathe-engine COMMAND [ARGS]

Commands:
  train [CONFIG] [a.b=value ...]     train (CONFIG is a JSON/YAML file, a preset (default: tiny),
                                     or a Hugging Face model folder to fine-tune: its model,
                                     weights and tokenizer, with dataset.paths to give)
        [--resume-from CKPT]         continue from exactly this checkpoint (newer ones set aside)
        [--control-socket PATH]      connect to a GUI (docs/protocol.md)
        [--force]                    start even if the expected peak memory (training state,
                                     activations, logits; `validate` prints it) exceeds the
                                     device's free memory
  launch --nproc N [CONFIG] [...]    run N ranks on this node, like torchrun (N = gpu: one per GPU;
                                     auto: one per GPU, else one CPU rank); see docs/multi-node.md
  bench [CONFIG] [--steps N]         time N training steps; prints one JSON line (--profile:
                                     time by kind: GEMM, attention, copies, softmax/loss, ...)
  inspect [--verify] PATH            describe a checkpoint, or the checkpoints of a run folder;
                                     --verify reads every file and checks each tensor's CRC-32C
  export CKPT OUT_DIR                write a Hugging Face folder of the model's family (config.json,
        [--dtype float32|bfloat16]   model.safetensors, shards past --max-shard-size, default 5GB)
        [--max-shard-size SIZE]
  import HF_DIR OUT_CKPT             a model-only Lathe checkpoint from a Hugging Face folder (Olmo2,
                                     Olmo3, Llama, Qwen2, Qwen3; or use trainer.load_path=HF_DIR)
  generate MODEL --prompt TEXT       generate from a checkpoint, a run folder's newest checkpoint or
        [--prompt-ids 1,2,3] ...     a Hugging Face folder: --max-new-tokens N, --temperature T
                                     (0 = greedy), --top-k K, --top-p P, --seed S, --stop TEXT,
                                     --tokenizer FILE (text for any model; EOS stops),
                                     --device cpu|cuda, --no-kv-cache, --json (--logits:
                                     the forward's logits over each prompt); prompt plus new
                                     tokens past the model's context are refused unless
                                     --max-context N allows them; --chat: the prompt is the
                                     user's turn in the model's chat template (--system TEXT,
                                     --messages FILE: the conversation so far, a JSON list)
  tokenizer info|encode|decode FILE  a Hugging Face tokenizer.json (byte-level BPE) or a
                                     SentencePiece model: --text T or --jsonl PATH to encode,
                                     --ids 1,2,3 to decode
  tokenizer train PATHS --out FILE   train a SentencePiece model on text (--vocab-size N,
        --vocab-size N               --type bpe|unigram)
  prepare-data PATHS --tokenizer F   text/JSONL files and folders (.gz, .zst) to OLMo-core token
        --out DIR [--shard-size S]   files and manifest.json, on every core; resumable
  chat FILE.jsonl --tokenizer F      conversations rendered with the model's chat template and
                                     tokenized, with their label masks (as prepare-data --chat)
  dataset [CONFIG] [a.b=value ...]   describe the config's data; --instances A:B prints those
        [--instances A:B] [--decode] instances' ids (and text, and whether the repetition
        [--plan]                     filter keeps them); --plan: each mixture source's tokens,
                                     what its ratio needs and the repetition that takes
  runs [ROOT] [--json]               the runs under ROOT (default: the runs folder) and where each
                                     stands: running, finished, stopped, failed, or interrupted
                                     (status "running" but its process is gone), with tags
  control RUN_DIR checkpoint|stop    ask a running run (started anywhere: a cluster job, a shell)
        [--no-checkpoint] [--wait S] for a checkpoint or a stop at its next step, through its
                                     folder's control drop-box (control/)
  notes RUN_DIR [--tags a,b]         a run's tags and notes (notes.json; the Runs dock edits
        [--notes TEXT]               them too): prints them, or sets what is given
  slurm-script CONFIG --nodes N      an sbatch script that trains CONFIG under Slurm: srun (one
        [--gpus-per-node G] ...      rank a task) or --launcher torchrun (one agent a node),
                                     SIGTERM before --time ends (final checkpoint), requeueable
                                     (resumes); --out FILE; see docs/multi-node.md
  k8s-manifest CONFIG --image IMAGE  Kubernetes YAML that trains CONFIG with torchrun on --nodes N
        --nodes N [--pvc CLAIM] ...  pods: a Kubeflow PyTorchJob, or --kind job (an indexed Job
                                     and a headless Service); the config in a ConfigMap
  validate CONFIG [a.b=value ...]    check a config; prints every problem as PATH: REASON, exit 2
  config [CONFIG] [a.b=value ...]    print the resolved config (--format json|yaml)
  schema                             print the JSON Schema of the config
  presets                            list the built-in presets
  lr-schedule [CONFIG] [...]         print the LR schedule at --points N (default 11) or --at A,B,...
        [--t-max N] [--json]         positions, in the scheduler's units, up to t_max (default: the
                                     run's length); --json adds every parameter group
  --version                          version, git revision, LibTorch version, CUDA support

Overrides take the form a.b.c=value (OLMo-core's --a.b.c=value also works).
Exit codes: 0 success, 1 failure, 2 bad config or usage, 130 interrupted.
)";

}  // namespace

int main(int argc, char** argv) {
    using namespace lathe::cli;
    // A closed stdout (the workbench that reads it was killed) makes writes fail with EPIPE
    // instead of killing the engine with SIGPIPE mid-run: it goes on to its final checkpoint.
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::cout << kUsage;
        return args.empty() ? kExitUsage : kExitOk;
    }
    if (args[0] == "--version" || args[0] == "version") {
        std::cout << lathe::version_line("lathe-engine") << "\n";
        return kExitOk;
    }
    const std::map<std::string, int (*)(const Args&)> commands = {
        {"schema", cmd_schema},
        {"validate", cmd_validate},
        {"config", cmd_config},
        {"presets", cmd_presets},
        {"train", cmd_train},
        {"bench", cmd_bench},
        {"inspect", cmd_inspect},
        {"launch", cmd_launch},
        {"lr-schedule", cmd_lr_schedule},
        {"export", cmd_export},
        {"import", cmd_import},
        {"generate", cmd_generate},
        {"tokenizer", cmd_tokenizer},
        {"prepare-data", cmd_prepare_data},
        {"chat", cmd_chat},
        {"dataset", cmd_dataset},
        {"runs", cmd_runs},
        {"notes", cmd_notes},
        {"slurm-script", cmd_slurm_script},
        {"k8s-manifest", cmd_k8s_manifest},
        {"control", cmd_control},
    };
    auto it = commands.find(args[0]);
    if (it == commands.end()) {
        std::cerr << "lathe-engine: unknown command '" << args[0] << "'\n\n" << kUsage;
        return kExitUsage;
    }
    try {
        return it->second(Args(args.begin() + 1, args.end()));
    } catch (const std::exception& e) {
        // One clear message; LibTorch's backtrace, if any, is in the run's log file.
        std::cerr << "lathe-engine " << args[0] << ": error: " << lathe::message_of(e) << std::endl;
        if (lathe::has_backtrace(e)) lathe::log::debug("the error in full: {}", e.what());
        const char* world = std::getenv("WORLD_SIZE");
        if (world && std::atoi(world) > 1) {
            // Process groups and threads may be blocked on ranks that will never answer: leave
            // without running their destructors, so the launcher sees the failure at once.
            std::cout.flush();
            std::_Exit(kExitFailure);
        }
        return kExitFailure;
    }
}
