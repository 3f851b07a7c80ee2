// The checkpointer on its own: a small Stateful (no trainer, no model) saved and loaded through a
// recording Storage that can fail on demand. The layout, the order of the storage operations
// (files first, rename, .metadata.json last), refusal to overwrite, clean-up after a failed save
// with earlier checkpoints untouched, a failed load that leaves the state as it was, damaged
// (unusable) versus not fitting, setting aside, inspect --verify, async saves, and which folders
// count as checkpoints. Real runs through the trainer: tests/engine/train.
#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/tensor_file.h"
#include "engine/distributed/env.h"
#include "engine/run_folder/checkpoint_names.h"
#include "engine/util/error.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace lathe;
namespace fs = std::filesystem;

namespace {

// A component with two tensors and a JSON state.
struct Toy : stateful::Stateful {
    torch::Tensor weight = torch::arange(12, torch::kFloat32).reshape({3, 4});
    torch::Tensor moment = torch::full({5}, 0.5, torch::kFloat64);
    nlohmann::json json = {{"step", 7}, {"name", "toy"}};
    int tensor_loads = 0;
    bool reject = false;  // load_state_tensors refuses, as a model of another shape does

    std::vector<std::pair<std::string, torch::Tensor>> state_tensors() override {
        return {{"model.weight", weight}, {"optim.moment", moment}};
    }
    void load_state_tensors(const std::map<std::string, torch::Tensor>& t,
                            bool load_optim) override {
        if (reject) throw Error("checkpoint tensor 'model.weight' does not fit");
        weight = t.at("model.weight").clone();
        if (load_optim) moment = t.at("optim.moment").clone();
        ++tensor_loads;
    }
    nlohmann::json state_dict() const override { return json; }
    void load_state_dict(const nlohmann::json& s) override { json = s; }
};

// Local storage that records every call and can fail one kind of call.
class RecordingStorage : public remote::LocalStorage {
public:
    std::vector<std::string>* log;
    std::string fail_on;  // "rename", "make_dirs" ...
    explicit RecordingStorage(std::vector<std::string>* l) : log(l) {}

protected:
    void note(const std::string& op, const std::string& a, const std::string& b = {}) const {
        log->push_back(op + " " + fs::path(a).filename().string() +
                       (b.empty() ? "" : " " + fs::path(b).filename().string()));
        if (op == fail_on) throw Error(a + ": injected " + op + " failure");
    }
    void do_make_dirs(const std::string& p) override {
        note("make_dirs", p);
        LocalStorage::do_make_dirs(p);
    }
    void do_remove_all(const std::string& p) override {
        note("remove_all", p);
        LocalStorage::do_remove_all(p);
    }
    void do_rename(const std::string& from, const std::string& to) override {
        note("rename", from, to);
        LocalStorage::do_rename(from, to);
    }
};

}  // namespace

class TestCheckpointer : public QObject {
    Q_OBJECT
    std::unique_ptr<dist::Environment> env_;
    QTemporaryDir dir_;
    std::vector<std::string> log_;

    std::string path(const std::string& name) const {
        return dir_.path().toStdString() + "/" + name;
    }
    std::unique_ptr<checkpoint::Checkpointer> make(bool overwrite = false,
                                                   const std::string& fail_on = {}) {
        auto storage = std::make_unique<RecordingStorage>(&log_);
        storage->fail_on = fail_on;
        return std::make_unique<checkpoint::Checkpointer>(*env_, overwrite, std::move(storage));
    }

private Q_SLOTS:
    void initTestCase() {
        dist::EnvironmentOptions o;
        o.num_threads = 1;
        env_ = dist::prepare_training_environment(o);
    }
    void init() { log_.clear(); }

    void savesTheLayoutInOrder() {
        Toy toy;
        auto ck = make();
        ck->save(path("step10"), toy, /*ephemeral=*/false, /*async=*/false,
                 {{"config.json", "{}\n"}});
        for (const char* f :
             {".metadata.json", "train/rank0.json", "model_and_optim/rank0.lathe", "config.json"})
            QVERIFY2(fs::exists(path("step10/") + f), f);
        QVERIFY(!fs::exists(path("step10-tmp")));
        QVERIFY(checkpoint::Checkpointer::dir_is_checkpoint(path("step10")));
        // Folders made under the temporary name, then one rename into place.
        const std::vector<std::string> expected = {"make_dirs train", "make_dirs model_and_optim",
                                                   "rename step10-tmp step10"};
        QCOMPARE(log_, expected);
        // .metadata.json is written after the rename: it is the newest file of the checkpoint.
        const auto meta = fs::last_write_time(path("step10/.metadata.json"));
        QVERIFY(meta >= fs::last_write_time(path("step10/model_and_optim/rank0.lathe")));
        QVERIFY(meta >= fs::last_write_time(path("step10/train/rank0.json")));
    }

    void loadsIntoTheStateful() {
        Toy saved;
        saved.weight.mul_(3);
        saved.json["step"] = 11;
        make()->save(path("step11"), saved, false, false);
        Toy loaded;
        make()->load(path("step11"), loaded, /*load_trainer_state=*/true,
                     /*load_optim_state=*/true);
        QVERIFY(torch::equal(loaded.weight, saved.weight));
        QVERIFY(torch::equal(loaded.moment, saved.moment));
        QCOMPARE(loaded.json, saved.json);
        // Without trainer state and optimizer: only the model tensors change.
        Toy fresh;
        fresh.moment.fill_(9);
        make()->load(path("step11"), fresh, false, false);
        QVERIFY(torch::equal(fresh.weight, saved.weight));
        QCOMPARE(fresh.moment[0].item<double>(), 9.0);
        QCOMPARE(fresh.json["step"].get<int>(), 7);
    }

    void refusesToOverwrite() {
        Toy toy;
        make()->save(path("step12"), toy, false, false);
        try {
            make()->save(path("step12"), toy, false, false);
            QFAIL("saved over an existing checkpoint");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("already exists") != std::string::npos, e.what());
        }
        toy.json["step"] = 99;
        make(/*overwrite=*/true)->save(path("step12"), toy, false, false);
        Toy back;
        make()->load(path("step12"), back, true, true);
        QCOMPARE(back.json["step"].get<int>(), 99);
    }

    void aFailedSaveLeavesNothingAndTouchesNothing() {
        Toy toy;
        make()->save(path("step20"), toy, false, false);
        try {
            make(false, "rename")->save(path("step30"), toy, false, false);
            QFAIL("the injected failure did not surface");
        } catch (const Error& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("saving checkpoint") != std::string::npos &&
                         what.find("injected rename failure") != std::string::npos,
                     e.what());
        }
        QVERIFY(!fs::exists(path("step30")));
        QVERIFY(!fs::exists(path("step30-tmp")));
        QVERIFY(checkpoint::Checkpointer::dir_is_checkpoint(path("step20")));
    }

    void aFailedLoadLeavesTheStateAsItWas() {
        Toy toy;
        make()->save(path("step40"), toy, false, false);
        // One flipped byte in the last tensor's data (5 doubles at the start of the file's last 64
        // bytes; the rest of those is alignment padding).
        const std::string file = path("step40/model_and_optim/rank0.lathe");
        {
            std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-64 + 5, std::ios::end);
            char c = 0;
            f.read(&c, 1);
            f.seekp(-64 + 5, std::ios::end);
            c = static_cast<char>(c ^ 0x40);
            f.write(&c, 1);
        }
        Toy target;
        target.json["step"] = 1;
        try {
            make()->load(path("step40"), target, true, true);
            QFAIL("a corrupt checkpoint loaded");
        } catch (const checkpoint::UnusableCheckpointError& e) {
            QVERIFY2(std::string(e.what()).find("checksum") != std::string::npos, e.what());
        }
        QCOMPARE(target.tensor_loads, 0);
        QCOMPARE(target.json["step"].get<int>(), 1);
    }

    void asyncSaveReportsWhenDone() {
        Toy toy;
        auto ck = make();
        std::atomic<double> seconds{-1};
        ck->save(path("step50"), toy, /*ephemeral=*/true, /*async=*/true, {},
                 [&](double s) { seconds = s; });
        toy.weight.fill_(-1);  // the training thread changes its tensors right away
        ck->wait();
        QVERIFY(seconds >= 0);
        Toy back;
        make()->load(path("step50"), back, true, true);
        QCOMPARE(back.weight[2][3].item<float>(), 11.0f);  // the state at save time
        const auto found = checkpoint::Checkpointer::find_checkpoints(dir_.path().toStdString());
        QVERIFY(std::any_of(found.begin(), found.end(), [](const auto& c) {
            return c.step == 50 && c.complete && c.ephemeral;
        }));
    }

    void whichFoldersAreCheckpoints() {
        QTemporaryDir run;
        const std::string root = run.path().toStdString();
        Toy toy;
        make()->save(root + "/step5", toy, false, false);
        fs::create_directories(root + "/step6-tmp/train");        // an interrupted save
        fs::create_directories(root + "/step7/train");            // no .metadata.json
        fs::create_directories(root + "/step8.abandoned/train");  // set aside by a resume
        fs::create_directories(root + "/step4.unusable/train");   // set aside at load
        fs::create_directories(root + "/step9x");                 // not a checkpoint name
        const auto all = checkpoint::Checkpointer::find_checkpoints(root);
        std::vector<std::pair<int64_t, bool>> got;
        got.reserve(all.size());
        for (const auto& c : all) got.emplace_back(c.step, c.complete);
        const std::vector<std::pair<int64_t, bool>> expected = {{5, true}, {6, false}, {7, false}};
        QCOMPARE(got, expected);
        QVERIFY2(all[2].problem.find("no .metadata.json") != std::string::npos,
                 all[2].problem.c_str());
        const auto complete = checkpoint::Checkpointer::complete_checkpoints(root);
        QCOMPARE(complete.size(), std::size_t(1));
        // clean_partial removes only interrupted saves (-tmp): a step folder without metadata may
        // hold good tensors and is set aside instead (set_aside_unusable), never deleted.
        make()->clean_partial(root);
        QVERIFY(fs::exists(root + "/step5"));
        QVERIFY(!fs::exists(root + "/step6-tmp"));
        QVERIFY(fs::exists(root + "/step7"));
        QVERIFY(fs::exists(root + "/step8.abandoned"));
        QVERIFY(fs::exists(root + "/step4.unusable"));
    }

    void damagedIsUnusableNotFittingIsAnError() {
        // A train state for another step than its folder's: damaged, whatever the config.
        Toy toy;
        toy.json["global_step"] = 25;
        make()->save(path("step30"), toy, false, false);
        Toy target;
        try {
            make()->load(path("step30"), target, true, true);
            QFAIL("a train state for step 25 loaded from step30");
        } catch (const checkpoint::UnusableCheckpointError& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("train/rank0.json") != std::string::npos &&
                         what.find("step 25") != std::string::npos &&
                         what.find("step30") != std::string::npos,
                     e.what());
        }
        QCOMPARE(target.tensor_loads, 0);
        // A whole checkpoint the state refuses (another model shape): a plain error, since a
        // config change can make it load; it must not be set aside.
        toy.json["global_step"] = 31;
        make()->save(path("step31"), toy, false, false);
        target.reject = true;
        try {
            make()->load(path("step31"), target, true, true);
            QFAIL("the refusal did not surface");
        } catch (const checkpoint::UnusableCheckpointError& e) {
            QFAIL(e.what());
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("does not fit") != std::string::npos, e.what());
        }
    }

    void setAsideUnusable() {
        Toy toy;
        make()->save(path("step60"), toy, false, false);
        auto record = make()->set_aside_unusable(path("step60"), "bad bytes");
        QCOMPARE(record.moved_to, std::string("step60.unusable"));
        QCOMPARE(record.step, int64_t(60));
        QVERIFY(!fs::exists(path("step60")));
        QVERIFY(fs::exists(path("step60.unusable/model_and_optim/rank0.lathe")));  // kept
        const auto back = run_folder::read_record<run_folder::UnusableCheckpoint>(
            path("step60.unusable/unusable.json"));
        QVERIFY(back);
        QCOMPARE(back->reason, std::string("bad bytes"));
        QCOMPARE(back->checkpoint, path("step60"));
        // A second one of the same step takes the next free name.
        make()->save(path("step60"), toy, false, false);
        record = make()->set_aside_unusable(path("step60"), "again");
        QCOMPARE(record.moved_to, std::string("step60.unusable1"));
        const auto found = checkpoint::Checkpointer::find_checkpoints(dir_.path().toStdString());
        QVERIFY(
            std::none_of(found.begin(), found.end(), [](const auto& c) { return c.step == 60; }));
    }

    void inspectVerifies() {
        Toy toy;
        toy.json["global_step"] = 70;
        make()->save(path("step70"), toy, false, false);
        auto plain = checkpoint::inspect_checkpoint(path("step70"));
        QCOMPARE(plain.verified, false);
        QVERIFY(plain.verification.value_or("").find("not verified") == 0);
        QCOMPARE(plain.global_step, std::optional<int64_t>(70));
        auto good = checkpoint::inspect_checkpoint(path("step70"), /*verify=*/true);
        QCOMPARE(good.verified, true);
        QVERIFY(!good.problems);
        // One flipped byte in optim.moment's data (the last tensor): complete, but not verified.
        {
            std::fstream f(path("step70/model_and_optim/rank0.lathe"),
                           std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-64 + 3, std::ios::end);
            char c = 0;
            f.read(&c, 1);
            f.seekp(-64 + 3, std::ios::end);
            c = static_cast<char>(c ^ 0x10);
            f.write(&c, 1);
        }
        auto bad = checkpoint::inspect_checkpoint(path("step70"), true);
        QCOMPARE(bad.complete, true);
        QCOMPARE(bad.verified, false);
        QVERIFY(bad.problems);
        std::string problems;
        for (const auto& p : *bad.problems) problems += p + "\n";
        QVERIFY2(problems.find("rank0.lathe") != std::string::npos &&
                     problems.find("optim.moment") != std::string::npos,
                 problems.c_str());
    }

    void checkpointNames() {
        using run_folder::CheckpointName;
        using run_folder::parse_checkpoint_name;
        QCOMPARE(parse_checkpoint_name("step15")->step, int64_t(15));
        QVERIFY(parse_checkpoint_name("step15")->kind == CheckpointName::Kind::Saved);
        QVERIFY(parse_checkpoint_name("step15-tmp")->kind == CheckpointName::Kind::Temporary);
        QVERIFY(parse_checkpoint_name("step15.abandoned")->kind == CheckpointName::Kind::Abandoned);
        QVERIFY(parse_checkpoint_name("step15.abandoned3")->kind ==
                CheckpointName::Kind::Abandoned);
        for (const char* bad : {"step", "stepx", "step15-tmp2", "step15.abandonedx", "Step15",
                                "step-1", "step99999999999999999999", "step15 "})
            QVERIFY2(!parse_checkpoint_name(bad), bad);
        QVERIFY(parse_checkpoint_name("step15.unusable")->kind == CheckpointName::Kind::Unusable);
        QVERIFY(parse_checkpoint_name("step15.unusable2")->kind == CheckpointName::Kind::Unusable);
        QVERIFY(!parse_checkpoint_name("step15.unusablex"));
        QCOMPARE(run_folder::abandoned_path("/r/step15",
                                            [](const std::string& p) {
                                                return p == "/r/step15.abandoned" ||
                                                       p == "/r/step15.abandoned1";
                                            }),
                 std::string("/r/step15.abandoned2"));
    }
};

QTEST_GUILESS_MAIN(TestCheckpointer)
#include "test_checkpointer.moc"
