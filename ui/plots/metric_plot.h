// MetricPlot: one QCustomPlot chart for a group of metrics (e.g. the losses), fed incrementally
// from a MetricStore. Each series is a smoothed line over a faint raw one; axis ranges come from the
// store's running min/max, never from scanning the data. Abandoned branches of a resumed run
// (MetricStore::abandonAfter) are drawn as faint dashed raw lines in their metric's colour, with
// one "(abandoned)" legend entry per metric.
#pragma once

#include "ui/plots/metric_store.h"

#include "ui/plots/qcustomplot_include.h"

#include <QRegularExpression>

namespace lathe::ui {

struct MetricGroup {
    QString title;
    QStringList patterns;      ///< wildcard patterns of metric names ("optim/LR*")
    bool smoothed = true;      ///< draw the EMA over the raw line
    bool includeZero = false;  ///< the value axis always shows 0 (memory: usage against nothing)

    bool operator==(const MetricGroup& o) const {
        return title == o.title && patterns == o.patterns && smoothed == o.smoothed &&
               includeZero == o.includeZero;
    }
    /// Whether the metric `name` matches one of the patterns.
    bool accepts(const QString& name) const;
    /// For QSettings: {title, patterns, smoothed, includeZero}.
    QVariantMap toVariant() const;
    static MetricGroup fromVariant(const QVariantMap& map);
};

class MetricPlot : public QCustomPlot {
    Q_OBJECT

public:
    /// The smallest a panel gets: below this, y labels overlap and the legend is cut off.
    static constexpr int kMinimumWidth = 300;
    static constexpr int kMinimumHeight = 200;

    MetricPlot(MetricGroup group, MetricStore* store, QWidget* parent = nullptr);

    const MetricGroup& group() const { return group_; }
    /// Whether the metric `name` belongs to this plot's group.
    bool accepts(const QString& name) const;
    /// Whether the store's series `seriesName` (a metric or one of its abandoned branches) does.
    bool acceptsSeries(const QString& seriesName) const;
    QStringList seriesNames() const;

    void setXAxis(MetricStore::Axis axis);
    void setLogY(bool on);
    void setFollowLatest(bool on);
    bool followLatest() const { return follow_; }
    /// Appends the points the store gained since the last call; rebuilds what changed wholesale.
    /// Does not replot.
    void sync();
    /// Drops every graph's data and re-reads it from the store.
    void rebuild();
    /// Fits the axes to all data (from the running min/max).
    void fitToData();
    /// The linear value-axis range for data in [lo, hi]: 5% padding, at least 5% of the values'
    /// magnitude tall (noise of a fraction of a percent stays a nearly flat line instead of a
    /// full-height saw), and reaching down (or up) to 0 with `includeZero`.
    static QCPRange valueRange(double lo, double hi, bool includeZero);
    /// The text of the hover read-out at a key (x) value.
    QString readout(double key) const;
    /// Value-axis tick labels: ticks of 10,000 and up in k, M, G, T with as many decimals as the
    /// tick step needs ("34.95k", "1.2M"), so a narrow plot never shows a clipped "350" for 35,000;
    /// smaller ticks as QCustomPlot writes them. Empty when `ticks` are all below 10,000.
    static QVector<QString> compactLabels(const QVector<double>& ticks);

Q_SIGNALS:
    /// The user zoomed (wheel) or panned (dragged) this plot; a plain click is neither.
    void userNavigated();

protected:
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;

private:
    struct Line {
        QString name;
        QCPGraph* raw = nullptr;
        QCPGraph* smooth = nullptr;
        int synced = 0;  // points already handed to the graphs
        int smoothRevision = -1;
        bool abandoned = false;  // an abandoned branch: raw values only, faint dashed
    };
    void addLine(const QString& name);
    void syncLine(Line& line);
    void updatePlaceholder();

    MetricGroup group_;
    QVector<QRegularExpression> regexps_;
    MetricStore* store_;
    std::vector<Line> lines_;
    MetricStore::Axis axis_ = MetricStore::Axis::Step;
    bool logY_ = false;
    bool follow_ = true;
    QCPItemText* placeholder_ = nullptr;
    QCPItemStraightLine* cursor_ = nullptr;
    QPoint pressPos_;       ///< where the left button went down
    bool pressed_ = false;  ///< the left button is down on the plot (a drag may follow)
};

}  // namespace lathe::ui
