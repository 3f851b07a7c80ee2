// Remote checkpoints in the workbench against a real S3 server (moto's, started here on a
// loopback port) and the real lathe-engine, through the GUI's own classes: a run that saves to
// s3:// lists its remote checkpoints in the checkpoints dock (the engine lists them), verifies
// one, refuses to delete one, and resumes from one; the resumed losses equal those of an
// uninterrupted local run, bitwise, and the run folder stays local.
#include "engine/config/io.h"
#include "tests/engine_runner.h"
#include "tests/ui/runs/engine_fixtures.h"
#include "tests/ui/runs/run_fixtures.h"
#include "ui/checkpoints/checkpoints_model.h"
#include "ui/checkpoints/checkpoints_panel.h"
#include "ui/checkpoints/resume_plan.h"
#include "ui/control/run_controller.h"
#include "ui/control/run_session.h"
#include "ui/plots/metric_store.h"

#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPushButton>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QtTest>

using namespace lathe::ui;
using lathe::config::Json;
using lathe::testing::kLoss;
using lathe::testing::range;
using lathe::testing::waitDone;

namespace {

std::vector<std::string> common(const QString& name) {
    return {"run_name=" + name.toStdString(),     "launch.num_threads=1",
            "trainer.max_duration=8steps",        "trainer.callbacks.checkpointer.save_interval=3",
            "trainer.metrics_collect_interval=1", "trainer.remote.retry_delay_s=0.05"};
}

Json tinyConfig(const QString& name, const std::vector<std::string>& extra = {}) {
    return lathe::testing::tinyConfig(common(name), extra);
}

}  // namespace

class TestRemoteCheckpoints : public QObject {
    Q_OBJECT

    QTemporaryDir root_;
    QProcess moto_;
    QMap<qint64, double> reference_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(QFileInfo(lathe::testing::engine_path()).isExecutable());
        qputenv("LATHE_ENGINE", lathe::testing::engine_path().toUtf8());
        // moto's S3 server from the test environment (setup.sh test installs moto[server]).
        const QString python = qEnvironmentVariable("LATHE_TEST_PYTHON");
        const QString server = QFileInfo(python).dir().filePath(QStringLiteral("moto_server"));
        QVERIFY2(QFileInfo(server).isExecutable(),
                 qPrintable(server + " is missing: run packaging/setup.sh test"));
        QTcpServer probe;
        QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
        const quint16 port = probe.serverPort();
        probe.close();
        moto_.setProgram(server);
        moto_.setArguments({"-H", "127.0.0.1", "-p", QString::number(port)});
        moto_.setStandardOutputFile(QProcess::nullDevice());  // its access log
        moto_.setStandardErrorFile(QProcess::nullDevice());
        moto_.start();
        QVERIFY(moto_.waitForStarted());
        bool up = false;
        for (int i = 0; i < 300 && !up; ++i) {
            QTcpSocket s;
            s.connectToHost(QHostAddress::LocalHost, port);
            up = s.waitForConnected(100);
            if (!up) QTest::qWait(100);
        }
        QVERIFY2(up, "moto_server did not start");
        const QString endpoint = QStringLiteral("http://127.0.0.1:%1").arg(port);
        // moto without authentication takes an unsigned bucket creation.
        QNetworkAccessManager net;
        QNetworkReply* reply = net.put(QNetworkRequest(QUrl(endpoint + "/ckpt")), QByteArray());
        QSignalSpy finished(reply, &QNetworkReply::finished);
        QVERIFY(finished.wait(20000));
        QCOMPARE(reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(), 200);
        reply->deleteLater();
        qputenv("AWS_ACCESS_KEY_ID", "lathe-test");
        qputenv("AWS_SECRET_ACCESS_KEY", "lathe-test-secret");
        qputenv("AWS_REGION", "us-east-1");
        qputenv("AWS_ENDPOINT_URL", endpoint.toUtf8());

        QStringList args{"train", "tiny"};
        for (const auto& o : common("reference")) args << QString::fromStdString(o);
        args << "--runs-dir" << root_.path();
        const auto r = lathe::testing::run_engine(args, root_.path());
        QVERIFY2(r.exit_code == 0, qPrintable(r.output));
        reference_ = lathe::testing::losses(
            lathe::testing::read_metrics(root_.path() + "/reference/metrics.jsonl"));
        QCOMPARE(reference_.keys().size(), 8);
    }

    void cleanupTestCase() {
        moto_.terminate();
        if (!moto_.waitForFinished(10000)) moto_.kill();
    }

    void listsVerifiesAndResumesRemoteCheckpoints() {
        MetricStore store;
        RunController run;
        RunSession session(&run, &store);
        RunOptions options;
        options.runsDir = root_.path();
        QString error;
        QVERIFY2(session.startNew(tinyConfig("R", {"trainer.save_folder=s3://ckpt/R",
                                                   "trainer.hard_stop=7steps"}),
                                  options, &error),
                 qPrintable(error));
        QVERIFY(waitDone(run));
        QVERIFY2(run.state() == RunController::State::Finished,
                 qPrintable(run.lastLines().join('\n')));
        const QString runDir = QFileInfo(root_.path() + "/R").absoluteFilePath();
        QCOMPARE(session.shownRun(), runDir);
        QVERIFY(!QFileInfo::exists(runDir + "/step3"));  // the run folder holds no checkpoint

        // The dock lists the bucket's checkpoints, through the engine.
        CheckpointsModel checkpoints;
        checkpoints.setRefreshInterval(0);
        CheckpointsPanel panel(&checkpoints);
        QSignalSpy listed(&checkpoints, &CheckpointsModel::remoteListed);
        checkpoints.setRunDir(runDir);
        QCOMPARE(checkpoints.remoteFolder(), QStringLiteral("s3://ckpt/R"));
        QVERIFY(listed.wait(60000));
        QVERIFY2(checkpoints.remoteError().isEmpty(), qPrintable(checkpoints.remoteError()));
        const int row3 = checkpoints.rowOf("s3://ckpt/R/step3");
        QVERIFY(row3 >= 0);
        QVERIFY(checkpoints.rowOf("s3://ckpt/R/step6") >= 0);
        QVERIFY(checkpoints.rowOf("s3://ckpt/R/step7") >= 0);  // the final one, at the hard stop
        const CheckpointInfo c3 = checkpoints.checkpoint(row3);
        QVERIFY(c3.remote);
        QVERIFY(c3.canResume());
        QCOMPARE(c3.tokens, 3 * 2048);
        QCOMPARE(c3.worldSize, 1);
        QVERIFY(c3.sizeBytes > 1000000);

        // Verify reads it whole through the engine; Delete is not offered for a remote one.
        QVERIFY(panel.selectCheckpoint("s3://ckpt/R/step3"));
        QVERIFY(!panel.deleteButton()->isEnabled());
        QVERIFY(!checkpoints.remove(row3, &error));
        QVERIFY(error.contains("remote"));
        QSignalSpy verified(&checkpoints, &CheckpointsModel::verified);
        checkpoints.verify(row3);
        QVERIFY(verified.wait(60000));
        QCOMPARE(verified.at(0).at(0).toString(), QStringLiteral("s3://ckpt/R/step3"));
        QVERIFY2(verified.at(0).at(1).toString().isEmpty(),
                 qPrintable(verified.at(0).at(1).toString()));

        // Resume the same run from step 3, without the hard stop.
        auto plan = ResumePlan::fromRemoteCheckpoint(c3, runDir, &error);
        QVERIFY2(plan, qPrintable(error));
        Json edited = plan->baseConfig();
        edited["trainer"]["hard_stop"] = nullptr;
        auto launch = plan->prepareLaunch(edited, ResumePlan::Mode::SameRun, {}, 1, &error);
        QVERIFY2(launch, qPrintable(error));
        QCOMPARE(
            QString::fromStdString(launch->config["trainer"]["save_folder"].get<std::string>()),
            QStringLiteral("s3://ckpt/R"));
        QCOMPARE(launch->options.resumeFrom, QStringLiteral("s3://ckpt/R/step3"));
        QVERIFY2(session.resume(*plan, *launch, &error), qPrintable(error));
        QVERIFY(waitDone(run));
        QVERIFY2(run.state() == RunController::State::Finished,
                 qPrintable(run.lastLines().join('\n')));
        const auto* s = store.series(kLoss);
        QCOMPARE(s->step, range(1, 8));
        for (int i = 0; i < s->size(); ++i)
            QVERIFY2(s->value[i] == reference_.value(qint64(s->step[i])),
                     qPrintable(QStringLiteral("step %1").arg(s->step[i])));
        const auto* gone = store.series(MetricStore::abandonedName(kLoss, 1));
        QVERIFY(gone);
        QCOMPARE(gone->step, range(4, 7));

        // The newer remote checkpoints were set aside by the engine; the list shows the new ones.
        checkpoints.refresh();
        QVERIFY(listed.wait(60000));
        QVERIFY(checkpoints.rowOf("s3://ckpt/R/step8") >= 0);
        QVERIFY(checkpoints.checkpoint(checkpoints.rowOf("s3://ckpt/R/step8")).canResume());
    }

    void listingErrorsAreShown() {
        // A run whose bucket does not exist: the dock says why it lists nothing.
        const QString runDir = root_.path() + "/missing";
        QVERIFY(QDir().mkpath(runDir));
        QVERIFY(
            lathe::testing::write_text(runDir + "/config.json",
                                       "{\"run_name\": \"missing\", \"trainer\": {\"save_folder\": "
                                       "\"s3://no-such-bucket/x\"}}"));
        CheckpointsModel checkpoints;
        checkpoints.setRefreshInterval(0);
        QSignalSpy listed(&checkpoints, &CheckpointsModel::remoteListed);
        checkpoints.setRunDir(runDir);
        QVERIFY(listed.wait(60000));
        QCOMPARE(checkpoints.rowCount(), 0);
        QVERIFY2(checkpoints.remoteError().contains("NoSuchBucket"),
                 qPrintable(checkpoints.remoteError()));
    }
};

QTEST_MAIN(TestRemoteCheckpoints)
#include "test_remote_checkpoints.moc"
