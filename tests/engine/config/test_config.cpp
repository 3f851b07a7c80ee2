// lathe_config: round trips, overrides, durations, schema and the table of bad configs.
#include "engine/config/io.h"
#include "engine/config/layout.h"
#include "engine/config/memory_estimate.h"
#include "engine/config/null_defaults.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

using namespace lathe::config;

namespace {

std::string write_file(const QTemporaryDir& dir, const std::string& name, const std::string& text) {
    std::string path = dir.filePath(QString::fromStdString(name)).toStdString();
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string issues_text(const std::vector<Issue>& issues) {
    std::string s;
    for (const auto& i : issues) s += i.to_string() + "\n";
    return s;
}

// Walks every property of a schema object, calling f(path, property).
void walk_schema(const Json& s, const std::string& path,
                 const std::function<void(const std::string&, const Json&)>& f) {
    if (!s.contains("properties")) return;
    for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        std::string p = path.empty() ? it.key() : path + "." + it.key();
        f(p, it.value());
        walk_schema(it.value(), p, f);
    }
}

}  // namespace

class TestConfig : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void presetsLoadAndValidate_data() {
        QTest::addColumn<QString>("name");
        for (const auto& n : preset_names()) QTest::newRow(n.c_str()) << QString::fromStdString(n);
    }
    void presetsLoadAndValidate() {
        QFETCH(QString, name);
        auto l = load(name.toStdString());
        QVERIFY2(l.ok(), issues_text(l.issues).c_str());
        QCOMPARE(QString::fromStdString(l.config.run_name), name);
    }

    void expectedPresetsExist() {
        for (const char* n : {"tiny", "olmo2_1M", "olmo2_14M", "olmo2_30M", "olmo2_60M",
                              "olmo2_190M", "olmo2_1B", "olmo2_7B"}) {
            QVERIFY2(preset_text(n).has_value(), n);
        }
    }

    // file -> config -> file is identical, in JSON and in YAML.
    void roundTripIsIdentical_data() {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<QString>("ext");
        for (const auto& n : preset_names()) {
            QTest::newRow((n + " json").c_str()) << QString::fromStdString(n) << "json";
            QTest::newRow((n + " yaml").c_str()) << QString::fromStdString(n) << "yaml";
        }
    }
    void roundTripIsIdentical() {
        QFETCH(QString, preset);
        QFETCH(QString, ext);
        QTemporaryDir dir;
        Format fmt = ext == "yaml" ? Format::yaml : Format::json;
        auto first = load(preset.toStdString());
        QVERIFY(first.ok());
        std::string text = dump_document(to_json(first.config), fmt);
        std::string path = write_file(dir, "config." + ext.toStdString(), text);
        auto second = load(path);
        QVERIFY2(second.ok(), issues_text(second.issues).c_str());
        QCOMPARE(QString::fromStdString(dump_document(to_json(second.config), fmt)),
                 QString::fromStdString(text));
        QCOMPARE(to_json(second.config), to_json(first.config));
        QCOMPARE(QString::fromStdString(read_file(path)), QString::fromStdString(text));
    }

    void nonDefaultValuesSurviveRoundTrip() {
        ExperimentConfig c;
        c.trainer.hard_stop = Duration::tokens(5000000);
        c.trainer.steps_to_skip = {{3, 5}, {10, 12}};
        c.trainer.callbacks.checkpointer.fixed_steps = {7, 9};
        c.model.n_kv_heads = 2;
        c.train_module.z_loss_multiplier = 1e-5;
        c.train_module.max_grad_norm.reset();
        c.launch.device = DeviceKind::cpu;
        c.dataset.paths = {"a.txt", "b.txt"};
        for (Format fmt : {Format::json, Format::yaml}) {
            std::vector<Issue> issues;
            Json doc = parse_document(dump_document(to_json(c), fmt), fmt, "mem", issues);
            QVERIFY(issues.empty());
            ExperimentConfig back = from_json(doc, issues);
            QVERIFY2(issues.empty(), issues_text(issues).c_str());
            QCOMPARE(to_json(back), to_json(c));
            QVERIFY(back.trainer.hard_stop == Duration::tokens(5000000));
            QCOMPARE(back.train_module.max_grad_norm.has_value(), false);
            QCOMPARE(back.launch.device, DeviceKind::cpu);
        }
    }

    void overrides_data() {
        QTest::addColumn<QString>("arg");
        QTest::addColumn<QString>("pointer");
        QTest::addColumn<QString>("expected");  // JSON of the value at the pointer after loading
        QTest::newRow("int") << "model.d_model=128"
                             << "/model/d_model"
                             << "128";
        QTest::newRow("float") << "train_module.optim.lr=1e-4"
                               << "/train_module/optim/lr"
                               << "0.0001";
        QTest::newRow("olmo form") << "--train_module.optim.lr=0.5"
                                   << "/train_module/optim/lr"
                                   << "0.5";
        QTest::newRow("bare flag") << "--trainer.no_checkpoints"
                                   << "/trainer/no_checkpoints"
                                   << "true";
        QTest::newRow("bool") << "trainer.save_overwrite=true"
                              << "/trainer/save_overwrite"
                              << "true";
        QTest::newRow("null") << "train_module.max_grad_norm=null"
                              << "/train_module/max_grad_norm"
                              << "null";
        QTest::newRow("enum") << "trainer.load_strategy=never"
                              << "/trainer/load_strategy"
                              << "\"never\"";
        QTest::newRow("duration shorthand") << "trainer.max_duration=20steps"
                                            << "/trainer/max_duration"
                                            << R"({"value":20,"unit":"steps"})";
        QTest::newRow("duration flow map") << "trainer.hard_stop={value: 100, unit: steps}"
                                           << "/trainer/hard_stop"
                                           << R"({"value":100,"unit":"steps"})";
        QTest::newRow("list") << "trainer.callbacks.checkpointer.fixed_steps=[5, 10]"
                              << "/trainer/callbacks/checkpointer/fixed_steps"
                              << "[5,10]";
        QTest::newRow("string") << "run_name=my-run"
                                << "/run_name"
                                << "\"my-run\"";
        QTest::newRow("quoted number stays string") << "run_name='42'"
                                                    << "/run_name"
                                                    << "\"42\"";
    }
    void overrides() {
        QFETCH(QString, arg);
        QFETCH(QString, pointer);
        QFETCH(QString, expected);
        auto l = load("tiny", {arg.toStdString()});
        QVERIFY2(l.ok(), issues_text(l.issues).c_str());
        Json got = to_json(l.config).at(Json::json_pointer(pointer.toStdString()));
        QCOMPARE(QString::fromStdString(got.dump()), expected);
    }

    void overridesApplyAfterTheFile() {
        QTemporaryDir dir;
        auto path = write_file(dir, "c.yaml", "model:\n  d_model: 32\nseed: 3\n");
        auto l = load(path, {"model.d_model=96", "model.n_heads=6"});
        QVERIFY2(l.ok(), issues_text(l.issues).c_str());
        QCOMPARE(l.config.model.d_model, int64_t(96));
        QCOMPARE(l.config.seed, int64_t(3));
    }

    void stringOverrideForAList() {
        // As users type it: one path for a list of paths.
        auto l = load("tiny", {"dataset.paths=/a/file"});
        QCOMPARE(l.config.dataset.paths, std::vector<std::string>{"/a/file"});
        for (const auto& i : l.issues) QVERIFY2(i.path != "dataset.paths", i.to_string().c_str());
        // Any other type where the list belongs keeps the schema's error.
        l = load("tiny", {"dataset.paths=3"});
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].path), QString("dataset.paths"));
        QVERIFY2(l.issues[0].message.find("array") != std::string::npos,
                 l.issues[0].to_string().c_str());
        // And a string for a field that is not a list of strings is not turned into one.
        l = load("tiny", {"trainer.callbacks.checkpointer.fixed_steps=5"});
        QVERIFY(!l.ok());
    }

    void evaluatorNeedsHeldOutData() {
        // Nothing is held out unless asked: the default trains on every instance.
        QCOMPARE(load("tiny").config.dataset.validation_fraction, 0.0);
        auto l = load("tiny", {"trainer.callbacks.lm_evaluator.enabled=true"});
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].path),
                 QString("trainer.callbacks.lm_evaluator.enabled"));
        QVERIFY(l.issues[0].message.find("dataset.validation_fraction") != std::string::npos);
        QVERIFY(load("tiny", {"trainer.callbacks.lm_evaluator.enabled=true",
                              "dataset.validation_fraction=0.02"})
                    .ok());
        QVERIFY(
            load("tiny", {"trainer.callbacks.lm_evaluator.enabled=true", "trainer.no_evals=true"})
                .ok());
    }

    void badOverrides() {
        auto l = load("tiny", {"seed.x=1"});
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].to_string()),
                 QString("seed: must be an integer (got an object {\"x\":1})"));
        l = load("tiny", {"run_name=a", "run_name.x=1"});
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].to_string()),
                 QString("run_name: cannot set run_name.x: run_name is not an object"));
        l = load("tiny", {"model.d_modl=5"});
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].to_string()),
                 QString("model.d_modl: unknown key (did you mean \"d_model\"?)"));
        l = load("tiny", {"a..b=1"});
        QVERIFY(!l.ok());
    }

    void durations_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("valid");
        QTest::addColumn<qint64>("value");
        QTest::addColumn<QString>("unit");
        QTest::newRow("steps") << "100steps" << true << qint64(100) << "steps";
        QTest::newRow("singular") << "1step" << true << qint64(1) << "steps";
        QTest::newRow("epochs") << "2epochs" << true << qint64(2) << "epochs";
        QTest::newRow("exponent tokens") << "5e6tokens" << true << qint64(5000000) << "tokens";
        QTest::newRow("spaces") << " 30 steps " << true << qint64(30) << "steps";
        QTest::newRow("1e3epochs") << "1e3epochs" << true << qint64(1000) << "epochs";
        QTest::newRow("fraction") << "1.5steps" << false << qint64(0) << "";
        QTest::newRow("zero") << "0steps" << false << qint64(0) << "";
        QTest::newRow("no unit") << "100" << false << qint64(0) << "";
        QTest::newRow("bad unit") << "100minutes" << false << qint64(0) << "";
        QTest::newRow("no number") << "steps" << false << qint64(0) << "";
        QTest::newRow("negative") << "-5steps" << false << qint64(0) << "";
    }
    void durations() {
        QFETCH(QString, text);
        QFETCH(bool, valid);
        QFETCH(qint64, value);
        QFETCH(QString, unit);
        auto d = parse_duration(text.toStdString());
        QCOMPARE(d.has_value(), valid);
        if (valid) {
            QCOMPARE(qint64(d->value), value);
            QCOMPARE(QString::fromStdString(enum_to_string(d->unit)), unit);
        }
    }

    void durationDue() {
        QVERIFY(!Duration::steps(10).due(9, 0, 1));
        QVERIFY(Duration::steps(10).due(10, 0, 1));
        QVERIFY(!Duration::tokens(100).due(0, 99, 1));
        QVERIFY(Duration::tokens(100).due(0, 100, 1));
        QVERIFY(!Duration::epochs(1).due(0, 0, 1));
        QVERIFY(Duration::epochs(1).due(0, 0, 2));
    }

    void schemaDescribesEveryField() {
        Json s = json_schema();
        QCOMPARE(QString::fromStdString(s["$schema"].get<std::string>()),
                 QString("https://json-schema.org/draft/2020-12/schema"));
        int leaves = 0;
        walk_schema(s, "", [&](const std::string& path, const Json& prop) {
            QVERIFY2(
                prop.contains("description") && !prop["description"].get<std::string>().empty(),
                path.c_str());
            bool is_object = prop.contains("properties");
            if (!is_object) {
                ++leaves;
                QVERIFY2(prop.contains("default"), path.c_str());
                QVERIFY2(prop.contains("type") || prop.contains("anyOf"), path.c_str());
            }
            if (prop.contains("enum")) QVERIFY2(prop["enum"].size() >= 2, path.c_str());
        });
        QVERIFY(leaves > 80);
        // Bounds and enums are carried over from the field definitions.
        const Json& lr = s["properties"]["train_module"]["properties"]["optim"]["properties"]["lr"];
        QCOMPARE(lr["exclusiveMinimum"].get<double>(), 0.0);
        const Json& ls = s["properties"]["trainer"]["properties"]["load_strategy"];
        QCOMPARE(ls["enum"], Json::array({"if_available", "always", "never"}));
        QCOMPARE(ls["default"], Json("if_available"));
    }

    void schemaDefaultsMatchConfigDefaults() {
        Json s = json_schema();
        Json d = to_json(ExperimentConfig{});
        walk_schema(s, "", [&](const std::string& path, const Json& prop) {
            if (!prop.contains("default")) return;
            std::string ptr = "/" + path;
            for (auto& ch : ptr)
                if (ch == '.') ch = '/';
            Json::json_pointer p(ptr);
            if (!d.contains(p)) {
                // Inside an optional section that is null by default (override_decay).
                auto parent = p.parent_pointer();
                while (!parent.empty() && !d.contains(parent)) parent = parent.parent_pointer();
                QVERIFY2(!parent.empty() && d.at(parent).is_null(), path.c_str());
                return;
            }
            QVERIFY2(d.at(p) == prop["default"], path.c_str());
        });
    }

    // The table of bad configs: each row is a file and the exact line(s) validation must print.
    void badConfigs_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("unknown key")
            << "a.json"
            << R"({"trainer": {"max_duraton": "10steps"}})"
            << R"(trainer.max_duraton: unknown key (did you mean "max_duration"?))";
        QTest::newRow("unknown section") << "a.json"
                                         << R"({"modle": {}})"
                                         << R"(modle: unknown key (did you mean "model"?))";
        QTest::newRow("wrong type") << "a.json"
                                    << R"({"model": {"d_model": "wide"}})"
                                    << R"(model.d_model: must be an integer (got a string "wide"))";
        QTest::newRow("wrong bool")
            << "a.json"
            << R"({"trainer": {"save_overwrite": "yes"}})"
            << R"(trainer.save_overwrite: must be a boolean (true or false) (got a string "yes"))";
        QTest::newRow("fractional int") << "a.json"
                                        << R"({"seed": 1.5})"
                                        << "seed: must be an integer (got 1.5)";
        QTest::newRow("out of range") << "a.json"
                                      << R"({"train_module": {"optim": {"lr": -1}}})"
                                      << "train_module.optim.lr: must be > 0 (got -1)";
        QTest::newRow("above max") << "a.json"
                                   << R"({"train_module": {"optim": {"beta2": 1.5}}})"
                                   << "train_module.optim.beta2: must be <= 1 (got 1.5)";
        QTest::newRow("bad enum")
            << "a.json"
            << R"({"trainer": {"load_strategy": "sometimes"}})"
            << R"(trainer.load_strategy: invalid value "sometimes" (valid: if_available, always, never))";
        QTest::newRow("bad duration")
            << "a.json"
            << R"({"trainer": {"max_duration": "ten steps"}})"
            << R"(trainer.max_duration: invalid duration "ten steps" (expected e.g. "100steps", "2epochs", "5e6tokens" or {"value": 100, "unit": "steps"}))";
        QTest::newRow("bad duration unit")
            << "a.json"
            << R"({"trainer": {"max_duration": {"value": 5, "unit": "hours"}}})"
            << R"(trainer.max_duration.unit: invalid value "hours" (valid: steps, epochs, tokens))";
        QTest::newRow("global batch")
            << "a.json"
            << R"({"data_loader": {"global_batch_size": 3072}, "train_module": {"rank_microbatch_size": 2048}})"
            << "data_loader.global_batch_size: must be divisible by "
               "train_module.rank_microbatch_size x launch.nproc (2048 x 1 = 2048), got 3072";
        QTest::newRow("global batch ranks")
            << "a.json"
            << R"({"launch": {"nproc": 3}})"
            << "data_loader.global_batch_size: must be divisible by "
               "train_module.rank_microbatch_size x launch.nproc (1024 x 3 = 3072), got 2048";
        QTest::newRow("micro batch") << "a.json"
                                     << R"({"train_module": {"rank_microbatch_size": 1000}})"
                                     << "train_module.rank_microbatch_size: must be a multiple of "
                                        "dataset.sequence_length (64), got 1000";
        QTest::newRow("heads") << "a.json"
                               << R"({"model": {"d_model": 64, "n_heads": 5}})"
                               << "model.d_model: must be a multiple of model.n_heads (5) unless "
                                  "model.head_dim is set (got 64)";
        QTest::newRow("ephemeral interval")
            << "a.json"
            << R"({"trainer": {"callbacks": {"checkpointer": {"save_interval": 10, "ephemeral_save_interval": 20}}}})"
            << "trainer.callbacks.checkpointer.ephemeral_save_interval: must be smaller than "
               "save_interval (10)";
        QTest::newRow("missing data")
            << "a.json"
            << R"({"dataset": {"source": "text", "paths": ["/nonexistent/corpus.txt"]}})"
            << "dataset.paths[0]: no such file or folder: /nonexistent/corpus.txt";
        QTest::newRow("warmup twice")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "wsd", "warmup_fraction": 0.1}}})"
            << "train_module.scheduler.warmup_fraction: set warmup or warmup_fraction, not both "
               "(set warmup to null to use warmup_fraction)";
        QTest::newRow("no warmup")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "inv_sqrt_with_warmup", "warmup": null}}})"
            << "train_module.scheduler.warmup: inv_sqrt_with_warmup needs warmup or "
               "warmup_fraction";
        QTest::newRow("decay twice")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "wsd", "decay": 50}}})"
            << "train_module.scheduler.decay_fraction: set decay or decay_fraction, not both (set "
               "decay to null to use decay_fraction)";
        QTest::newRow("power law")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "power_lr", "b": 0.5}}})"
            << "train_module.scheduler.b: must be negative for a decaying power law (got 0.5)";
        QTest::newRow("warmup floor")
            << "a.json"
            << R"({"train_module": {"optim": {"lr": 0.001}, "scheduler": {"warmup_min_lr": 0.01}}})"
            << "train_module.scheduler.warmup_min_lr: must be below the peak LR 0.001 (got 0.01)";
        QTest::newRow("wsds period")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "wsds", "warmup": 95, "period_lengths": [100, 50]}}})"
            << "train_module.scheduler.period_lengths[0]: the first period (100) is shorter than "
               "warmup (95) + decay (10)";
        QTest::newRow("composable stage")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "composable", "stages": [{"duration": 10}]}}})"
            << "train_module.scheduler.stages[0].end_lr: a stage needs end_lr or end_lr_fraction";
        QTest::newRow("sequential lengths")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "sequential", "schedulers": [{"name": "constant"}, {"name": "constant"}]}}})"
            << "train_module.scheduler.schedulers_max: needs one length for every schedule but the "
               "last (1), got 0";
        QTest::newRow("sequential nested")
            << "a.json"
            << R"({"train_module": {"scheduler": {"name": "sequential", "schedulers": [{"name": "sequential"}]}}})"
            << "train_module.scheduler.schedulers[0].name: a sequential schedule cannot hold "
               "another sequential one";
        QTest::newRow("group without globs")
            << "a.json"
            << R"({"train_module": {"optim": {"group_overrides": [{"weight_decay": 0}]}}})"
            << "train_module.optim.group_overrides[0].params: needs at least one parameter-name "
               "glob";
        QTest::newRow("bad optimizer")
            << "a.json"
            << R"({"train_module": {"optim": {"name": "sgd"}}})"
            << R"(train_module.optim.name: invalid value "sgd" (valid: adamw, skip_step_adamw, lion, skip_step_lion))";
        QTest::newRow("list element")
            << "a.json"
            << R"({"trainer": {"steps_to_skip": [{"start": 0, "stop": 3}]}})"
            << "trainer.steps_to_skip[0].start: must be >= 1 (got 0)";
        QTest::newRow("malformed json")
            << "bad.json"
            << "{\n  \"seed\": 1,,\n}"
            << "@bad.json:2:13: malformed JSON: syntax error while parsing object key - unexpected "
               "','; expected string literal";
        QTest::newRow("malformed yaml")
            << "bad.yaml"
            << "model:\n  d_model: [64, 2\nseed: 1\n"
            << "@bad.yaml:3:5: malformed YAML: end of sequence flow not found";
        QTest::newRow("not an object") << "a.json"
                                       << "[1, 2]"
                                       << "@a.json: the config must be an object at the top level";
        // Issue 20: bad input is refused with the file and the reason, and never crashes.
        QTest::newRow("number out of range")
            << "a.json"
            << R"({"train_module": {"optim": {"lr": 1e400}}})"
            << "@a.json:1:35: train_module.optim.lr: number 1e400 is out of range (a double holds "
               "up to about 1.8e308)";
        QTest::newRow("ac interval without its mode")
            << "a.json"
            << R"({"train_module": {"ac_config": {"block_interval": 2}}})"
            << "train_module.ac_config.block_interval: only for mode selected_blocks (mode is "
               "none)";
        QTest::newRow("ac selected_blocks without blocks")
            << "a.json"
            << R"({"train_module": {"ac_config": {"mode": "selected_blocks"}}})"
            << "train_module.ac_config.blocks: selected_blocks takes block_interval or blocks (one "
               "of them)";
        QTest::newRow("ac block beyond the model")
            << "a.json"
            << R"({"model": {"n_layers": 2}, "train_module": {"ac_config": {"mode": "selected_blocks", "blocks": [0, 2]}}})"
            << "train_module.ac_config.blocks[1]: block 2 does not exist (model.n_layers = 2)";
        QTest::newRow("ac module pattern matching nothing")
            << "a.json"
            << R"({"train_module": {"ac_config": {"mode": "selected_modules", "modules": ["blocks.*.mlp"]}}})"
            << "train_module.ac_config.modules[0]: 'blocks.*.mlp' matches no module (they are "
               "blocks.{i}.attention and blocks.{i}.feed_forward)";
        QTest::newRow("number out of range in a list")
            << "a.json"
            << R"({"trainer": {"steps_to_skip": [{"start": 1, "stop": -1e999}]}})"
            << "@a.json:1:53: trainer.steps_to_skip[0].stop: number -1e999 is out of range (a "
               "double holds up to about 1.8e308)";
        QTest::newRow("yaml number out of range")
            << "a.yaml"
            << "train_module:\n  optim:\n    lr: -1e400\n"
            << "@a.yaml:3:9: train_module.optim.lr: number -1e400 is out of range (a double holds "
               "up to about 1.8e308)";
        QTest::newRow("yaml duplicate key")
            << "dup.yaml"
            << "seed: 1\nmodel:\n  d_model: 64\nseed: 2\n"
            << R"(@dup.yaml:4:1: duplicate key "seed" (lines 1 and 4))";
        QTest::newRow("yaml duplicate nested key")
            << "dup.yaml"
            << "model:\n  d_model: 64\n  n_layers: 2\n  d_model: 128\n"
            << R"(@dup.yaml:4:3: model: duplicate key "d_model" (lines 2 and 4))";
        QTest::newRow("yaml duplicate key in a flow mapping")
            << "dup.yaml"
            << "model: {d_model: 64, d_model: 128}\n"
            << R"(@dup.yaml:1:22: model: duplicate key "d_model" (twice on line 1, columns 9 and 22))";
        // Issue 34: JSON kept the last of a repeated key silently.
        QTest::newRow("json duplicate key")
            << "dup.json"
            << R"({"seed": 1, "seed": 2})"
            << R"(@dup.json:1:13: duplicate key "seed" (twice on line 1, columns 2 and 13))";
        QTest::newRow("json duplicate nested key")
            << "dup.json"
            << "{\n  \"seed\": 1,\n  \"model\": {\"d_model\": 64,\n    \"n_layers\": 2, "
               "\"d_model\": 128}\n}\n"
            << R"(@dup.json:4:20: model: duplicate key "d_model" (lines 3 and 4))";
        // Brackets, commas and quotes inside strings are not structure; keys count per object.
        // (Not a raw string: moc misreads \" in one and skips the class.)
        QTest::newRow("json duplicate key in a list")
            << "dup.json"
            << "{\"trainer\": {\"callbacks\": {\"a{[,\\\"\": {}}, "
               "\"steps_to_skip\": [{\"start\": 1, \"stop\": 3}, {\"start\": 4, \"stop\": 6, "
               "\"start\": 5}]}}"
            << R"(@dup.json:1:110: trainer.steps_to_skip[1]: duplicate key "start" (twice on line 1, columns 87 and 110))";
        QTest::newRow("deep json")
            << "deep.json"
            << QString("{\"a\":").repeated(100000) + "1" + QString("}").repeated(100000)
            << "@deep.json:1:1281: nested more than 256 levels deep";
        QTest::newRow("deep yaml")
            << "deep.yaml"
            << "seed: " + QString("[").repeated(300) + QString("]").repeated(300)
            << "@deep.yaml:1:262: nested more than 256 levels deep";
        // 342 bytes that stand for 9^9 strings ("billion laughs"): std::bad_alloc before the limit.
        std::string bomb =
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\","
            "\"lol\"]\n";
        for (char c = 'b'; c <= 'i'; ++c) {
            const std::string prev = std::string("*") + static_cast<char>(c - 1);
            bomb += std::string(1, c) + ": &" + c + " [" + prev;
            for (int k = 1; k < 9; ++k) bomb += "," + prev;
            bomb += "]\n";
        }
        QTest::newRow("alias bomb")
            << "bomb.yaml" << QString::fromStdString(bomb)
            << "@bomb.yaml: too large: more than 100000 values (counting each use of a YAML "
               "alias)";
        QTest::newRow("too large") << "big.json" << QString(5 << 20, ' ')
                                   << "@big.json: too large (5242880 bytes): a config is at most "
                                      "4 MiB";
    }
    void badConfigs() {
        QFETCH(QString, file);
        QFETCH(QString, text);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        std::string path = write_file(dir, file.toStdString(), text.toStdString());
        if (expected.startsWith('@'))
            expected = QString::fromStdString(path) + expected.mid(1 + file.size());
        auto l = load(path);
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues.front().to_string()), expected);

        // The CLI prints the same line and exits 2.
        QProcess p;
        p.start(qEnvironmentVariable("LATHE_BIN_DIR") + "/lathe-engine",
                {"validate", QString::fromStdString(path)});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 2);
        QString out = QString::fromUtf8(p.readAllStandardOutput());
        QVERIFY2(out.split('\n').contains(expected), qPrintable(out));
    }

    void directoryIsNotAConfig() {
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString();
        auto l = load(path);
        QVERIFY(!l.ok());
        const QString expected =
            QString::fromStdString(path) + ": is a directory, not a config file";
        QCOMPARE(QString::fromStdString(l.issues.front().to_string()), expected);

        QProcess p;
        p.start(qEnvironmentVariable("LATHE_BIN_DIR") + "/lathe-engine",
                {"validate", QString::fromStdString(path)});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 2);
        QString out = QString::fromUtf8(p.readAllStandardOutput());
        QVERIFY2(out.split('\n').contains(expected), qPrintable(out));
    }

    // Bad command-line values name the option, the valid range and what was given, and exit 2.
    void badArgumentsAreNamed_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expected");
        const QString nproc =
            "lathe-engine launch: --nproc must be an integer from 1 to 1024, gpu "
            "or auto (got '%1')";
        QTest::newRow("nproc not a number")
            << QStringList{"launch", "--nproc", "abc", "tiny"} << nproc.arg("abc");
        QTest::newRow("nproc beyond int")
            << QStringList{"launch", "--nproc", "9999999999", "tiny"} << nproc.arg("9999999999");
        QTest::newRow("nproc zero") << QStringList{"launch", "--nproc=0", "tiny"} << nproc.arg("0");
        QTest::newRow("nproc trailing")
            << QStringList{"launch", "--nproc", "2x", "tiny"} << nproc.arg("2x");
        QTest::newRow("master port")
            << QStringList{"launch", "--nproc", "2", "--master-port", "70000", "tiny"}
            << "lathe-engine launch: --master-port must be an integer from 0 to 65535 (got "
               "'70000')";
        QTest::newRow("nnodes") << QStringList{"launch", "--nnodes", "-1", "tiny"}
                                << "lathe-engine launch: --nnodes must be an integer from 1 to "
                                   "1024 (got '-1')";
        QTest::newRow("inspect a file") << QStringList{"inspect", "@file"}
                                        << "lathe-engine inspect: @file: is a file, not a "
                                           "checkpoint folder";
    }
    void badArgumentsAreNamed() {
        QFETCH(QStringList, args);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const QString file =
            QString::fromStdString(write_file(dir, "config.json", R"({"seed": 1})"));
        args.replaceInStrings("@file", file);
        expected.replace("@file", file);
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(qEnvironmentVariable("LATHE_BIN_DIR") + "/lathe-engine", args);
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAll());
        QCOMPARE(p.exitCode(), 2);
        QVERIFY2(out.contains(expected), qPrintable(out));
    }

    void everyProblemIsReported() {
        QTemporaryDir dir;
        auto path = write_file(
            dir, "c.json",
            R"({"seed": "x", "model": {"d_model": 0, "foo": 1}, "launch": {"device": "tpu"}})");
        auto l = load(path);
        QCOMPARE(int(l.issues.size()), 4);
    }

    void unreadableFile() {
        auto l = load("does/not/exist.json");
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.issues[0].to_string()),
                 QString("does/not/exist.json: cannot read: No such file or directory"));
        l = load("nosuchpreset");
        QVERIFY(QString::fromStdString(l.issues[0].to_string())
                    .startsWith("nosuchpreset: no such config file or preset"));
    }

    void validConfigExitsZero() {
        QProcess p;
        p.start(qEnvironmentVariable("LATHE_BIN_DIR") + "/lathe-engine",
                {"validate", "tiny", "seed=7"});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 0);
    }

    void hiddenSizeRule() {
        ModelConfig m;
        m.d_model = 128;
        QCOMPARE(m.hidden_size(), int64_t(512));
        m.d_model = 4096;
        QCOMPARE(m.hidden_size(), int64_t(11008));
        m.d_model = 768;
        QCOMPARE(m.hidden_size(), int64_t(2048));
        m.d_model = 12;
        m.hidden_size_multiplier = 1.0;
        QCOMPARE(m.hidden_size(), int64_t(256));
    }

    // The mesh of config/layout.h: OLMo-core's order (dp_replicate, dp_shard, then tp innermost),
    // HSDP's defaults, the problems each naming its field, and the world size the GUI proposes.
    void parallelLayout() {
        ExperimentConfig c = load("tiny").config;
        auto l = parallel_layout(c, 1);
        QVERIFY(l.ok());
        QCOMPARE(QString::fromStdString(l.describe()), QString("single rank"));

        c.train_module.tp_config.degree = 2;
        c.train_module.dp_config.name = DataParallelType::fsdp;
        l = parallel_layout(c, 4);
        QVERIFY(l.ok());
        QCOMPARE(QString::fromStdString(l.describe()), QString("fsdp over 2 x tp 2"));
        QCOMPARE(l.dp, 2);
        QCOMPARE(l.shard, 2);
        // rank = dp_index * tp + tp_index: ranks 0 and 1 share a TP group.
        QCOMPARE(l.tp_index(1), 1);
        QCOMPARE(l.dp_index(1), 0);
        QCOMPARE(l.dp_index(2), 1);
        QCOMPARE(proposed_world_size(c), 4);

        l = parallel_layout(c, 3);
        QVERIFY(!l.ok());
        QCOMPARE(QString::fromStdString(l.problems.at(0)),
                 QString("train_module.tp_config.degree: 2 does not divide the world size (3 "
                         "ranks); use a multiple of 2 ranks"));
        // Across nodes, TP stays within a node.
        QVERIFY(!parallel_layout(c, 4, 4).ok());

        c.train_module.tp_config.degree = 1;
        c.train_module.dp_config.name = DataParallelType::hsdp;
        l = parallel_layout(c, 8, 2);  // default: one replica per node
        QVERIFY(l.ok());
        QCOMPARE(l.replicas, 2);
        QCOMPARE(l.shard, 4);
        QCOMPARE(l.replica_index(5), 1);
        QCOMPARE(l.shard_index(5), 1);
        QCOMPARE(QString::fromStdString(l.describe()), QString("hsdp 2 replicas x 4 shards"));
        c.train_module.dp_config.shard_degree = 3;
        l = parallel_layout(c, 8);
        QVERIFY(!l.ok());
        QVERIFY(QString::fromStdString(l.problems.at(0))
                    .startsWith("train_module.dp_config.shard_degree: 3 does not divide"));
        c.train_module.dp_config.shard_degree = 2;
        c.train_module.dp_config.num_replicas = 2;
        QCOMPARE(proposed_world_size(c), 4);
        QVERIFY(!parallel_layout(c, 8).ok());  // 2 x 2 is not 8

        // Divisibility of the model, as config validation reports it.
        c = load("tiny").config;
        c.train_module.tp_config.degree = 3;
        const auto problems = tensor_parallel_problems(c);
        QVERIFY(!problems.empty());
        QCOMPARE(QString::fromStdString(problems.at(0)),
                 QString("train_module.tp_config.degree: 3 does not divide model.n_heads (4)"));
        const auto loaded = load("tiny", {"train_module.tp_config.degree=3"});
        QVERIFY(!loaded.ok());
        QCOMPARE(QString::fromStdString(loaded.issues.at(0).path),
                 QString("train_module.tp_config.degree"));

        // The memory estimate divides by the shard group and the TP degree.
        c = load("tiny").config;
        const auto whole = estimate_training_memory(c, 4);
        c.train_module.tp_config.degree = 2;
        c.train_module.dp_config.name = DataParallelType::fsdp;
        const auto split = estimate_training_memory(c, 4);
        QCOMPARE(split.split, 4);
        QCOMPARE(split.bytes_per_rank, whole.bytes_per_rank / 4);
    }

    // Issue 34: from model.d_model=200000000 up the state passed int64, the estimate printed
    // "-9223372036854775808 bytes" and the does-not-fit guard let the model through.
    void hugeModelsAreRefused_data() {
        QTest::addColumn<QString>("d_model");
        QTest::newRow("2e8") << "200000000";
        QTest::newRow("3e9 (parameters pass int64)") << "3000000000";
        QTest::newRow("near int64 max") << "9223372036854775800";  // 4 heads of an even size
    }
    void hugeModelsAreRefused() {
        QFETCH(QString, d_model);
        const auto l = load("tiny", {"model.d_model=" + d_model.toStdString()});
        QVERIFY2(l.ok(), issues_text(l.issues).c_str());
        const auto e = estimate_training_memory(l.config, 1);
        QVERIFY(e.saturated);
        QCOMPARE(e.bytes_per_rank, std::numeric_limits<int64_t>::max());
        QVERIFY(e.parameters > 0);
        const QString described = QString::fromStdString(e.describe());
        QVERIFY2(described.startsWith("more than 8.00 EiB per rank"), qPrintable(described));
        // Refused with 80 GiB free, and also where the free memory is unknown (validate).
        for (const int64_t free : {int64_t{80} << 30, int64_t{0}}) {
            const QString refusal = QString::fromStdString(memory_refusal(e, free, "cuda:0", 1));
            QVERIFY2(refusal.startsWith("the model does not fit on any device: training it needs "
                                        "more than 8.00 EiB per rank"),
                     qPrintable(refusal));
        }
    }

    // Under the saturation, a huge model keeps its real figure, and the guard refuses it.
    void largeModelEstimateIsExact() {
        auto c = load("tiny", {"model.d_model=200000000"}).config;
        c.train_module.dp_config.name = DataParallelType::fsdp;
        const auto e = estimate_training_memory(c, 4);  // 16 bytes per parameter over 4 ranks
        QVERIFY(!e.saturated);
        QVERIFY(e.parameters > 0);
        const double expected = static_cast<double>(e.parameters) * 4;
        QVERIFY(std::abs(static_cast<double>(e.bytes_per_rank) - expected) < expected * 1e-12);
        const auto tiny = estimate_training_memory(load("tiny").config, 4);
        QVERIFY(e.parameters > tiny.parameters * 1000000000LL);
        QVERIFY(!memory_refusal(e, int64_t{80} << 30, "cuda:0", 1).empty());
        QVERIFY(memory_refusal(e, 0, "cuda:0", 1).empty());  // unknown free memory: not refused
        QVERIFY(memory_refusal(tiny, int64_t{80} << 30, "cuda:0", 1).empty());
    }

    // What an unset field means, for the editor: computed values follow the config, other fields
    // say it in their description's words.
    void nullFieldDefaults() {
        lathe::config::ExperimentConfig c;
        auto d = lathe::config::null_field_defaults(c);
        QCOMPARE(d.at("train_module.optim.beta2").get<double>(), 0.999);
        QCOMPARE(d.at("model.head_dim").get<int64_t>(), c.model.d_model / c.model.n_heads);
        c.train_module.optim.name = lathe::config::OptimizerName::lion;
        d = lathe::config::null_field_defaults(c);
        QCOMPARE(d.at("train_module.optim.weight_decay").get<double>(), 0.0);
        // Every path it names is a nullable field of the schema.
        const auto schema = lathe::config::json_schema();
        for (const auto& [path, value] : d) {
            const lathe::config::Json* node = &schema;
            std::stringstream parts(path);
            for (std::string part; std::getline(parts, part, '.');) {
                QVERIFY2(node->contains("properties") && (*node)["properties"].contains(part),
                         path.c_str());
                node = &(*node)["properties"][part];
            }
            QVERIFY2((*node)["type"].is_array() &&
                         (*node)["type"].dump().find("null") != std::string::npos,
                     path.c_str());
        }
        using lathe::config::null_placeholder;
        const lathe::config::Json v = 0.999;
        QCOMPARE(null_placeholder("anything", &v), std::string("default: 0.999"));
        QCOMPARE(null_placeholder("Dtype of gathered parameters; null keeps model.dtype.", nullptr),
                 std::string("unset: keeps model.dtype"));
        QCOMPARE(null_placeholder("Clip the norm; null disables.", nullptr),
                 std::string("unset: off"));
        QCOMPARE(null_placeholder("No word for it.", nullptr), std::string("unset"));
    }

    // The pre-flight counts a step's peak, not only the training state (issue 34 item 12: the
    // H200 ran out of memory on activations): activations by micro-batch and checkpointing, the
    // logits, autocast's weight copies; a refusal lists the remedies in order, each with the peak
    // it would give.
    void memoryPreflightCountsActivations() {
        auto c =
            load("olmo2_1B",
                 {"train_module.autocast_precision=bfloat16", "dataset.sequence_length=4096",
                  "train_module.max_sequence_length=4096",
                  "train_module.rank_microbatch_size=16384", "data_loader.global_batch_size=65536"})
                .config;
        const auto none = estimate_training_memory(c, 1);
        QVERIFY(none.activation_bytes > none.bytes_per_rank);  // what ran out on the H200
        QVERIFY(none.weight_copy_bytes > 0);
        QCOMPARE(none.peak_bytes, none.bytes_per_rank + none.activation_bytes +
                                      std::max(none.logits_bytes, none.backward_bytes) +
                                      none.weight_copy_bytes);
        auto half = c;
        half.train_module.rank_microbatch_size = 8192;
        QVERIFY(std::abs(double(estimate_training_memory(half, 1).activation_bytes) * 2 -
                         double(none.activation_bytes)) < 16);  // linear in the tokens
        auto full = c;
        full.train_module.ac_config.mode = ActivationCheckpointingMode::full;
        const auto ac = estimate_training_memory(full, 1);
        QVERIFY(ac.activation_bytes * 10 < none.activation_bytes);
        QVERIFY(ac.backward_bytes > 0);  // one block recomputed in backward
        auto tp = c;
        tp.train_module.tp_config.degree = 2;
        QVERIFY(estimate_training_memory(tp, 2).activation_bytes < none.activation_bytes);

        // 60 GiB free: refused, naming the remedies in order with their peaks.
        const std::string refusal = memory_refusal(none, int64_t{60} << 30, "cuda:0", 1, &c);
        const auto at = [&](const std::string& what) { return refusal.find(what); };
        QVERIFY2(at("expected peak") != std::string::npos, refusal.c_str());
        QVERIFY2(at("1. train_module.ac_config.mode=full (" + human_bytes(double(ac.peak_bytes)) +
                    ")") != std::string::npos,
                 refusal.c_str());
        // The largest halving that fits: 8192 tokens in 60 GiB; with less free than even the
        // smallest (one 4096-token sequence) needs, that one is named with its peak.
        QVERIFY(estimate_training_memory(half, 1).peak_bytes < (int64_t{60} << 30));
        QVERIFY2(at("e.g. 8192 (") != std::string::npos, refusal.c_str());
        auto quarter = c;
        quarter.train_module.rank_microbatch_size = 4096;
        const int64_t quarter_peak = estimate_training_memory(quarter, 1).peak_bytes;
        QVERIFY(quarter_peak > (int64_t{20} << 30));
        const std::string tight =
            memory_refusal(none, quarter_peak - (int64_t{1} << 30), "cuda:0", 1, &c);
        QVERIFY2(tight.find("e.g. 4096 (" + human_bytes(double(quarter_peak))) != std::string::npos,
                 tight.c_str());
        QVERIFY(at("ac_config") < at("rank_microbatch_size"));
        QVERIFY(at("rank_microbatch_size") < at("dp_config.name=fsdp"));
        QVERIFY(at("--force") != std::string::npos);
        QVERIFY(memory_refusal(none, int64_t{200} << 30, "cuda:0", 1, &c).empty());
        QVERIFY(memory_refusal(ac, int64_t{60} << 30, "cuda:0", 1, &full).empty());
    }
};

QTEST_GUILESS_MAIN(TestConfig)
#include "test_config.moc"
