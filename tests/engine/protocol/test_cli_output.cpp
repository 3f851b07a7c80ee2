// What the one-shot subcommands print for the workbench (engine/protocol/cli_output.h): every
// message, filled with a value in every field, goes through write_output() and read_output() and
// comes back equal; then, for every field the message's visit() names, a copy of the line without
// that field and one with the field's value replaced by a value of another JSON type must be
// refused by read_output() with an error that names the field (an optional field may be absent,
// never mistyped). A field renamed on one side only is exactly such a missing field.
#include "engine/protocol/bench_output.h"
#include "engine/protocol/cli_output.h"

#include <QtTest>

#include <string>
#include <vector>

namespace proto = lathe::protocol;
using OJson = nlohmann::ordered_json;

namespace {

// The fields a message's visit() names, and whether each is optional.
struct FieldNames {
    std::vector<std::pair<std::string, bool>> fields;
    template <class T>
    void operator()(const char* name, T&) {
        fields.emplace_back(name, lathe::record_json::detail::is_optional<T>::value);
    }
};

template <class M>
std::vector<std::pair<std::string, bool>> fields_of() {
    M m;
    FieldNames names;
    m.visit(names);
    return names.fields;
}

// A value of another JSON type than `v`.
OJson other_type(const OJson& v) {
    if (v.is_string()) return 17;
    if (v.is_number()) return "seventeen";
    if (v.is_boolean()) return "yes";
    if (v.is_array()) return OJson::object({{"a", 1}});
    if (v.is_object()) return 3;
    return OJson::array({1});
}

template <class M>
void check_message(const M& filled, const char* what) {
    const std::string line = proto::write_output(filled);
    // Round trip: what the reader makes of the line writes the same line.
    M back;
    try {
        back = proto::read_output<M>(line, what);
    } catch (const std::exception& e) {
        QFAIL(qPrintable(QStringLiteral("%1: %2").arg(what, e.what())));
    }
    QCOMPARE(QString::fromStdString(proto::write_output(back)), QString::fromStdString(line));

    const OJson j = OJson::parse(line);
    for (const auto& [name, optional] : fields_of<M>()) {
        // Every field is filled, so every field is in the line.
        QVERIFY2(j.contains(name), qPrintable(QStringLiteral("%1.%2 not written (fill it in the "
                                                             "test)")
                                                  .arg(what, QString::fromStdString(name))));
        OJson missing = j;
        missing.erase(name);
        bool refused = false;
        std::string error;
        try {
            proto::read_output<M>(missing.dump(), what);
        } catch (const std::exception& e) {
            refused = true;
            error = e.what();
        }
        if (optional) {
            QVERIFY2(!refused, qPrintable(QString::fromStdString(error)));
        } else {
            QVERIFY2(refused && error.find(name + ": missing") != std::string::npos,
                     qPrintable(QStringLiteral("%1 without %2: %3")
                                    .arg(what, QString::fromStdString(name),
                                         refused ? QString::fromStdString(error)
                                                 : QStringLiteral("accepted"))));
        }
        OJson mistyped = j;
        mistyped[name] = other_type(j[name]);
        refused = false;
        try {
            proto::read_output<M>(mistyped.dump(), what);
        } catch (const std::exception& e) {
            refused = true;
            error = e.what();
        }
        // A raw JSON value (a checkpoint's metadata, bench's kinds) takes any type; nothing
        // else does.
        if (name == "metadata" || name == "kinds") continue;
        QVERIFY2(refused && error.find(name) != std::string::npos,
                 qPrintable(QStringLiteral("%1 with %2 of another type: %3")
                                .arg(what, QString::fromStdString(name),
                                     refused ? QString::fromStdString(error)
                                             : QStringLiteral("accepted"))));
    }
}

proto::CheckpointInspection inspection() {
    proto::CheckpointInspection c;
    c.path = "s3://b/run/step20";
    c.remote = true;
    c.complete = true;
    c.problem = "a file is missing";
    c.verified = true;
    c.verification = "not verified";
    c.problems = std::vector<std::string>{"model_and_optim/rank0.lathe: w: CRC"};
    c.set_aside_as_unusable = "bad bytes";
    c.metadata = OJson{{"world_size", 2}, {"ephemeral", false}};
    c.metadata_error = "x";
    c.global_step = 20;
    c.global_train_tokens_seen = 40960;
    c.epoch = 0;
    c.world_size = 2;
    c.trainer_state_error = "y";
    c.config = proto::CheckpointConfigSummary{"run", "64d x 2 layers, vocab 256", 64, 8};
    c.config_error = "z";
    c.files = std::vector<proto::CheckpointFile>{{".metadata.json", 120}};
    c.total_bytes = 4096;
    return c;
}

}  // namespace

class TestCliOutput : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void prepareEvents() {
        proto::PrepareProgress p;
        p.bytes_done = 5;
        p.bytes_total = 10;
        p.text_bytes = 9;
        p.tokens = 3;
        p.documents = 2;
        p.shards = 1;
        p.seconds = 1.5;
        p.mb_per_s = 2.5;
        p.eta_s = 3;
        check_message(p, "prepare-data progress");
        check_message(proto::PrepareInvalidUtf8{"invalid_utf8", "a.txt", 7, 2}, "invalid_utf8");
        check_message(proto::PrepareInterrupted{"interrupted", 4}, "interrupted");
        check_message(proto::PrepareDone{"done", "/d", "/d/tokenizer.json", "uint32", 9, 3, 1,
                                         int64_t{6}, 50304},
                      "prepare-data done");
        QCOMPARE(proto::output_event(proto::write_output(p)), std::string("progress"));
        QCOMPARE(proto::output_event("not json"), std::string());
        QCOMPARE(proto::output_event("[1]"), std::string());
    }

    void mixturePlan() {
        proto::MixturePlan plan{4096, 1.0, {{"web", 9000, 2048, 9000, 0.25, 1.0, true}}};
        check_message(plan, "dataset --plan");
        // A source with no usable tokens needs infinitely many repetitions: JSON says null.
        plan.sources[0].repetitions = INFINITY;
        const auto back = proto::read_output<proto::MixturePlan>(proto::write_output(plan), "plan");
        QVERIFY(std::isnan(back.sources[0].repetitions));
    }

    void generation() {
        proto::Generation g;
        g.prompt_ids = {1, 2};
        g.ids = {3, 4};
        g.logprobs = {-0.5, -1.25};
        g.finish_reason = "stop_id";
        g.prompt = "Hi";
        g.text = "there<|im_end|>";
        g.reply = "there";
        g.logits = std::vector<std::vector<double>>{{0.5, -0.5}, {1, 2}};
        check_message(g, "generate");
        proto::GenerationSummaryLine s{{"run/step10", 1, 2, 0.5, 0.25, 8, true, "cpu"}};
        check_message(s, "generate summary");
    }

    void inspect() {
        check_message(inspection(), "inspect");
        proto::CheckpointListing listing;
        listing.run_folder = "/runs/a";
        listing.checkpoint_folder = "s3://b/run";
        listing.checkpoints = {inspection()};
        listing.problem = "none";
        check_message(listing, "inspect listing");
    }

    void exportImport() {
        check_message(
            proto::ExportResult{"/out", "/run/step10", {"config.json"}, 12, 4096, "bfloat16", 0.5},
            "export");
        check_message(proto::ImportResult{"/ckpt", "/hf", {64, 2, 4, 2, 256, 172}}, "import");
    }

    void runs() {
        proto::RunRow row;
        row.name = "tiny";
        row.path = "/runs/tiny";
        row.state = "stopped";
        row.reason = "stop requested";
        row.step = 20;
        row.max_steps = 100;
        row.updated_at = "2026-12-07T15:00:00Z";
        row.model = "64d x 2 layers, vocab 256";
        row.last_loss = 2.5;
        row.tags = std::vector<std::string>{"baseline"};
        row.notes = "first";
        check_message(row, "runs --json");
    }

    void bench() {
        proto::BenchReport b;
        b.config = "olmo2_14M";
        b.steps = 4;
        b.world_size = 2;
        b.step_time_s = 0.5;
        b.tokens_per_s = 8192;
        b.flops_per_token = 1e8;
        b.achieved_gflops = 400;
        b.peak_gflops = 1000;
        b.mfu = 0.4;
        b.threads = 1;
        b.dtype = "float32";
        b.callbacks = false;
        b.memory = proto::BenchMemory{"full", "fsdp", 1, {{1.5, 2.5}}};
        b.checkpoint_mode = "asynchronous";
        b.checkpoints = 2;
        b.checkpoint_blocking_s = 0.03;
        b.profile = proto::BenchProfile{"CPU operators' self time", 12.5,
                                        OJson{{"GEMM", {{"share", 0.5}, {"ms_per_step", 6.25}}}}};
        b.metric_files = proto::BenchMetricFiles{80, 0.2, 0.01};
        check_message(b, "bench");
    }

    // Invalid UTF-8 in generated text is replaced, not a failure to print the line.
    void invalidUtf8IsReplaced() {
        proto::Generation g;
        g.finish_reason = "length";
        g.text = std::string(
            "a\xff"
            "b");
        const auto back = proto::read_output<proto::Generation>(proto::write_output(g), "generate");
        QCOMPARE(QString::fromStdString(*back.text), QStringLiteral("a\uFFFDb"));
    }
};

QTEST_GUILESS_MAIN(TestCliOutput)
#include "test_cli_output.moc"
