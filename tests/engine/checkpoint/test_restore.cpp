// checkpoint::Restorer: what a run starts from (engine/checkpoint/restore.h), on real checkpoint
// folders written by the Checkpointer, with a stand-in RestoreTarget that records what it was
// asked to load and can refuse a checkpoint as damaged or as not fitting the run. The end-to-end
// runs (a real Trainer) are in tests/engine/train/test_checkpointing.
#include "engine/checkpoint/checkpointer.h"
#include "engine/checkpoint/restore.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <set>

using namespace lathe;
using lathe::testing::error_of;
namespace fs = std::filesystem;
using checkpoint::AfterFailure;
using checkpoint::LoadFailure;
using config::LoadStrategy;

namespace {

struct Toy : stateful::Stateful {
    torch::Tensor weight = torch::arange(4, torch::kFloat32);
    nlohmann::json json = {{"step", 1}};
    std::vector<std::pair<std::string, torch::Tensor>> state_tensors() override {
        return {{"model.weight", weight}};
    }
    void load_state_tensors(const std::map<std::string, torch::Tensor>& t, bool) override {
        weight = t.at("model.weight").clone();
    }
    nlohmann::json state_dict() const override { return json; }
    void load_state_dict(const nlohmann::json& s) override { json = s; }
};

// Records each load; refuses the checkpoints named in `damaged` (UnusableCheckpointError) and
// `unfit` (another error), as a real run refuses a corrupted file or another model's tensors.
struct Target : checkpoint::RestoreTarget {
    std::vector<std::string> tried, hf, restored_from;
    std::set<std::string> damaged, unfit;
    void load_checkpoint(const std::string& dir, bool, bool) override {
        const std::string name = fs::path(dir).filename().string();
        tried.push_back(name);
        if (damaged.count(name)) throw checkpoint::UnusableCheckpointError(dir + ": bad bytes");
        if (unfit.count(name)) throw Error(dir + ": model.weight has another shape");
    }
    void load_hf_model(const std::string& dir) override { hf.push_back(dir); }
    void restored(const std::string& dir, double seconds) override {
        QVERIFY(seconds >= 0);
        restored_from.push_back(fs::path(dir).filename().string());
    }
};

}  // namespace

class TestRestore : public QObject {
    Q_OBJECT
    std::unique_ptr<dist::Environment> env_;
    std::unique_ptr<checkpoint::Checkpointer> ck_;
    QTemporaryDir tmp_;
    int folders_ = 0;

    // A new run folder holding complete checkpoints at `steps`.
    std::string run_with(const std::vector<int>& steps) {
        std::string dir = tmp_.path().toStdString() + "/run" + std::to_string(folders_++);
        fs::create_directories(dir);
        Toy toy;
        for (int s : steps) ck_->save(dir + "/step" + std::to_string(s), toy, false, false);
        return dir;
    }
    checkpoint::Restorer restorer(const std::string& run, LoadStrategy strategy,
                                  std::optional<std::string> load_path = {}) {
        checkpoint::RestoreSettings s;
        s.save_folder = s.checkpoint_folder = run;
        s.strategy = strategy;
        s.load_path = std::move(load_path);
        return checkpoint::Restorer(*ck_, *env_, s);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        dist::EnvironmentOptions o;
        o.num_threads = 1;
        env_ = dist::prepare_training_environment(o);
        ck_ = std::make_unique<checkpoint::Checkpointer>(*env_, false);
    }

    void theRule() {
        using checkpoint::after_failed_load;
        for (auto s : {LoadStrategy::if_available, LoadStrategy::always})
            for (bool own : {true, false})
                for (bool next : {true, false})
                    QCOMPARE(after_failed_load(LoadFailure::does_not_fit, own, s, next),
                             AfterFailure::stop);
        for (auto s : {LoadStrategy::if_available, LoadStrategy::always})
            for (bool next : {true, false})
                QCOMPARE(after_failed_load(LoadFailure::damaged, true, s, next),
                         AfterFailure::set_aside_and_fall_back);
        QCOMPARE(after_failed_load(LoadFailure::damaged, false, LoadStrategy::if_available, true),
                 AfterFailure::fall_back);
        QCOMPARE(after_failed_load(LoadFailure::damaged, false, LoadStrategy::if_available, false),
                 AfterFailure::stop);
        QCOMPARE(after_failed_load(LoadFailure::damaged, false, LoadStrategy::always, true),
                 AfterFailure::stop);
    }

    void candidatesNewestFirst() {
        const std::string run = run_with({10, 30, 20});
        QCOMPARE(checkpoint::restore_candidates(run),
                 (std::vector<std::string>{run + "/step30", run + "/step20", run + "/step10"}));
        QCOMPARE(checkpoint::restore_candidates(run + "/step20"),
                 std::vector<std::string>{run + "/step20"});
        const std::string bare = tmp_.path().toStdString() + "/bare";
        fs::create_directories(bare + "/model_and_optim");
        QVERIFY(error_of([&] {
                    checkpoint::restore_candidates(bare);
                }).find("not a complete checkpoint") != std::string::npos);
        QVERIFY(checkpoint::is_own_checkpoint_folder(run + "/", run));
        QVERIFY(checkpoint::is_own_checkpoint_folder(
            run + "/../" + fs::path(run).filename().string(), run));
        QVERIFY(!checkpoint::is_own_checkpoint_folder(bare, run));
        QVERIFY(checkpoint::is_own_checkpoint_folder("s3://b/run", "s3://b/run/"));
        QVERIFY(!checkpoint::is_own_checkpoint_folder("s3://b/other", "s3://b/run"));
    }

    void damagedOwnCheckpointsAreSetAside() {
        const std::string run = run_with({10, 20, 30});
        Target t;
        t.damaged = {"step30", "step20"};
        QVERIFY(restorer(run, LoadStrategy::if_available).restore(t, false));
        QCOMPARE(t.tried, (std::vector<std::string>{"step30", "step20", "step10"}));
        QCOMPARE(t.restored_from, std::vector<std::string>{"step10"});
        QVERIFY(fs::exists(run + "/step30.unusable"));
        QVERIFY(fs::exists(run + "/step20.unusable"));
        QVERIFY(!fs::exists(run + "/step30"));
        // history.jsonl says so, with the reason.
        std::ifstream history(run_folder::join(run, run_folder::kHistoryFile));
        const std::string text((std::istreambuf_iterator<char>(history)), {});
        QVERIFY2(text.find("set_aside_unusable") != std::string::npos &&
                     text.find("bad bytes") != std::string::npos,
                 text.c_str());
    }

    void aCheckpointThatDoesNotFitStops() {
        const std::string run = run_with({10, 20});
        Target t;
        t.unfit = {"step20"};
        const std::string e =
            error_of([&] { restorer(run, LoadStrategy::if_available).restore(t, false); });
        QVERIFY2(e.find("cannot load checkpoint " + run + "/step20") != std::string::npos,
                 e.c_str());
        QCOMPARE(t.tried, std::vector<std::string>{"step20"});
        QVERIFY(fs::exists(run + "/step20"));  // nothing moved
    }

    void loadPathAfterAnEmptyRunFolder() {
        const std::string run = run_with({});
        const std::string other = run_with({5, 7});
        Target t;
        t.damaged = {"step7"};
        // Elsewhere nothing is moved: if_available falls back to the older one ...
        QVERIFY(restorer(run, LoadStrategy::if_available, other).restore(t, false));
        QCOMPARE(t.restored_from, std::vector<std::string>{"step5"});
        QVERIFY(fs::exists(other + "/step7"));
        // ... always stops at the damaged one.
        Target strict;
        strict.damaged = {"step7"};
        QVERIFY(error_of([&] {
                    restorer(run, LoadStrategy::always, other).restore(strict, false);
                }).find("bad bytes") != std::string::npos);
        // A run folder with a checkpoint ignores load_path.
        const std::string own = run_with({3});
        Target first;
        QVERIFY(restorer(own, LoadStrategy::if_available, other).restore(first, false));
        QCOMPARE(first.restored_from, std::vector<std::string>{"step3"});
    }

    void nothingToLoad() {
        const std::string run = run_with({});
        Target t;
        QVERIFY(!restorer(run, LoadStrategy::if_available).restore(t, false));
        QVERIFY(error_of([&] {
                    restorer(run, LoadStrategy::always).restore(t, false);
                }).find("load_strategy is always") != std::string::npos);
        // never: nothing is even looked at.
        const std::string full = run_with({4});
        QVERIFY(!restorer(full, LoadStrategy::never).restore(t, false));
        QVERIFY(t.tried.empty());
        // Already loaded (--resume-from): the run folder is not searched again.
        QVERIFY(restorer(full, LoadStrategy::if_available).restore(t, true));
        QVERIFY(t.tried.empty());
    }

    void aRunThatTrainedBeforeDoesNotStartOver() {
        const std::string run = run_with({});
        QCOMPARE(checkpoint::earlier_progress(run), std::string());
        run_folder::RunStatus status;
        status.state = "stopped";
        status.step = 12;
        run_folder::write_record(run_folder::join(run, run_folder::kStatusFile), status);
        QCOMPARE(checkpoint::earlier_progress(run),
                 std::string("its status.json says it reached step 12"));
        Target t;
        const std::string e =
            error_of([&] { restorer(run, LoadStrategy::if_available).restore(t, false); });
        QVERIFY2(e.find("has trained before") != std::string::npos, e.c_str());
    }
};

QTEST_GUILESS_MAIN(TestRestore)
#include "test_restore.moc"
