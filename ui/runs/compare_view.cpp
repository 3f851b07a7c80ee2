#include "ui/runs/compare_view.h"

#include "ui/plots/metric_store.h"
#include "ui/plots/qcustomplot_include.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <cmath>

namespace lathe::ui {

CompareView::CompareView(RunComparison* comparison, QWidget* parent)
    : QWidget(parent), comparison_(comparison) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Metric:"), this));
    metric_ = new QComboBox(this);
    metric_->setObjectName(QStringLiteral("compareMetric"));
    metric_->setMinimumContentsLength(24);
    controls->addWidget(metric_);
    controls->addSpacing(12);
    controls->addWidget(new QLabel(tr("Smoothing:"), this));
    smoothing_ = new QSlider(Qt::Horizontal, this);
    smoothing_->setRange(0, 99);
    smoothing_->setMaximumWidth(160);
    smoothing_->setValue(qRound(comparison_->smoothingWeight() * 100));
    controls->addWidget(smoothing_);
    smoothingValue_ = new QLabel(QString::number(comparison_->smoothingWeight(), 'f', 2), this);
    controls->addWidget(smoothingValue_);
    controls->addStretch(1);
    layout->addLayout(controls);

    auto* split = new QSplitter(Qt::Vertical, this);
    plot_ = new QCustomPlot(split);
    plot_->setObjectName(QStringLiteral("comparePlot"));
    plot_->setMinimumSize(400, 260);
    plot_->legend->setVisible(true);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    plot_->xAxis->setLabel(tr("step"));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    split->addWidget(plot_);

    auto* diffBox = new QWidget(split);
    auto* diffLayout = new QVBoxLayout(diffBox);
    diffLayout->setContentsMargins(0, 0, 0, 0);
    auto* diffBar = new QHBoxLayout;
    diffBar->addWidget(new QLabel(tr("Config differences:"), diffBox));
    diffA_ = new QComboBox(diffBox);
    diffA_->setObjectName(QStringLiteral("diffA"));
    diffB_ = new QComboBox(diffBox);
    diffB_->setObjectName(QStringLiteral("diffB"));
    diffBar->addWidget(diffA_);
    diffBar->addWidget(new QLabel(tr("vs"), diffBox));
    diffBar->addWidget(diffB_);
    diffSummary_ = new QLabel(diffBox);
    diffBar->addWidget(diffSummary_);
    diffBar->addStretch(1);
    diffLayout->addLayout(diffBar);
    diff_ = new ConfigDiffModel(this);
    diffView_ = new QTableView(diffBox);
    diffView_->setObjectName(QStringLiteral("configDiff"));
    diffView_->setModel(diff_);
    diffView_->horizontalHeader()->setStretchLastSection(true);
    diffView_->verticalHeader()->hide();
    diffView_->setWordWrap(false);
    diffLayout->addWidget(diffView_);
    split->addWidget(diffBox);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);

    connect(metric_, &QComboBox::currentIndexChanged, this, [this](int) { redraw(); });
    connect(smoothing_, &QSlider::valueChanged, this, [this](int v) {
        comparison_->setSmoothingWeight(v / 100.0);
        smoothingValue_->setText(QString::number(comparison_->smoothingWeight(), 'f', 2));
    });
    connect(comparison_, &RunComparison::smoothingChanged, this, &CompareView::redraw);
    connect(comparison_, &RunComparison::runsChanged, this, &CompareView::rebuildRuns);
    connect(diffA_, &QComboBox::currentIndexChanged, this, [this](int) { updateDiff(); });
    connect(diffB_, &QComboBox::currentIndexChanged, this, [this](int) { updateDiff(); });
    rebuildRuns();
}

QString CompareView::metric() const {
    return metric_->currentText();
}

void CompareView::setMetric(const QString& name) {
    const int i = metric_->findText(name);
    if (i >= 0) metric_->setCurrentIndex(i);
}

void CompareView::setDiffRuns(int a, int b) {
    {
        QSignalBlocker ba(diffA_), bb(diffB_);
        diffA_->setCurrentIndex(a);
        diffB_->setCurrentIndex(b);
    }
    updateDiff();
}

void CompareView::rebuildRuns() {
    const QString keep = metric();
    {
        QSignalBlocker block(metric_);
        metric_->clear();
        metric_->addItems(comparison_->metricNames());
        int i = metric_->findText(keep.isEmpty() ? QStringLiteral("train/CE loss") : keep);
        metric_->setCurrentIndex(std::max(0, i));
    }
    {
        QSignalBlocker ba(diffA_), bb(diffB_);
        diffA_->clear();
        diffB_->clear();
        for (int r = 0; r < comparison_->runCount(); ++r) {
            diffA_->addItem(comparison_->runName(r));
            diffB_->addItem(comparison_->runName(r));
        }
        diffA_->setCurrentIndex(0);
        diffB_->setCurrentIndex(comparison_->runCount() > 1 ? 1 : 0);
    }
    redraw();
    updateDiff();
}

void CompareView::redraw() {
    plot_->clearGraphs();
    const QString name = metric();
    double ymin = INFINITY, ymax = -INFINITY, xmin = INFINITY, xmax = -INFINITY;
    for (int r = 0; r < comparison_->runCount(); ++r) {
        const MetricStore::Series* s = comparison_->store(r)->series(name);
        const QColor c = comparison_->color(r);
        QColor faint = c;
        faint.setAlphaF(0.25);
        auto* raw = plot_->addGraph();
        raw->setPen(QPen(faint, 1));
        raw->removeFromLegend();
        auto* smooth = plot_->addGraph();
        smooth->setPen(QPen(c, 1.6));
        smooth->setName(comparison_->runName(r));
        if (!s || s->size() == 0) continue;
        raw->setData(s->step, s->value, true);
        smooth->setData(s->step, s->smoothed, true);
        xmin = std::min(xmin, s->step.front());
        xmax = std::max(xmax, s->step.back());
        ymin = std::min(ymin, s->min);
        ymax = std::max(ymax, s->max);
    }
    if (std::isfinite(xmin)) {
        plot_->xAxis->setRange(xmin, xmax > xmin ? xmax : xmin + 1);
        const double pad =
            ymax > ymin ? (ymax - ymin) * 0.05 : std::max(std::abs(ymax) * 0.05, 1e-12);
        if (std::isfinite(ymin)) plot_->yAxis->setRange(ymin - pad, ymax + pad);
    }
    plot_->yAxis->setLabel(name);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void CompareView::updateDiff() {
    const int a = diffA_->currentIndex(), b = diffB_->currentIndex();
    if (a < 0 || b < 0 || a >= comparison_->runCount() || b >= comparison_->runCount()) {
        diff_->clear();
        diffSummary_->clear();
        return;
    }
    diff_->setConfigs(comparison_->config(a), comparison_->config(b), comparison_->runName(a),
                      comparison_->runName(b));
    diffSummary_->setText(
        tr("%n field(s) differ", nullptr, static_cast<int>(diff_->differences().size())));
    diffView_->resizeColumnToContents(ConfigDiffModel::PathColumn);
}

}  // namespace lathe::ui
