#include "ui/plots/plot_panel.h"
#include "ui/util/notice_bar.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QResizeEvent>
#include <QSaveFile>
#include <QScrollArea>
#include <QSlider>
#include <QSvgGenerator>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

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

QVector<MetricGroup> PlotPanel::suggestedGroups() {
    return {{tr("Tokens per data source"), {QStringLiteral("data/source/*")}, false}};
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
    auto* add = new QToolButton(this);
    add->setObjectName(QStringLiteral("addPlot"));
    add->setText(tr("Add plot"));
    add->setToolTip(
        tr("Plot any logged metric that no panel shows (right-click a plot to "
           "remove it)"));
    add->setPopupMode(QToolButton::InstantPopup);
    addMenu_ = new QMenu(add);
    add->setMenu(addMenu_);
    connect(addMenu_, &QMenu::aboutToShow, this, &PlotPanel::fillAddMenu);
    controls->addWidget(add);
    controls->addStretch(1);
    // (Exporting is in the File menu: buttons here made the panel too wide for small screens.)
    layout->addLayout(controls);

    // Shown while the plots do not follow new points, so that a drag never stops it silently.
    followBanner_ = makeNoticeBar(this, QStringLiteral("followBanner"));
    auto* bannerLayout = static_cast<QHBoxLayout*>(followBanner_->layout());
    auto* bannerText = new QLabel(
        tr("Paused: you moved the view, so new points are not scrolled into it."), followBanner_);
    bannerText->setWordWrap(true);
    bannerLayout->addWidget(bannerText, 1);
    auto* resume = new QPushButton(tr("Follow latest"), followBanner_);
    resume->setObjectName(QStringLiteral("resumeFollow"));
    bannerLayout->addWidget(resume);
    followBanner_->hide();
    layout->addWidget(followBanner_);
    connect(resume, &QPushButton::clicked, this, &PlotPanel::resetView);

    // The panels scroll when there are more than the window can show at their minimum size.
    auto* scroll = new QScrollArea(this);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidgetResizable(true);
    grid_ = new QWidget(scroll);
    auto* gridLayout = new QGridLayout(grid_);
    gridLayout->setContentsMargins(0, 0, 0, 0);
    gridLayout->setSpacing(4);
    scroll->setWidget(grid_);
    layout->addWidget(scroll, 1);

    replotTimer_ = new QTimer(this);
    replotTimer_->setSingleShot(true);
    replotTimer_->setInterval(kReplotIntervalMs);
    connect(replotTimer_, &QTimer::timeout, this, &PlotPanel::replotNow);
    for (const auto& g : defaultGroups()) addPanel(g);

    connect(store_, &MetricStore::appended, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::cleared, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::smoothingChanged, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::restructured, this, &PlotPanel::scheduleReplot);
    connect(store_, &MetricStore::seriesAdded, this, &PlotPanel::onSeriesAdded);
    connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });
    connect(logY_, &QCheckBox::toggled, this, &PlotPanel::setLogY);
    connect(xAxis_, &QComboBox::currentIndexChanged, this, [this](int) {
        setXAxis(static_cast<MetricStore::Axis>(xAxis_->currentData().toInt()));
    });
    connect(follow_, &QCheckBox::toggled, this, &PlotPanel::setFollowLatest);
    connect(reset, &QToolButton::clicked, this, &PlotPanel::resetView);
}

QVector<MetricGroup> PlotPanel::groups() const {
    QVector<MetricGroup> out;
    for (auto* p : plots_) out << p->group();
    return out;
}

MetricPlot* PlotPanel::addPanel(const MetricGroup& group) {
    auto* plot = new MetricPlot(group, store_, grid_);
    plot->setLogY(logY_->isChecked());
    plot->setXAxis(static_cast<MetricStore::Axis>(xAxis_->currentData().toInt()));
    plot->setFollowLatest(follow_->isChecked());
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot, &QWidget::customContextMenuRequested, this,
            [this, plot](const QPoint& pos) { showPlotMenu(plot, pos); });
    connect(plot, &MetricPlot::userNavigated, this, [this] {
        {
            QSignalBlocker block(follow_);
            follow_->setChecked(false);
        }
        for (auto* p : plots_) p->setFollowLatest(false);
        followBanner_->show();
    });
    plots_.append(plot);
    relayout();
    scheduleReplot();
    Q_EMIT panelsChanged();
    return plot;
}

void PlotPanel::removePanel(MetricPlot* plot) {
    if (!plots_.removeOne(plot)) return;
    for (const auto& g : suggestedGroups())
        if (g.patterns == plot->group().patterns) dismissed_ << g.patterns.join(QLatin1Char(';'));
    plot->deleteLater();
    plot->hide();
    relayout();
    Q_EMIT panelsChanged();
}

void PlotPanel::setGroups(const QVector<MetricGroup>& groups) {
    const QVector<MetricGroup> wanted = groups.isEmpty() ? defaultGroups() : groups;
    if (wanted == this->groups()) return;
    QSignalBlocker block(this);
    for (auto* p : plots_) {
        p->hide();
        p->deleteLater();
    }
    plots_.clear();
    for (const auto& g : wanted) addPanel(g);
    block.unblock();
    Q_EMIT panelsChanged();
}

void PlotPanel::resetPanels() {
    dismissed_.clear();
    setGroups(defaultGroups());
}

int PlotPanel::columnsFor(int width) {
    // Room for a panel and a half each before a second (third) column: two columns of minimum
    // width side by side read worse than one of twice the width.
    const int perColumn = MetricPlot::kMinimumWidth * 3 / 2;
    return std::clamp(width / perColumn, 1, 3);
}

void PlotPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (columnsFor(event->size().width()) != columns_) relayout();
}

void PlotPanel::relayout() {
    columns_ = columnsFor(width());
    auto* gridLayout = static_cast<QGridLayout*>(grid_->layout());
    while (gridLayout->count() > 0) delete gridLayout->takeAt(0);
    for (int c = 0; c < 3; ++c) gridLayout->setColumnStretch(c, c < columns_ ? 1 : 0);
    for (int i = 0; i < plots_.size(); ++i)
        gridLayout->addWidget(plots_[i], i / columns_, i % columns_);
}

QVector<MetricGroup> PlotPanel::pickerChoices() const {
    QStringList unplotted;
    for (const QString& name : store_->names()) {
        const auto* s = store_->series(name);
        if ((s && s->branch > 0) || plotFor(name)) continue;
        unplotted << name;
    }
    unplotted.sort();
    QMap<QString, int> folders;
    for (const QString& name : unplotted) {
        const int slash = name.lastIndexOf(QLatin1Char('/'));
        if (slash > 0) ++folders[name.left(slash)];
    }
    QVector<MetricGroup> out;
    for (auto it = folders.cbegin(); it != folders.cend(); ++it)
        if (it.value() >= 2)
            out.append({it.key() + QStringLiteral("/*"), {it.key() + QStringLiteral("/*")}, true});
    for (const QString& name : unplotted) out.append({name, {name}, true});
    return out;
}

bool PlotPanel::followBannerVisible() const {
    return !followBanner_->isHidden();
}

void PlotPanel::fillAddMenu() {
    addMenu_->clear();
    const auto choices = pickerChoices();
    if (choices.isEmpty()) {
        addMenu_->addAction(tr("Every logged metric has a panel"))->setEnabled(false);
    }
    for (const auto& g : choices) {
        QString text = g.title;
        if (g.patterns.front().endsWith(QLatin1Char('*'))) {
            int n = 0;
            for (const QString& name : store_->names())
                if (!plotFor(name) && g.accepts(name)) ++n;
            text = tr("%1 (%n metrics)", nullptr, n).arg(g.title);
        }
        QAction* a = addMenu_->addAction(text);
        connect(a, &QAction::triggered, this, [this, g] { addPanel(g); });
    }
    addMenu_->addSeparator();
    connect(addMenu_->addAction(tr("Reset to the default panels")), &QAction::triggered, this,
            &PlotPanel::resetPanels);
}

void PlotPanel::showPlotMenu(MetricPlot* plot, const QPoint& pos) {
    QMenu menu(this);
    connect(menu.addAction(tr("Remove “%1”").arg(plot->group().title)), &QAction::triggered, this,
            [this, plot] { removePanel(plot); });
    connect(menu.addAction(tr("Reset to the default panels")), &QAction::triggered, this,
            &PlotPanel::resetPanels);
    menu.exec(plot->mapToGlobal(pos));
}

void PlotPanel::onSeriesAdded(const QString& name) {
    const auto* s = store_->series(name);
    if ((s && s->branch > 0) || plotFor(name)) return;
    for (const auto& g : suggestedGroups()) {
        if (dismissed_.contains(g.patterns.join(QLatin1Char(';')))) continue;
        if (g.accepts(name)) {
            addPanel(g);
            return;
        }
    }
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
    followBanner_->setVisible(!on);
    for (auto* p : plots_) p->setFollowLatest(on);
    scheduleReplot();
}

void PlotPanel::resetView() {
    setFollowLatest(true);
}

QSize PlotPanel::exportSize(int panels) {
    constexpr int gap = 8;
    const int rows = std::max(1, (panels + kExportColumns - 1) / kExportColumns);
    const int cols = std::clamp(panels, 1, kExportColumns);
    return {cols * kExportPanelSize.width() + (cols - 1) * gap,
            rows * kExportPanelSize.height() + (rows - 1) * gap};
}

bool PlotPanel::exportImage(const QString& path, QString* error) {
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix != QLatin1String("png") && suffix != QLatin1String("svg"))
        return fail(tr("%1: name the file .png or .svg").arg(path));
    replotNow();
    const QSize size = exportSize(int(plots_.size()));
    const QColor background = palette().color(QPalette::Window);
    // Each panel draws itself at kExportPanelSize (QCustomPlot lays itself out again for that
    // viewport), then goes back to its size on screen.
    auto paint = [&](QPainter& raw) {
        auto& painter = static_cast<QCPPainter&>(raw);
        painter.fillRect(QRect(QPoint(0, 0), size), background);
        for (int i = 0; i < plots_.size(); ++i) {
            const int col = i % kExportColumns;
            const int row = i / kExportColumns;
            painter.save();
            painter.translate(col * (kExportPanelSize.width() + 8),
                              row * (kExportPanelSize.height() + 8));
            plots_[i]->toPainter(&painter, kExportPanelSize.width(), kExportPanelSize.height());
            painter.restore();
        }
    };
    bool ok = false;
    if (suffix == QLatin1String("png")) {
        QImage image(size, QImage::Format_ARGB32_Premultiplied);
        image.fill(background);
        {
            QCPPainter painter(&image);
            painter.setRenderHint(QPainter::Antialiasing);
            paint(painter);
        }
        QSaveFile f(path);
        ok = f.open(QIODevice::WriteOnly) && image.save(&f, "PNG") && f.commit();
    } else {
        QSaveFile f(path);
        if (f.open(QIODevice::WriteOnly)) {
            QSvgGenerator svg;
            svg.setOutputDevice(&f);
            svg.setSize(size);
            svg.setViewBox(QRect(QPoint(0, 0), size));
            svg.setTitle(tr("Lathe plots"));
            {
                QCPPainter painter(&svg);
                paint(painter);
            }
            ok = f.commit();
        }
    }
    for (auto* p : plots_) p->replot(QCustomPlot::rpQueuedReplot);
    return ok || fail(tr("could not write %1").arg(path));
}

bool PlotPanel::exportCsv(const QString& path) {
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) return false;
    if (!store_->writeCsv(&f)) return false;
    return f.commit();
}

void PlotPanel::exportImageInteractive() {
    QString filter = tr("PNG images (*.png)");
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export plots"), QStringLiteral("plots.png"),
                                     tr("PNG images (*.png);;SVG drawings (*.svg)"), &filter);
    if (path.isEmpty()) return;
    QString target = path;
    if (QFileInfo(target).suffix().isEmpty())
        target +=
            filter.contains(QLatin1String("svg")) ? QStringLiteral(".svg") : QStringLiteral(".png");
    QString error;
    if (!exportImage(target, &error)) QMessageBox::warning(this, tr("Export failed"), error);
}

void PlotPanel::exportCsvInteractive() {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export metrics as CSV"), QStringLiteral("metrics.csv"), tr("CSV files (*.csv)"));
    if (!path.isEmpty() && !exportCsv(path))
        QMessageBox::warning(this, tr("Export failed"), tr("Could not write %1.").arg(path));
}

}  // namespace lathe::ui
