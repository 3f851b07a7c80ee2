// LogModel and its filter: batching, the size cap, level / rank / text filters; both checked by
// QAbstractItemModelTester.
#include "ui/control/run_controller.h"
#include "ui/logs/log_model.h"

#include <QAbstractItemModelTester>
#include <QtTest>

using lathe::ui::LogFilterModel;
using lathe::ui::LogModel;

class TestLogModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void filtersAndCap() {
        LogModel model;
        LogFilterModel filter;
        filter.setSourceModel(&model);
        QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(&filter,
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.append(0, QStringLiteral("info"), QStringLiteral("step 1 loss 5.0"));
        model.append(1, QStringLiteral("warning"), QStringLiteral("slow data loader"));
        model.append(0, QStringLiteral("error"), QStringLiteral("NaN loss"));
        model.append(lathe::ui::kConsoleRank, QStringLiteral("debug"),
                     QStringLiteral("raw output"));
        QCOMPARE(model.rowCount(), 0);  // batched
        QTRY_COMPARE(model.rowCount(), 4);
        QCOMPARE(model.ranks(), (QVector<int>{0, 1, lathe::ui::kConsoleRank}));
        QCOMPARE(model.data(model.index(3, LogModel::SourceColumn)).toString(),
                 QStringLiteral("console"));
        QCOMPARE(model.data(model.index(1, LogModel::LevelColumn)).toString(),
                 QStringLiteral("warning"));
        QCOMPARE(filter.rowCount(), 4);
        filter.setMinimumLevel(LogModel::Level::Warning);
        QCOMPARE(filter.rowCount(), 2);
        filter.setRank(0);
        QCOMPARE(filter.rowCount(), 1);
        QCOMPARE(filter.data(filter.index(0, LogModel::MessageColumn)).toString(),
                 QStringLiteral("NaN loss"));
        filter.setRank(LogFilterModel::kAllRanks);
        filter.setMinimumLevel(LogModel::Level::Debug);
        filter.setSearchText(QStringLiteral("LOSS"));
        QCOMPARE(filter.rowCount(), 2);
        filter.setSearchText(QString());

        model.setMaxRows(100);
        for (int i = 0; i < 250; ++i)
            model.append(2, QStringLiteral("info"), QStringLiteral("line %1").arg(i));
        model.flush();
        QCOMPARE(model.rowCount(), 100);
        QCOMPARE(model.data(model.index(99, LogModel::MessageColumn)).toString(),
                 QStringLiteral("line 249"));
        model.clear();
        QCOMPARE(filter.rowCount(), 0);
    }
};

QTEST_GUILESS_MAIN(TestLogModel)
#include "test_log_model.moc"
