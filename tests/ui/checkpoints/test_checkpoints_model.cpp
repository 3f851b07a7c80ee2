// CheckpointsModel and the checks behind it, on checkpoint folders written by hand: complete,
// partial, abandoned and corrupt ones (with the reason), Resume offered only for usable ones (also
// in the panel's buttons), deletion, background CRC verification; ResumePlan's refusal of unsafe
// config changes and its launch arguments; ConfigDiffModel.
#include "tests/ui/runs/run_fixtures.h"
#include "ui/checkpoints/checkpoint_info.h"
#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/checkpoints_panel.h"
#include "ui/checkpoints/resume_plan.h"
#include "ui/runs/config_diff.h"

#include <QAbstractItemModelTester>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

using namespace lathe::ui;
using namespace lathe::testing;
using Status = CheckpointInfo::Status;

namespace {

QJsonObject tinyConfig(const QString& runDir) {
    return QJsonObject{
        {"run_name", QFileInfo(runDir).fileName()},
        {"model", QJsonObject{{"d_model", 64}, {"n_layers", 2}}},
        {"dataset", QJsonObject{{"sequence_length", 64}}},
        {"train_module",
         QJsonObject{{"max_sequence_length", 64}, {"optim", QJsonObject{{"lr", 0.003}}}}},
        {"trainer", QJsonObject{{"save_folder", runDir}, {"hard_stop", QJsonValue()}}},
        {"launch", QJsonObject{{"nproc", 1}}}};
}

Json toJson(const QJsonObject& o) {
    return Json::parse(QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
}

}  // namespace

class TestCheckpointsModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void kinds_data() {
        QTest::addColumn<QString>("damage");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("reasonPart");
        QTest::newRow("complete") << "" << int(Status::Complete) << "";
        QTest::newRow("tmp") << "tmp" << int(Status::Partial) << "temporary";
        QTest::newRow("no metadata") << "nometa" << int(Status::Partial) << ".metadata.json";
        QTest::newRow("abandoned") << "abandoned" << int(Status::Abandoned) << "resumed";
        QTest::newRow("truncated model") << "truncate" << int(Status::Unusable) << "truncated";
        QTest::newRow("bad magic") << "magic" << int(Status::Unusable) << "magic";
        QTest::newRow("no model") << "nomodel" << int(Status::Unusable) << "missing";
        QTest::newRow("bad train state") << "train" << int(Status::Unusable) << "train/rank0.json";
        QTest::newRow("bad metadata") << "meta" << int(Status::Unusable) << ".metadata.json";
        QTest::newRow("abandoned, corrupt")
            << "abandoned+truncate" << int(Status::Unusable) << "abandoned; ";
        // Set aside by the engine when it failed to load: the reason comes from unusable.json.
        QTest::newRow("set aside as unusable")
            << "unusable" << int(Status::Unusable) << "could not be loaded: bad bytes in w";
        QTest::newRow("set aside, no reason file")
            << "unusable+noreason" << int(Status::Unusable) << "unusable.json";
    }
    void kinds() {
        QFETCH(QString, damage);
        QFETCH(int, status);
        QFETCH(QString, reasonPart);
        QTemporaryDir run;
        QString dir = makeCheckpoint(run.path(), 15);
        const QString model = dir + "/model_and_optim/rank0.lathe";
        if (damage.contains("abandoned")) {
            QVERIFY(QDir().rename(dir, dir + ".abandoned"));
            dir += ".abandoned";
        }
        if (damage.contains("unusable")) {
            QVERIFY(QDir().rename(dir, dir + ".unusable2"));
            dir += ".unusable2";
            if (!damage.contains("noreason"))
                writeFile(
                    dir + "/unusable.json",
                    R"({"event": "set_aside_unusable", "step": 15, "reason": "bad bytes in w"})");
        }
        if (damage == "tmp") {
            QVERIFY(QDir().rename(dir, dir + "-tmp"));
            dir += "-tmp";
        }
        if (damage == "nometa") QVERIFY(QFile::remove(dir + "/.metadata.json"));
        if (damage.contains("truncate")) {
            QFile f(dir + "/model_and_optim/rank0.lathe");
            QVERIFY(f.resize(f.size() - 10));
        }
        if (damage == "magic") writeFile(model, "NOTLATHE" + tensorFile().mid(8));
        if (damage == "nomodel") QVERIFY(QFile::remove(model));
        if (damage == "train") writeFile(dir + "/train/rank0.json", "{\"global_st");
        if (damage == "meta") writeFile(dir + "/.metadata.json", "[1,");

        const CheckpointInfo c = inspectCheckpoint(dir);
        QCOMPARE(c.step, 15);
        QCOMPARE(int(c.status), status);
        QVERIFY2(c.reason.contains(reasonPart), qPrintable(c.reason));
        QCOMPARE(c.canResume(), status == int(Status::Complete));
        QCOMPARE(c.canResumeAsNewRun(),
                 status == int(Status::Complete) || status == int(Status::Abandoned));
        if (status == int(Status::Complete)) {
            QCOMPARE(c.tokens, 15 * 2048);
            QVERIFY(c.reason.isEmpty());
            QVERIFY(c.sizeBytes > tensorFile().size());
            QVERIFY(!c.ephemeral);
        }
    }

    void tensorFileChecks() {
        QTemporaryDir d;
        const QString path = d.path() + "/t.lathe";
        writeFile(path, tensorFile(3, 8));
        QCOMPARE(checkTensorFile(path), QString());
        QCOMPARE(verifyTensorData(path), QString());
        // One flipped data byte: the structure is fine, the CRC is not.
        QByteArray bytes = tensorFile(3, 8);
        bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x5a);
        writeFile(path, bytes);
        QCOMPARE(checkTensorFile(path), QString());
        QVERIFY(verifyTensorData(path).contains("CRC"));
        writeFile(path, bytes.left(12));
        QVERIFY(checkTensorFile(path).contains("preamble"));
    }

    void modelRowsAndRemoval() {
        QTemporaryDir run;
        makeCheckpoint(run.path(), 15);
        makeCheckpoint(run.path(), 20, true);
        makeCheckpoint(run.path(), 30);
        QFile f(run.path() + "/step30/model_and_optim/rank0.lathe");
        QVERIFY(f.resize(40));
        makeCheckpoint(run.path(), 25, false, "step25.abandoned");
        QDir().mkpath(run.path() + "/step35-tmp/train");
        QDir().mkpath(run.path() + "/stepping-stones");  // not a checkpoint

        CheckpointsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setRefreshInterval(0);
        model.setRunDir(run.path());
        QCOMPARE(model.rowCount(), 5);
        QStringList names, statuses;
        for (int r = 0; r < model.rowCount(); ++r) {
            names << model.checkpoint(r).name;
            statuses << model.index(r, CheckpointsModel::StatusColumn).data().toString();
        }
        QCOMPARE(names,
                 (QStringList{"step15", "step20", "step25.abandoned", "step30", "step35-tmp"}));
        QCOMPARE(statuses,
                 (QStringList{"complete", "complete", "abandoned", "unusable", "partial"}));
        QCOMPARE(model.index(1, CheckpointsModel::KindColumn).data().toString(),
                 QStringLiteral("ephemeral"));
        QCOMPARE(model.index(0, CheckpointsModel::KindColumn).data().toString(),
                 QStringLiteral("permanent"));
        QVERIFY(
            model.index(3, CheckpointsModel::NoteColumn).data().toString().contains("truncated"));
        QCOMPARE(model.index(0, CheckpointsModel::StepColumn).data().toLongLong(), 15);
        // Rows of one step tell themselves apart in the Step column (issue 34: two "200" rows).
        QStringList labels;
        for (int r = 0; r < 5; ++r)
            labels << model.index(r, CheckpointsModel::StepColumn).data().toString();
        QCOMPARE(labels, (QStringList{"15", "20", "25 · abandoned", "30", "35 · saving"}));
        lathe::ui::CheckpointInfo again;
        again.step = 200;
        again.name = "step200.abandoned1";
        QCOMPARE(lathe::ui::checkpointLabel(again), QStringLiteral("200 · abandoned1"));
        QCOMPARE(model.index(0, CheckpointsModel::TokensColumn).data().toString(),
                 QStringLiteral("30.7k"));
        for (int r = 0; r < 5; ++r)
            QCOMPARE(model.index(r, 0).data(CheckpointsModel::CanResumeRole).toBool(), r <= 1);

        // The panel offers Resume only for the usable ones.
        CheckpointsPanel panel(&model);
        QVERIFY(panel.selectCheckpoint("step30"));
        QVERIFY(!panel.resumeButton()->isEnabled());
        QVERIFY(!panel.resumeAsNewButton()->isEnabled());
        QVERIFY(panel.resumeButton()->toolTip().contains("truncated"));
        QVERIFY(panel.selectCheckpoint("step25.abandoned"));
        QVERIFY(!panel.resumeButton()->isEnabled());
        QVERIFY(panel.resumeAsNewButton()->isEnabled());
        QVERIFY(panel.selectCheckpoint("step15"));
        QVERIFY(panel.resumeButton()->isEnabled());
        QSignalSpy resume(&panel, &CheckpointsPanel::resumeRequested);
        panel.resumeButton()->click();
        QCOMPARE(resume.count(), 1);
        QCOMPARE(resume.at(0).at(0).toString(), run.path() + "/step15");

        // Delete (no dialog in a test): the folder goes, the row goes.
        QVERIFY(panel.selectCheckpoint("step20"));
        QVERIFY(panel.deleteCurrent(false));
        QVERIFY(!QFileInfo::exists(run.path() + "/step20"));
        QCOMPARE(model.rowCount(), 4);
        QString error;
        QVERIFY(!removeCheckpoint(run.path() + "/step99", &error));
        QVERIFY(!error.isEmpty());

        // New checkpoints appear through the watcher.
        makeCheckpoint(run.path(), 40);
        QTRY_COMPARE_WITH_TIMEOUT(model.rowCount(), 5, 5000);
        QCOMPARE(model.checkpoint(4).name, QStringLiteral("step40"));
    }

    void backgroundVerification() {
        QTemporaryDir run;
        makeCheckpoint(run.path(), 10);
        makeCheckpoint(run.path(), 20);
        const QString model20 = run.path() + "/step20/model_and_optim/rank0.lathe";
        QFile f(model20);
        QVERIFY(f.open(QIODevice::ReadWrite));
        QVERIFY(f.seek(f.size() - 1));
        const char c = f.read(1).at(0);
        QVERIFY(f.seek(f.size() - 1));
        f.write(QByteArray(1, static_cast<char>(c ^ 1)));
        f.close();

        CheckpointsModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setRefreshInterval(0);
        model.setRunDir(run.path());
        QCOMPARE(model.checkpoint(1).status, Status::Complete);  // structurally whole
        QSignalSpy verified(&model, &CheckpointsModel::verified);
        model.verify(0);
        model.verify(1);
        QTRY_COMPARE_WITH_TIMEOUT(verified.count(), 2, 10000);
        QCOMPARE(model.checkpoint(0).status, Status::Complete);
        QCOMPARE(model.index(0, CheckpointsModel::NoteColumn).data().toString(),
                 QStringLiteral("verified"));
        QCOMPARE(model.checkpoint(1).status, Status::Unusable);
        QVERIFY(model.checkpoint(1).reason.contains("CRC"));
        QVERIFY(!model.index(1, 0).data(CheckpointsModel::CanResumeRole).toBool());
    }

    void resumePlan() {
        QTemporaryDir root;
        const QString runDir = root.path() + "/base";
        const QJsonObject cfg = tinyConfig(runDir);
        writeJson(runDir + "/config.json", cfg);
        writeJson(runDir + "/status.json", status("finished", 30, 30, 2.5));
        const QString ckpt = makeCheckpoint(runDir, 15, false, {}, cfg);

        QString error;
        auto plan = ResumePlan::fromCheckpoint(ckpt, &error);
        QVERIFY2(plan, qPrintable(error));
        QCOMPARE(plan->step(), 15);
        QCOMPARE(plan->runName(), QStringLiteral("base"));
        QCOMPARE(plan->runsRoot(), QFileInfo(root.path()).absoluteFilePath());
        QCOMPARE(plan->worldSize(), 1);

        Json edited = plan->baseConfig();
        QVERIFY(plan->changes(edited).empty());
        QVERIFY(plan->refusal(edited).isEmpty());

        // Allowed, with a note: the learning rate. Ignored: where it lives, how it stops.
        edited["train_module"]["optim"]["lr"] = 0.001;
        edited["trainer"]["hard_stop"] = "40steps";
        auto changes = plan->changes(edited);
        QCOMPARE(changes.size(), std::size_t(2));
        QCOMPARE(changes[0].path, std::string("train_module.optim.lr"));
        QCOMPARE(changes[0].kind, lathe::config::ResumeChangeKind::Changed);
        QCOMPARE(changes[1].kind, lathe::config::ResumeChangeKind::Ignored);
        QVERIFY(plan->refusal(edited).isEmpty());

        // Refused: the model or the sequence length, in the engine's words.
        Json unsafe = edited;
        unsafe["model"]["d_model"] = 128;
        unsafe["dataset"]["sequence_length"] = 128;
        const QString why = plan->refusal(unsafe);
        QVERIFY(why.startsWith("cannot resume " + ckpt +
                               " with a different model or sequence length:"));
        QVERIFY(why.contains("model.d_model: 64 -> 128"));
        QVERIFY(why.contains("dataset.sequence_length: 64 -> 128"));
        QVERIFY(!plan->prepareLaunch(unsafe, ResumePlan::Mode::SameRun, {}, 1, &error));
        QCOMPARE(error, why);

        // Same run: --resume-from, --runs-dir, its folder and name kept.
        auto same = plan->prepareLaunch(edited, ResumePlan::Mode::SameRun, {}, 2, &error);
        QVERIFY(same);
        QCOMPARE(same->options.resumeFrom, ckpt);
        QCOMPARE(same->options.runsDir, plan->runsRoot());
        QCOMPARE(same->options.ranks, 2);
        QCOMPARE(QString::fromStdString(same->config["trainer"]["save_folder"].get<std::string>()),
                 runDir);
        QCOMPARE(same->config["train_module"]["optim"]["lr"].get<double>(), 0.001);

        // New run: a new folder with parent.json; load_path/always; the name must be free.
        const QString name = ResumePlan::suggestNewRunName(plan->runsRoot(), "base", 15);
        QCOMPARE(name, QStringLiteral("base-from-step15"));
        auto fresh = plan->prepareLaunch(edited, ResumePlan::Mode::NewRun, name, 1, &error);
        QVERIFY2(fresh, qPrintable(error));
        QVERIFY(fresh->options.resumeFrom.isEmpty());
        QCOMPARE(fresh->config["run_name"].get<std::string>(), name.toStdString());
        QCOMPARE(fresh->config["trainer"]["save_folder"].get<std::string>(), std::string());
        QCOMPARE(QString::fromStdString(fresh->config["trainer"]["load_path"].get<std::string>()),
                 ckpt);
        QCOMPARE(fresh->config["trainer"]["load_strategy"].get<std::string>(),
                 std::string("always"));
        Json parent;
        QVERIFY(readJsonFile(root.path() + "/" + name + "/parent.json", parent));
        QCOMPARE(parent["parent_run"].get<std::string>(), std::string("base"));
        QCOMPARE(parent["parent_step"].get<int>(), 15);
        QCOMPARE(QString::fromStdString(parent["checkpoint"].get<std::string>()), ckpt);
        QCOMPARE(ResumePlan::suggestNewRunName(plan->runsRoot(), "base", 15),
                 QStringLiteral("base-from-step15-2"));
        QVERIFY(!plan->prepareLaunch(edited, ResumePlan::Mode::NewRun, name, 1, &error));
        QVERIFY(error.contains("already exists"));
        QVERIFY(!plan->prepareLaunch(edited, ResumePlan::Mode::NewRun, "a/b", 1, &error));

        // Not from a partial or corrupt checkpoint.
        QDir().mkpath(runDir + "/step20-tmp");
        QVERIFY(!ResumePlan::fromCheckpoint(runDir + "/step20-tmp", &error));
        QVERIFY(error.contains("partial"));
    }

    void resumeBar() {
        QTemporaryDir root;
        const QString runDir = root.path() + "/r";
        const QJsonObject cfg = tinyConfig(runDir);
        writeJson(runDir + "/config.json", cfg);
        auto plan = ResumePlan::fromCheckpoint(makeCheckpoint(runDir, 15, false, {}, cfg));
        QVERIFY(plan);
        ResumeBar bar;
        bar.setPlan(*plan);
        QVERIFY(bar.resumeButton()->isEnabled());
        QCOMPARE(bar.ranks(), 1);
        Json edited = plan->baseConfig();
        edited["model"]["d_model"] = 128;
        bar.setEditedConfig(edited);
        QVERIFY(!bar.resumeButton()->isEnabled());
        QVERIFY(bar.refusalLabel()->text().contains("model.d_model: 64 -> 128"));
        edited["model"]["d_model"] = 64;
        edited["train_module"]["optim"]["lr"] = 0.01;
        bar.setEditedConfig(edited);
        QVERIFY(bar.resumeButton()->isEnabled());
        QCOMPARE(bar.changesList()->count(), 1);
        QVERIFY(bar.changesList()->item(0)->text().startsWith("train_module.optim.lr"));
        QSignalSpy requested(&bar, &ResumeBar::resumeRequested);
        bar.setMode(ResumePlan::Mode::NewRun);
        QCOMPARE(bar.newRunName(), QStringLiteral("r-from-step15"));
        bar.resumeButton()->click();
        QCOMPARE(requested.count(), 1);
    }

    void configDiff() {
        const Json a = toJson(QJsonObject{{"run_name", "a"},
                                          {"x", QJsonObject{{"lr", 1}, {"k", QJsonArray{1, 2}}}},
                                          {"same", 3}});
        const Json b = toJson(QJsonObject{{"run_name", "b"},
                                          {"x", QJsonObject{{"lr", 2}, {"k", QJsonArray{1, 2}}}},
                                          {"same", 3},
                                          {"new", true}});
        ConfigDiffModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.setConfigs(a, b, "a", "b");
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.index(0, 0).data().toString(), QStringLiteral("run_name"));
        QCOMPARE(model.index(1, 0).data().toString(), QStringLiteral("x.lr"));
        QCOMPARE(model.index(1, 1).data().toString(), QStringLiteral("1"));
        QCOMPARE(model.index(1, 2).data().toString(), QStringLiteral("2"));
        QCOMPARE(model.index(2, 0).data().toString(), QStringLiteral("new"));
        QCOMPARE(model.index(2, 1).data().toString(), kAbsent);
        QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QStringLiteral("b"));
        model.setConfigs(a, a, "a", "a");
        QCOMPARE(model.rowCount(), 0);
    }
};

QTEST_MAIN(TestCheckpointsModel)
#include "test_checkpoints_model.moc"
