// Metrics: every merge strategy, reduce types that may not change, cross-rank reduction of every
// reduce type on 2 real ranks (with a metric present on one rank only), and the lm_evaluator
// against a direct computation.
#include "engine/config/io.h"
#include "engine/data/data_loader.h"
#include "engine/distributed/env.h"
#include "engine/metrics/bookkeeping.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"

#include <QProcess>
#include <QTcpServer>
#include <QtTest>

#include <cmath>
#include <iostream>
#include <mutex>
#include <thread>

using namespace lathe;

namespace {

struct Captured : train::Callback {
    metrics::MetricsByStep* out;
    explicit Captured(metrics::MetricsByStep* o) : out(o) {}
    void log_metrics(int64_t step, const metrics::StepMetrics& m) override {
        for (const auto& [k, v] : m) (*out)[step][k] = v;
    }
};

struct Rig {
    config::ExperimentConfig cfg;
    std::unique_ptr<dist::Environment> env;
    data::DataSplit split;
    std::unique_ptr<train::TransformerTrainModule> tm;
    std::unique_ptr<data::DataLoader> loader;
    std::unique_ptr<train::Trainer> trainer;
    metrics::MetricsByStep seen;

    Rig() {
        cfg = config::load_or_throw(
            "tiny", {"dataset.builtin_tokens=40960", "dataset.validation_fraction=0.02",
                     "trainer.no_checkpoints=true", "launch.num_threads=1"});
        dist::EnvironmentOptions o;
        o.num_threads = 1;
        env = dist::prepare_training_environment(o);
        split = data::build_split(cfg.dataset, cfg.model.vocab_size);
        tm = std::make_unique<train::TransformerTrainModule>(cfg, *env);
        loader = std::make_unique<data::DataLoader>(split.train, cfg.data_loader, 0, 1);
        trainer = std::make_unique<train::Trainer>(cfg, *env, *tm, *loader, "/nonexistent");
        trainer->add_callback("capture", std::make_unique<Captured>(&seen));
    }
    void flush() {
        trainer->flush_metrics();
        trainer->bookkeeper().join();
        trainer->bookkeeper().check_error();
    }
};

// Worker mode for the 2-rank reduction: prints the reduced metrics of this rank as JSON.
int reduce_worker() {
    dist::EnvironmentOptions o;
    o.num_threads = 1;
    auto env = dist::prepare_training_environment(o);
    const int r = env->rank();
    using RT = config::ReduceType;
    std::vector<metrics::LocalMetric> local = {
        {1, "mean", RT::mean, r == 0 ? 1.0 : 3.0},
        {1, "sum", RT::sum, r == 0 ? 1.0 : 3.0},
        {1, "max", RT::max, r == 0 ? 1.0 : 3.0},
        {1, "l2", RT::l2_norm, r == 0 ? 3.0 : 4.0},
        {1, "local", std::nullopt, r == 0 ? 10.0 : 20.0},
        {2, "mean", RT::mean, r == 0 ? 5.0 : 7.0},
    };
    if (r == 0) local.push_back({1, "only rank 0", RT::mean, 42.0});
    auto out = metrics::reduce_metrics(local, env->bookkeeping_group());
    nlohmann::json j;
    for (const auto& [step, m] : out) {
        for (const auto& [k, v] : m) j[std::to_string(step)][k] = v;
    }
    std::cout << "RESULT " << j.dump() << std::endl;
    env->teardown();
    return 0;
}

}  // namespace

class TestMetrics : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void mergeStrategies_data() {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<double>("expected");
        QTest::newRow("warn keeps the first") << "warn" << 2.0;
        QTest::newRow("latest") << "latest" << 6.0;
        QTest::newRow("oldest") << "oldest" << 2.0;
        QTest::newRow("mean of the two") << "mean" << 4.0;
        QTest::newRow("sum") << "sum" << 8.0;
        QTest::newRow("max") << "max" << 6.0;
        QTest::newRow("min") << "min" << 2.0;
    }
    void mergeStrategies() {
        QFETCH(QString, strategy);
        QFETCH(double, expected);
        Rig rig;
        auto s = *config::enum_from_string<config::MetricMergeStrategy>(strategy.toStdString());
        rig.trainer->record_metric("m", 2.0, config::ReduceType::mean, s);
        rig.trainer->record_metric("m", 6.0, config::ReduceType::mean, s);
        rig.flush();
        QCOMPARE(rig.seen[0]["m"], expected);
    }

    void reduceTypeMayNotChange() {
        Rig rig;
        rig.trainer->record_metric("m", 1.0, config::ReduceType::mean);
        QVERIFY_THROWS_EXCEPTION(std::exception,
                                 rig.trainer->record_metric("m", 1.0, config::ReduceType::sum));
    }

    void tensorsStayUntilFlush() {
        Rig rig;
        rig.trainer->record_metric("t", torch::tensor(1.5), config::ReduceType::mean);
        QVERIFY(rig.seen.empty());
        rig.flush();
        QCOMPARE(rig.seen[0]["t"], 1.5);
    }

    void reductionOnTwoRanks() {
        QTcpServer probe;
        QVERIFY(probe.listen(QHostAddress::LocalHost));
        QString port = QString::number(probe.serverPort());
        probe.close();
        QList<QProcess*> procs;
        for (int r = 0; r < 2; ++r) {
            auto* p = new QProcess(this);
            auto e = QProcessEnvironment::systemEnvironment();
            e.insert("LATHE_REDUCE_WORKER", "1");
            e.insert("RANK", QString::number(r));
            e.insert("WORLD_SIZE", "2");
            e.insert("LOCAL_RANK", QString::number(r));
            e.insert("LOCAL_WORLD_SIZE", "2");
            e.insert("MASTER_ADDR", "127.0.0.1");
            e.insert("MASTER_PORT", port);
            p->setProcessEnvironment(e);
            p->start(QCoreApplication::applicationFilePath(), {});
            procs << p;
        }
        for (int r = 0; r < 2; ++r) {
            QVERIFY(procs[r]->waitForFinished(60000));
            QCOMPARE(procs[r]->exitCode(), 0);
            QString out = QString::fromUtf8(procs[r]->readAllStandardOutput());
            int at = out.indexOf("RESULT ");
            QVERIFY2(at >= 0, qPrintable(out));
            auto j = nlohmann::json::parse(out.mid(at + 7).trimmed().toStdString());
            QCOMPARE(j["1"]["mean"].get<double>(), 2.0);
            QCOMPARE(j["1"]["sum"].get<double>(), 4.0);
            QCOMPARE(j["1"]["max"].get<double>(), 3.0);
            QCOMPARE(j["1"]["l2"].get<double>(), 5.0);  // sqrt(3^2 + 4^2)
            QCOMPARE(j["1"]["local"].get<double>(), r == 0 ? 10.0 : 20.0);
            QCOMPARE(j["1"]["only rank 0"].get<double>(),
                     42.0);  // mean over the ranks that have it
            QCOMPARE(j["2"]["mean"].get<double>(), 6.0);
        }
    }

    // trainer.bookkeeping_soft_timeout: an operation that runs longer is reported with its name
    // and duration (a warning in the log by default); quick ones are not.
    void slowBookkeepingIsReported() {
        for (bool async : {true, false}) {
            std::vector<std::pair<std::string, double>> slow;
            std::mutex mu;
            {
                metrics::Bookkeeper bk(async, 0.05,
                                       [&](const std::string& name, double s, double limit) {
                                           std::lock_guard<std::mutex> lock(mu);
                                           slow.emplace_back(name, s);
                                           QCOMPARE(limit, 0.05);
                                       });
                bk.submit("quick", [] {});
                bk.submit("reduce metrics",
                          [] { std::this_thread::sleep_for(std::chrono::milliseconds(150)); });
                bk.join();
            }
            QCOMPARE(slow.size(), std::size_t(1));
            QCOMPARE(slow[0].first, std::string("reduce metrics"));
            QVERIFY(slow[0].second >= 0.15);
        }
    }

    void callbackWithATakenNameReplacesTheOld() {
        struct Counting : train::Callback {
            int* attached;
            explicit Counting(int* a) : attached(a) {}
            void post_attach() override { ++*attached; }
        };
        Rig rig;
        int first = 0, other = 0, second = 0;
        rig.trainer->add_callback("x", std::make_unique<Counting>(&first));
        rig.trainer->add_callback("y", std::make_unique<Counting>(&other));
        auto replacement = std::make_unique<Counting>(&second);
        auto* replacement_ptr = replacement.get();
        rig.trainer->add_callback("x", std::move(replacement));
        QCOMPARE(first, 1);
        QCOMPARE(other, 1);   // not attached again
        QCOMPARE(second, 1);  // the new one is attached
        QCOMPARE(rig.trainer->callback("x"), static_cast<train::Callback*>(replacement_ptr));
        int named_x = 0;
        for (const auto& [name, cb] : rig.trainer->callbacks_in_order())
            if (name == "x") ++named_x;
        QCOMPARE(named_x, 1);
    }

    void evaluatorMatchesDirectComputation() {
        Rig rig;
        config::LMEvaluatorConfig c;
        c.enabled = true;
        c.eval_on_startup = true;
        c.eval_batches.reset();  // the whole validation split
        auto ev = train::make_lm_evaluator(c, rig.split.validation);
        rig.trainer->add_callback("lm_evaluator", std::move(ev));
        rig.trainer->callback("lm_evaluator")->pre_train();
        rig.flush();
        double got = rig.seen[0]["eval/lm/validation/CE loss"];
        // Directly: mean next-token cross-entropy over every validation instance.
        torch::NoGradGuard g;
        auto& model = rig.tm->model();
        model->eval();
        const auto& ds = *rig.split.validation;
        const int64_t seq = ds.sequence_length();
        double sum = 0;
        int64_t n = 0;
        for (int64_t i = 0; i < ds.num_instances(); ++i) {
            auto ids = torch::empty({1, seq}, torch::kInt64);
            ds.instance(i, ids.data_ptr<int64_t>());
            auto logits = model->forward(ids).to(torch::kFloat64)[0];
            auto logp = torch::log_softmax(logits, -1);
            for (int64_t t = 0; t + 1 < seq; ++t)
                sum -= logp[t][ids[0][t + 1].item<int64_t>()].item<double>();
            n += seq - 1;
        }
        double direct = sum / static_cast<double>(n);
        QVERIFY2(std::fabs(got - direct) < 1e-5 * direct,
                 qPrintable(QString("%1 vs %2").arg(got).arg(direct)));
        QCOMPARE(rig.seen[0]["eval/lm/validation/PPL"], std::exp(got));
    }
};

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsSet("LATHE_REDUCE_WORKER")) return reduce_worker();
    QCoreApplication app(argc, argv);
    TestMetrics t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_metrics.moc"
