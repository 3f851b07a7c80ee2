#include "ui/plots/metric_plot.h"

#include <QApplication>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace lathe::ui {
namespace {

// Distinct on light and dark backgrounds (Tableau 10).
const QColor kColors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b),
                          QColor(0xe1, 0x57, 0x59), QColor(0x76, 0xb7, 0xb2),
                          QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                          QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7)};

QString axisLabel(MetricStore::Axis axis) {
    switch (axis) {
        case MetricStore::Axis::Tokens:
            return QObject::tr("tokens");
        case MetricStore::Axis::WallTime:
            return QObject::tr("wall time (s)");
        case MetricStore::Axis::Step:
            break;
    }
    return QObject::tr("step");
}

// Globs as in the config's metric patterns: '*' matches anything, '/' included (Qt's wildcard
// conversion stops at path separators).
QRegularExpression globRegex(const QString& pattern) {
    QString re = QRegularExpression::escape(pattern);
    re.replace(QLatin1String("\\*"), QLatin1String(".*"));
    re.replace(QLatin1String("\\?"), QLatin1String("."));
    return QRegularExpression(QRegularExpression::anchoredPattern(re));
}

// QCustomPlot's ticker with MetricPlot::compactLabels for large values.
class CompactTicker : public QCPAxisTicker {
protected:
    QVector<QString> createLabelVector(const QVector<double>& ticks, const QLocale& locale,
                                       QChar formatChar, int precision) override {
        QVector<QString> labels = MetricPlot::compactLabels(ticks);
        if (labels.isEmpty())
            labels = QCPAxisTicker::createLabelVector(ticks, locale, formatChar, precision);
        return labels;
    }
};

}  // namespace

QVariantMap MetricGroup::toVariant() const {
    return {{QStringLiteral("title"), title},
            {QStringLiteral("patterns"), patterns},
            {QStringLiteral("smoothed"), smoothed},
            {QStringLiteral("includeZero"), includeZero}};
}

bool MetricGroup::accepts(const QString& name) const {
    for (const QString& p : patterns)
        if (globRegex(p).match(name).hasMatch()) return true;
    return false;
}

MetricGroup MetricGroup::fromVariant(const QVariantMap& map) {
    MetricGroup g;
    g.title = map.value(QStringLiteral("title")).toString();
    g.patterns = map.value(QStringLiteral("patterns")).toStringList();
    g.smoothed = map.value(QStringLiteral("smoothed"), true).toBool();
    g.includeZero = map.value(QStringLiteral("includeZero"), false).toBool();
    return g;
}

QVector<QString> MetricPlot::compactLabels(const QVector<double>& ticks) {
    double maxAbs = 0, step = INFINITY;
    for (int i = 0; i < ticks.size(); ++i) {
        maxAbs = std::max(maxAbs, std::abs(ticks[i]));
        if (i > 0 && ticks[i] != ticks[i - 1])
            step = std::min(step, std::abs(ticks[i] - ticks[i - 1]));
    }
    if (!(maxAbs >= 1e4) || !std::isfinite(maxAbs)) return {};
    static const std::pair<double, const char*> kScales[] = {
        {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    double scale = 1e3;
    QString suffix = QStringLiteral("k");
    for (const auto& [s, name] : kScales) {
        if (maxAbs >= s) {
            scale = s;
            suffix = QString::fromLatin1(name);
            break;
        }
    }
    int decimals = 0;
    if (std::isfinite(step) && step / scale < 1)
        decimals = std::clamp(int(std::ceil(-std::log10(step / scale) - 1e-9)), 0, 6);
    QVector<QString> labels;
    labels.reserve(ticks.size());
    for (double t : ticks) {
        if (t == 0) {
            labels << QStringLiteral("0");
            continue;
        }
        labels << QString::number(t / scale, 'f', decimals) + suffix;
    }
    return labels;
}

MetricPlot::MetricPlot(MetricGroup group, MetricStore* store, QWidget* parent)
    : QCustomPlot(parent), group_(std::move(group)), store_(store) {
    for (const QString& p : group_.patterns) regexps_.append(globRegex(p));

    // Follow the desktop palette (light or dark).
    const QPalette pal = palette();
    const QColor fg = pal.color(QPalette::WindowText);
    const QColor grid = QColor::fromRgbF(fg.redF(), fg.greenF(), fg.blueF(), 0.12);
    setBackground(pal.brush(QPalette::Base));
    for (QCPAxis* a : {xAxis, yAxis}) {
        a->setBasePen(QPen(fg));
        a->setTickPen(QPen(fg));
        a->setSubTickPen(QPen(fg));
        a->setTickLabelColor(fg);
        a->setLabelColor(fg);
        a->grid()->setPen(QPen(grid));
    }
    plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(this, group_.title,
                                     QFont(font().family(), font().pointSize(), QFont::Bold));
    title->setTextColor(fg);
    plotLayout()->addElement(0, 0, title);
    xAxis->setLabel(axisLabel(axis_));
    legend->setVisible(false);
    legend->setBrush(QBrush(pal.color(QPalette::Base)));
    legend->setTextColor(fg);
    legend->setBorderPen(QPen(grid));
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    legend->setFont(small);
    // The legend sits in its own row under the axis rect, wrapping into columns: inside the
    // axis rect it covered the newest points and, in narrow plots, the value labels.
    auto* legendRow = new QCPLayoutGrid;
    plotLayout()->addElement(2, 0, legendRow);
    legendRow->setMargins(QMargins(4, 0, 4, 2));
    legendRow->addElement(0, 0, legend);
    // QCustomPlot gives a layout column the smallest maximum width of its elements, and a legend's
    // maximum is its entries' width: alone in its row it narrowed the whole plot to the title's
    // width (an empty panel drew a tiny box with a clipped "no data yet"; issue 45 item 10). An
    // empty element beside it takes the rest of the row and has no maximum.
    auto* filler = new QCPLayoutElement(this);
    filler->setMinimumSize(0, 0);
    legendRow->addElement(0, 1, filler);
    legendRow->setColumnStretchFactor(0, 0.001);
    legendRow->setColumnStretchFactor(1, 1);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    legend->setWrap(2);
    legend->setRowSpacing(0);
    legend->setColumnSpacing(6);
    legend->setMargins(QMargins(3, 1, 3, 1));
    plotLayout()->setRowStretchFactor(2, 0.001);
    yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new CompactTicker));

    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    setNoAntialiasingOnDrag(true);
    setPlottingHint(QCP::phCacheLabels, true);
    // Readable: a title, five y labels that do not overlap, x labels, a legend row. More panels
    // than fit scroll (PlotPanel); they never shrink below this.
    setMinimumSize(kMinimumWidth, kMinimumHeight);
    setMouseTracking(true);

    placeholder_ = new QCPItemText(this);
    placeholder_->position->setType(QCPItemPosition::ptAxisRectRatio);
    placeholder_->position->setCoords(0.5, 0.5);
    placeholder_->setText(tr("no data yet\n%1").arg(group_.patterns.join(QStringLiteral(", "))));
    placeholder_->setColor(QColor::fromRgbF(fg.redF(), fg.greenF(), fg.blueF(), 0.5));

    cursor_ = new QCPItemStraightLine(this);
    cursor_->setPen(QPen(grid, 1, Qt::DashLine));
    cursor_->setVisible(false);

    connect(store_, &MetricStore::seriesAdded, this, [this](const QString& name) {
        if (acceptsSeries(name)) addLine(name);
    });
    connect(store_, &MetricStore::restructured, this, &MetricPlot::rebuild);
    connect(store_, &MetricStore::cleared, this, [this] {
        clearGraphs();
        lines_.clear();
        legend->setVisible(false);
        updatePlaceholder();
    });
    for (const QString& name : store_->names())
        if (acceptsSeries(name)) addLine(name);
    updatePlaceholder();
}

bool MetricPlot::acceptsSeries(const QString& seriesName) const {
    const auto* s = store_->series(seriesName);
    return accepts(s ? s->metric : seriesName);
}

bool MetricPlot::accepts(const QString& name) const {
    for (const auto& re : regexps_)
        if (re.match(name).hasMatch()) return true;
    return false;
}

QStringList MetricPlot::seriesNames() const {
    QStringList out;
    for (const auto& l : lines_) out << l.name;
    return out;
}

void MetricPlot::addLine(const QString& name) {
    const auto* series = store_->series(name);
    Line line;
    line.name = name;
    if (series && series->branch > 0) {
        // An abandoned branch: the raw values only, faint and dashed, in its metric's colour.
        QColor c = QColor(0x9e, 0x9e, 0x9e);
        int mainIndex = 0;
        for (const auto& l : lines_) {
            if (l.abandoned) continue;
            if (l.name == series->metric) c = kColors[mainIndex % std::size(kColors)];
            ++mainIndex;
        }
        c.setAlphaF(0.45);
        line.abandoned = true;
        line.smooth = addGraph();
        line.smooth->setPen(QPen(c, 1.2, Qt::DashLine));
        line.smooth->setName(tr("%1 (abandoned)").arg(series->metric));
        // One legend entry for all abandoned branches of a metric.
        for (const auto& l : lines_) {
            if (l.abandoned && store_->series(l.name) &&
                store_->series(l.name)->metric == series->metric) {
                line.smooth->removeFromLegend();
                break;
            }
        }
        lines_.push_back(line);
        updatePlaceholder();
        return;
    }
    int mainLines = 0;
    for (const auto& l : lines_) mainLines += l.abandoned ? 0 : 1;
    const QColor c = kColors[mainLines % std::size(kColors)];
    if (group_.smoothed) {
        line.raw = addGraph();
        QColor faint = c;
        faint.setAlphaF(0.25);
        line.raw->setPen(QPen(faint, 1));
        line.raw->removeFromLegend();
    }
    line.smooth = addGraph();
    line.smooth->setPen(QPen(c, 1.6));
    line.smooth->setName(name);
    lines_.push_back(line);
    legend->setVisible(true);
    updatePlaceholder();
}

void MetricPlot::updatePlaceholder() {
    bool empty = true;
    for (const auto& l : lines_) {
        const auto* s = store_->series(l.name);
        if (s && s->size() > 0) empty = false;
    }
    placeholder_->setVisible(empty);
}

void MetricPlot::syncLine(Line& line) {
    const MetricStore::Series* s = store_->series(line.name);
    if (!s) return;
    const bool sorted = s->keysSorted(axis_);
    const QVector<double>& keys = s->keys(axis_);
    const QVector<double>& smooth = group_.smoothed && !line.abandoned ? s->smoothed : s->value;
    if (s->size() < line.synced) {  // the series lost points: start over
        if (line.raw) line.raw->data()->clear();
        line.smooth->data()->clear();
        line.synced = 0;
        line.smoothRevision = -1;
    }
    if (group_.smoothed && !line.abandoned && line.smoothRevision != s->smoothRevision) {
        line.smooth->data()->clear();
        line.smooth->addData(keys.mid(0, line.synced), smooth.mid(0, line.synced), sorted);
        line.smoothRevision = s->smoothRevision;
    }
    const int n = s->size();
    if (n <= line.synced) return;
    const QVector<double> k = keys.mid(line.synced);
    if (line.raw) line.raw->addData(k, s->value.mid(line.synced), sorted);
    line.smooth->addData(k, smooth.mid(line.synced), sorted);
    line.synced = n;
}

void MetricPlot::sync() {
    for (auto& l : lines_) syncLine(l);
    updatePlaceholder();
    if (follow_) fitToData();
}

void MetricPlot::rebuild() {
    for (auto& l : lines_) {
        if (l.raw) l.raw->data()->clear();
        l.smooth->data()->clear();
        l.synced = 0;
        l.smoothRevision = -1;
    }
    sync();
}

void MetricPlot::fitToData() {
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (const auto& l : lines_) {
        const auto* s = store_->series(l.name);
        if (!s || s->size() == 0) continue;
        const auto& keys = s->keys(axis_);
        // Sorted keys: the ends are the extremes; otherwise QCustomPlot's own (sorted) container.
        if (s->keysSorted(axis_)) {
            xmin = std::min(xmin, keys.front());
            xmax = std::max(xmax, keys.back());
        } else if (!l.smooth->data()->isEmpty()) {
            xmin = std::min(xmin, l.smooth->data()->constBegin()->key);
            xmax = std::max(xmax, (l.smooth->data()->constEnd() - 1)->key);
        }
        ymin = std::min(ymin, logY_ ? s->minPositive : s->min);
        ymax = std::max(ymax, s->max);
    }
    if (!std::isfinite(xmin)) return;
    if (xmax <= xmin) xmax = xmin + 1;
    xAxis->setRange(xmin, xmax);
    if (std::isfinite(ymin) && std::isfinite(ymax)) {
        if (logY_) {
            yAxis->setRange(ymin / 1.2, std::max(ymax, ymin) * 1.2);
        } else {
            yAxis->setRange(valueRange(ymin, ymax, group_.includeZero));
        }
    }
}

QCPRange MetricPlot::valueRange(double lo, double hi, bool includeZero) {
    if (includeZero) {
        lo = std::min(lo, 0.0);
        hi = std::max(hi, 0.0);
    }
    const double magnitude = std::max(std::abs(lo), std::abs(hi));
    const double span = std::max({hi - lo, magnitude * 0.05, 1e-12});
    const double center = (lo + hi) / 2;
    double lower = center - span / 2, upper = center + span / 2;
    // With zero included, the axis starts at 0 rather than below it.
    if (includeZero && lo >= 0) {
        lower = 0;
        upper = std::max(upper, span);
    }
    if (includeZero && hi <= 0) {
        upper = 0;
        lower = std::min(lower, -span);
    }
    const double pad = span * 0.05;
    return QCPRange(lower == 0 ? 0 : lower - pad, upper == 0 ? 0 : upper + pad);
}

void MetricPlot::setXAxis(MetricStore::Axis axis) {
    if (axis == axis_) return;
    axis_ = axis;
    xAxis->setLabel(axisLabel(axis));
    rebuild();
}

void MetricPlot::setLogY(bool on) {
    if (on == logY_) return;
    logY_ = on;
    if (on) {
        yAxis->setScaleType(QCPAxis::stLogarithmic);
        yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
        yAxis->setNumberFormat(QStringLiteral("eb"));
        yAxis->setNumberPrecision(0);
    } else {
        yAxis->setScaleType(QCPAxis::stLinear);
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new CompactTicker));
        yAxis->setNumberFormat(QStringLiteral("gb"));
        yAxis->setNumberPrecision(6);
    }
    fitToData();
}

void MetricPlot::setFollowLatest(bool on) {
    follow_ = on;
    if (on) fitToData();
}

QString MetricPlot::readout(double key) const {
    QStringList rows;
    for (const auto& l : lines_) {
        const auto* s = store_->series(l.name);
        if (!s || s->size() == 0) continue;
        // The point nearest to `key` in the graph's sorted container.
        auto points = l.smooth->data();
        auto it = points->findBegin(key, false);
        if (it == points->constEnd()) continue;
        if (it != points->constBegin()) {
            auto prev = it - 1;
            if (std::abs(prev->key - key) < std::abs(it->key - key)) it = prev;
        }
        const int i = static_cast<int>(it - points->constBegin());
        if (i >= s->size()) continue;
        if (!s->keysSorted(axis_)) {  // container order is not series order: values only
            rows << QStringLiteral("<b>%1</b>: %2 at %3")
                        .arg(l.name.toHtmlEscaped(), QString::number(it->value, 'g', 6),
                             QString::number(it->key, 'g', 8));
            continue;
        }
        QString row = QStringLiteral("<b>%1</b>: %2")
                          .arg(l.name.toHtmlEscaped(), QString::number(s->value[i], 'g', 6));
        if (group_.smoothed)
            row += tr(" (smoothed %1)").arg(QString::number(s->smoothed[i], 'g', 6));
        if (rows.isEmpty())
            rows << tr("step %1 · %2 tokens · %3 s")
                        .arg(s->step[i], 0, 'f', 0)
                        .arg(s->tokens[i], 0, 'f', 0)
                        .arg(s->wallTime[i], 0, 'f', 1);
        rows << row;
    }
    return rows.join(QStringLiteral("<br>"));
}

void MetricPlot::mouseMoveEvent(QMouseEvent* event) {
    // A drag pans the view: from then on the plot no longer follows new points. A click that
    // does not move keeps following.
    if (pressed_ && follow_ && (event->buttons() & Qt::LeftButton) &&
        (event->pos() - pressPos_).manhattanLength() >= QApplication::startDragDistance()) {
        follow_ = false;
        Q_EMIT userNavigated();
    }
    QCustomPlot::mouseMoveEvent(event);
    if (event->buttons() != Qt::NoButton) return;
    if (!axisRect()->rect().contains(event->pos())) {
        cursor_->setVisible(false);
        QToolTip::hideText();
        replot(rpQueuedReplot);
        return;
    }
    const double key = xAxis->pixelToCoord(event->position().x());
    const QString text = readout(key);
    if (text.isEmpty()) return;
    cursor_->point1->setCoords(key, 0);
    cursor_->point2->setCoords(key, 1);
    cursor_->setVisible(true);
    replot(rpQueuedReplot);
    QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

void MetricPlot::leaveEvent(QEvent* event) {
    QCustomPlot::leaveEvent(event);
    cursor_->setVisible(false);
    replot(rpQueuedReplot);
}

void MetricPlot::wheelEvent(QWheelEvent* event) {
    follow_ = false;
    Q_EMIT userNavigated();
    QCustomPlot::wheelEvent(event);
}

void MetricPlot::mousePressEvent(QMouseEvent* event) {
    if (event->button() == Qt::LeftButton) {
        pressed_ = true;
        pressPos_ = event->pos();
    }
    QCustomPlot::mousePressEvent(event);
}

void MetricPlot::mouseReleaseEvent(QMouseEvent* event) {
    if (event->button() == Qt::LeftButton) pressed_ = false;
    QCustomPlot::mouseReleaseEvent(event);
}

void MetricPlot::mouseDoubleClickEvent(QMouseEvent* event) {
    QCustomPlot::mouseDoubleClickEvent(event);
    setFollowLatest(true);  // double click resets the view, as in most plotting tools
    replot(rpQueuedReplot);
}

}  // namespace lathe::ui
