// MetricStore: TensorBoard's debiased EMA against hand-computed values, the incremental form
// against the batch form, running min/max, ordering, and the CSV export.
#include "ui/plots/metric_store.h"

#include <QSignalSpy>
#include <QtTest>

#include <cmath>
#include <random>

using lathe::ui::MetricStore;

class TestMetricStore : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void smoothingByHand_data() {
        QTest::addColumn<QVector<double>>("values");
        QTest::addColumn<double>("weight");
        QTest::addColumn<QVector<double>>("expected");
        const double nan = std::nan("");
        // w = 0.5: last = 0.5, 1.25, 2.125; debias 0.5, 0.75, 0.875.
        QTest::newRow("w=0.5") << QVector<double>{1, 2, 3} << 0.5
                               << QVector<double>{1.0, 1.25 / 0.75, 2.125 / 0.875};
        // w = 0.6: last = 4, 4.4, 6.64; debias 0.4, 0.64, 0.784.
        QTest::newRow("w=0.6") << QVector<double>{10, 5, 10} << 0.6
                               << QVector<double>{10.0, 4.4 / 0.64, 6.64 / 0.784};
        // A NaN passes through and does not count.
        QTest::newRow("NaN") << QVector<double>{1, nan, 3} << 0.5
                             << QVector<double>{1.0, nan, 1.75 / 0.75};
        QTest::newRow("w=0 is raw") << QVector<double>{4, 1, 9} << 0.0 << QVector<double>{4, 1, 9};
        QTest::newRow("constant") << QVector<double>{2, 2, 2, 2} << 0.9
                                  << QVector<double>{2, 2, 2, 2};
        QTest::newRow("empty") << QVector<double>{} << 0.5 << QVector<double>{};
    }
    void smoothingByHand() {
        QFETCH(QVector<double>, values);
        QFETCH(double, weight);
        QFETCH(QVector<double>, expected);
        const QVector<double> got = MetricStore::smooth(values, weight);
        QCOMPARE(got.size(), expected.size());
        for (int i = 0; i < got.size(); ++i) {
            if (std::isnan(expected[i])) {
                QVERIFY(std::isnan(got[i]));
            } else {
                QVERIFY2(
                    std::abs(got[i] - expected[i]) < 1e-12,
                    qPrintable(QStringLiteral("%1: %2 vs %3").arg(i).arg(got[i]).arg(expected[i])));
            }
        }
        // The store's incremental smoothing gives exactly the batch result.
        MetricStore store;
        store.setSmoothingWeight(weight);
        for (int i = 0; i < values.size(); ++i)
            store.append(QStringLiteral("m"), i + 1, 0, 0, values[i]);
        if (values.isEmpty()) return;
        const auto* s = store.series(QStringLiteral("m"));
        for (int i = 0; i < got.size(); ++i)
            QVERIFY(s->smoothed[i] == got[i] || (std::isnan(got[i]) && std::isnan(s->smoothed[i])));
    }

    void incrementalMatchesBatch() {
        std::mt19937 rng(3);
        std::normal_distribution<double> noise(0, 0.3);
        MetricStore store;
        QSignalSpy appended(&store, &MetricStore::appended);
        QVector<double> values;
        values << 2.0 << 2.0;  // starts constant, then is not: the store re-smooths once
        store.append(QStringLiteral("loss"), 1, 10, 0.1, 2.0);
        store.append(QStringLiteral("loss"), 2, 20, 0.2, 2.0);
        const int revisionWhileConstant = store.series(QStringLiteral("loss"))->smoothRevision;
        for (int i = 3; i <= 2000; ++i) {
            const double v = 5.0 / std::sqrt(double(i)) + noise(rng);
            values << v;
            store.append(QStringLiteral("loss"), i, i * 10.0, i * 0.1, v);
        }
        const auto* s = store.series(QStringLiteral("loss"));
        QCOMPARE(s->size(), 2000);
        QCOMPARE(s->smoothRevision, revisionWhileConstant + 1);
        QCOMPARE(s->smoothed, MetricStore::smooth(values, 0.6));
        QCOMPARE(appended.size(), 2000);
        // A new weight re-smooths everything.
        store.setSmoothingWeight(0.95);
        QCOMPARE(s->smoothed, MetricStore::smooth(values, 0.95));
        store.setSmoothingWeight(2.0);  // clamped below 1
        QCOMPARE(store.smoothingWeight(), 0.999);
    }

    void runningMinMax() {
        MetricStore store;
        const double values[] = {3, -1, std::nan(""), 7, INFINITY, 0.5};
        int step = 0;
        for (double v : values) store.append(QStringLiteral("x"), ++step, 0, 0, v);
        const auto* s = store.series(QStringLiteral("x"));
        QCOMPARE(s->min, -1.0);
        QCOMPARE(s->max, 7.0);
        QCOMPARE(s->minPositive, 0.5);
        QCOMPARE(s->size(), 6);
    }

    void stepsMustIncrease() {
        MetricStore store;
        QVERIFY(store.append(QStringLiteral("x"), 5, 50, 1, 1.0));
        QVERIFY(!store.append(QStringLiteral("x"), 5, 50, 1, 2.0));
        QVERIFY(!store.append(QStringLiteral("x"), 4, 40, 1, 2.0));
        QVERIFY(store.append(QStringLiteral("x"), 6, 45, 0.5, 2.0));  // tokens going back: allowed
        QCOMPARE(store.rejected(), 2);
        const auto* s = store.series(QStringLiteral("x"));
        QCOMPARE(s->size(), 2);
        QVERIFY(!s->tokensSorted);
        QVERIFY(!s->wallTimeSorted);
        QVERIFY(s->keysSorted(MetricStore::Axis::Step));
    }

    void protocolMetrics() {
        MetricStore store;
        QSignalSpy added(&store, &MetricStore::seriesAdded);
        QSignalSpy appended(&store, &MetricStore::appended);
        lathe::protocol::Metrics m{10, 20480, 1.5, {{"train/CE loss", 4.0}, {"optim/LR", 1e-3}}};
        store.append(m);
        QCOMPARE(added.size(), 2);
        QCOMPARE(appended.size(), 1);  // one signal per message
        QCOMPARE(store.names(),
                 (QStringList{QStringLiteral("train/CE loss"), QStringLiteral("optim/LR")}));
        QCOMPARE(store.series(QStringLiteral("optim/LR"))->tokens.front(), 20480.0);
        store.clear();
        QVERIFY(store.names().isEmpty());
        QVERIFY(!store.series(QStringLiteral("optim/LR")));
    }

    void csvExport() {
        MetricStore store;
        store.append(QStringLiteral("train/CE loss"), 1, 100, 0.5, 5.5);
        store.append(QStringLiteral("train/CE loss"), 2, 200, 1.0, 4.25);
        store.append(QStringLiteral("eval, \"odd\" name"), 2, 200, 1.0, 6.0);
        store.append(QStringLiteral("train/CE loss"), 3, 300, 1.5, std::nan(""));
        const QString expected = QStringLiteral(
            "step,tokens,wall_time,train/CE loss,\"eval, \"\"odd\"\" name\"\n"
            "1,100,0.5,5.5,\n"
            "2,200,1,4.25,6\n"
            "3,300,1.5,nan,\n");
        QCOMPARE(store.toCsv(), expected);
        QCOMPARE(store.toCsv({QStringLiteral("train/CE loss")}),
                 QStringLiteral("step,tokens,wall_time,train/CE "
                                "loss\n1,100,0.5,5.5\n2,200,1,4.25\n3,300,1.5,nan\n"));
        // Full precision survives the round trip.
        MetricStore precise;
        precise.append(QStringLiteral("lr"), 1, 0, 0, 0.1 + 0.2);
        QVERIFY(precise.toCsv().contains(QStringLiteral("0.30000000000000004")));
    }
};

QTEST_GUILESS_MAIN(TestMetricStore)
#include "test_metric_store.moc"
