#include "ui/plots/plot_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QSaveFile>
#include <QSlider>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

namespace lathe::ui {

QVector<MetricGroup> PlotPanel::defaultGroups() {
    return {
        {tr("Loss"), {QStringLiteral("train/CE loss"), QStringLiteral("eval/*CE loss")}, true},
        {tr("Learning rate"), {QStringLiteral("optim/LR*")}, false},
        {tr("Gradient norm"), {QStringLiteral("optim/total grad norm")}, true},
        {tr("Throughput (tokens/s)"), {QStringLiteral("throughput/*TPS*")}, true},
        // Training perplexity is drawn here too, so the panel is not called "Evaluation".
        {tr("Perplexity and accuracy"),
         {QStringLiteral("train/PPL"), QStringLiteral("eval/*PPL*"),
          QStringLiteral("eval/*accuracy*")},
         true},
        {tr("Memory"),
         {QStringLiteral("system/*memory*"), QStringLiteral("gpu_memory/*"),
          QStringLiteral("memory/*")},
         false,
         /*includeZero=*/true},
    };
}

PlotPanel::PlotPanel(MetricStore* store, QWidget* parent) : QWidget(parent), store_(store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Smoothing:"), this));
    smoothing_ = new QSlider(Qt::Horizontal, this);
    smoothing_->setObjectName(QStringLiteral("smoothing"));
    smoothing_->setRange(0, 99);
    smoothing_->setValue(qRound(store_->smoothingWeight() * 100));
    smoothing_->setMaximumWidth(160);
    smoothing_->setMinimumWidth(60);
    smoothing_->setToolTip(
        tr("TensorBoard's debiased exponential moving average; the raw values "
           "are drawn faintly behind."));
    controls->addWidget(smoothing_);
    smoothingValue_ = new QLabel(QString::number(store_->smoothingWeight(), 'f', 2), this);
    smoothingValue_->setMinimumWidth(
        smoothingValue_->fontMetrics().horizontalAdvance(QStringLiteral("0.00")));
    controls->addWidget(smoothingValue_);
    controls->addSpacing(12);
    logY_ = new QCheckBox(tr("Log y"), this);
    logY_->setObjectName(QStringLiteral("logY"));
    controls->addWidget(logY_);
    controls->addSpacing(12);
    controls->addWidget(new QLabel(tr("x axis:"), this));
    xAxis_ = new QComboBox(this);
    xAxis_->setObjectName(QStringLiteral("xAxis"));
    xAxis_->addItem(tr("step"), int(MetricStore::Axis::Step));
    xAxis_->addItem(tr("tokens"), int(MetricStore::Axis::Tokens));
    xAxis_->addItem(tr("wall time"), int(MetricStore::Axis::WallTime));
    controls->addWidget(xAxis_);
    controls->addSpacing(12);
    follow_ = new QCheckBox(tr("Follow latest"), this);
    follow_->setObjectName(QStringLiteral("followLatest"));
    follow_->setChecked(true);
    follow_->setToolTip(
        tr("Keep every point in view as data arrives. Zooming or panning turns "
           "this off; Reset view turns it back on."));
    controls->addWidget(follow_);
    auto* reset = new QToolButton(this);
    reset->setText(tr("Reset view"));
    reset->setToolTip(tr("Fit all data (also: double-click a plot)"));
    controls->addWidget(reset);
    controls->addStretch(1);
    // (Exporting is in the File menu: buttons here made the panel too wide for small screens.)
    layout->addLayout(controls);

    grid_ = new QWidget(this);
    auto* gridLayout = new QGridLayout(grid_);
    gridLayout->setContentsMargins(0, 0, 0, 0);
    gridLayout->setSpacing(4);
    const auto groups = defaultGroups();
    for (int i = 0; i < groups.size(); ++i) {
        auto* plot = new MetricPlot(groups[i], store_, grid_);
        plots_.append(plot);
        gridLayout->addWidget(plot, i / 2, i % 2);
        connect(plot, &MetricPlot::userNavigated, this, [this] {
            QSignalBlocker block(follow_);
            follow_->setChecked(false);
            for (auto* p : plots_) p->setFollowLatest(false);
        });
    }
    layout->addWidget(grid_, 1);

    replotTimer_ = new QTimer(this);
    replotTimer_->setSingleShot(true);
    replotTimer_->setInterval(kReplotIntervalMs);
    connect(replotTimer_, &QTimer::timeout, this, &PlotPanel::replotNow);

    connect(store_, &MetricStore::appended, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::cleared, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::smoothingChanged, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::restructured, this, &PlotPanel::scheduleReplot);
    connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });
    connect(logY_, &QCheckBox::toggled, this, &PlotPanel::setLogY);
    connect(xAxis_, &QComboBox::currentIndexChanged, this, [this](int) {
        setXAxis(static_cast<MetricStore::Axis>(xAxis_->currentData().toInt()));
    });
    connect(follow_, &QCheckBox::toggled, this, &PlotPanel::setFollowLatest);
    connect(reset, &QToolButton::clicked, this, &PlotPanel::resetView);
}

MetricPlot* PlotPanel::plotFor(const QString& metricName) const {
    for (auto* p : plots_)
        if (p->accepts(metricName)) return p;
    return nullptr;
}

bool PlotPanel::replotPending() const {
    return replotTimer_->isActive();
}

void PlotPanel::scheduleReplot() {
    if (!replotTimer_->isActive()) replotTimer_->start();
}

void PlotPanel::replotNow() {
    ++replots_;
    for (auto* p : plots_) {
        p->sync();
        p->replot(QCustomPlot::rpQueuedReplot);
    }
}

void PlotPanel::setSmoothing(double weight) {
    store_->setSmoothingWeight(weight);
    smoothingValue_->setText(QString::number(store_->smoothingWeight(), 'f', 2));
    QSignalBlocker block(smoothing_);
    smoothing_->setValue(qRound(store_->smoothingWeight() * 100));
}

void PlotPanel::setLogY(bool on) {
    {
        QSignalBlocker block(logY_);
        logY_->setChecked(on);
    }
    for (auto* p : plots_) p->setLogY(on);
    scheduleReplot();
}

void PlotPanel::setXAxis(MetricStore::Axis axis) {
    {
        QSignalBlocker block(xAxis_);
        xAxis_->setCurrentIndex(xAxis_->findData(int(axis)));
    }
    for (auto* p : plots_) p->setXAxis(axis);
    scheduleReplot();
}

void PlotPanel::setFollowLatest(bool on) {
    {
        QSignalBlocker block(follow_);
        follow_->setChecked(on);
    }
    for (auto* p : plots_) p->setFollowLatest(on);
    scheduleReplot();
}

void PlotPanel::resetView() {
    setFollowLatest(true);
}

bool PlotPanel::exportPng(const QString& path) {
    replotNow();
    for (auto* p : plots_) p->replot(QCustomPlot::rpImmediateRefresh);
    return grid_->grab().save(path, "PNG");
}

bool PlotPanel::exportCsv(const QString& path) {
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) return false;
    if (!store_->writeCsv(&f)) return false;
    return f.commit();
}

void PlotPanel::exportPngInteractive() {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export plots as PNG"), QStringLiteral("plots.png"), tr("PNG images (*.png)"));
    if (!path.isEmpty() && !exportPng(path))
        QMessageBox::warning(this, tr("Export failed"), tr("Could not write %1.").arg(path));
}

void PlotPanel::exportCsvInteractive() {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export metrics as CSV"), QStringLiteral("metrics.csv"), tr("CSV files (*.csv)"));
    if (!path.isEmpty() && !exportCsv(path))
        QMessageBox::warning(this, tr("Export failed"), tr("Could not write %1.").arg(path));
}

}  // namespace lathe::ui
