#include "ui/plots/metric_store.h"

#include <QBuffer>
#include <QIODevice>
#include <QTextStream>

#include <algorithm>
#include <cmath>
#include <map>

namespace lathe::ui {

const QVector<double>& MetricStore::Series::keys(Axis axis) const {
    switch (axis) {
        case Axis::Tokens:
            return tokens;
        case Axis::WallTime:
            return wallTime;
        case Axis::Step:
            break;
    }
    return step;
}

bool MetricStore::Series::keysSorted(Axis axis) const {
    switch (axis) {
        case Axis::Tokens:
            return tokensSorted;
        case Axis::WallTime:
            return wallTimeSorted;
        case Axis::Step:
            break;
    }
    return true;
}

MetricStore::MetricStore(QObject* parent) : QObject(parent) {}

const MetricStore::Series* MetricStore::series(const QString& name) const {
    auto it = series_.constFind(name);
    return it == series_.constEnd() ? nullptr : it->get();
}

void MetricStore::append(const lathe::protocol::Metrics& m) {
    bool any = false;
    for (const auto& [name, value] : m.values) {
        appendPoint(QString::fromStdString(name), static_cast<double>(m.step),
                    static_cast<double>(m.tokens), m.wall_time, value, any);
    }
    if (any) Q_EMIT appended();
}

bool MetricStore::append(const QString& name, double step, double tokens, double wallTime,
                         double value) {
    bool added = false;
    bool ok = appendPoint(name, step, tokens, wallTime, value, added);
    if (added) Q_EMIT appended();
    return ok;
}

MetricStore::Series& MetricStore::seriesFor(const QString& name, const QString& metric,
                                            int branch) {
    auto it = series_.find(name);
    if (it == series_.end()) {
        auto s = std::make_shared<Series>();
        s->name = name;
        s->metric = metric;
        s->branch = branch;
        it = series_.insert(name, s);
        names_.append(name);
        Q_EMIT seriesAdded(name);
    }
    return **it;
}

QStringList MetricStore::metricNames() const {
    QStringList out;
    for (const QString& n : names_)
        if (series_.value(n)->branch == 0) out << n;
    return out;
}

QString MetricStore::abandonedName(const QString& metric, int branch) {
    return QStringLiteral("%1 (abandoned #%2)").arg(metric).arg(branch);
}

int MetricStore::abandonAfter(double step) {
    int moved = 0;
    bool newBranch = false;
    const QStringList mains = metricNames();
    for (const QString& name : mains) {
        Series& s = *series_.value(name);
        const auto first = std::upper_bound(s.step.begin(), s.step.end(), step);
        const int cut = static_cast<int>(first - s.step.begin());
        if (cut >= s.size()) continue;
        if (!newBranch) {
            newBranch = true;
            ++branches_;
        }
        const QString target = abandonedName(name, branches_);
        seriesFor(target, name, branches_);
        for (int i = cut; i < s.size(); ++i) {
            bool added = false;
            appendPoint(target, s.step[i], s.tokens[i], s.wallTime[i], s.value[i], added);
            ++moved;
        }
        // `s` is still valid: series are held by shared_ptr and none was removed.
        s.step.resize(cut);
        s.tokens.resize(cut);
        s.wallTime.resize(cut);
        s.value.resize(cut);
        recomputeRanges(s);
        resmooth(s, weight_);
    }
    if (moved > 0) Q_EMIT restructured();
    return moved;
}

void MetricStore::recomputeRanges(Series& s) {
    s.min = std::numeric_limits<double>::infinity();
    s.max = -std::numeric_limits<double>::infinity();
    s.minPositive = std::numeric_limits<double>::infinity();
    s.tokensSorted = std::is_sorted(s.tokens.begin(), s.tokens.end());
    s.wallTimeSorted = std::is_sorted(s.wallTime.begin(), s.wallTime.end());
    for (double v : s.value) {
        if (!std::isfinite(v)) continue;
        s.min = std::min(s.min, v);
        s.max = std::max(s.max, v);
        if (v > 0) s.minPositive = std::min(s.minPositive, v);
    }
}

bool MetricStore::appendPoint(const QString& name, double step, double tokens, double wallTime,
                              double value, bool& added) {
    Series& s = seriesFor(name, name, 0);
    if (!s.step.isEmpty() && !(step > s.step.back())) {
        ++rejected_;
        return false;
    }
    if (!s.tokens.isEmpty()) {
        s.tokensSorted = s.tokensSorted && tokens >= s.tokens.back();
        s.wallTimeSorted = s.wallTimeSorted && wallTime >= s.wallTime.back();
    }
    s.step.append(step);
    s.tokens.append(tokens);
    s.wallTime.append(wallTime);
    s.value.append(value);
    const bool finite = std::isfinite(value);
    if (finite) {
        s.min = std::min(s.min, value);
        s.max = std::max(s.max, value);
        if (value > 0) s.minPositive = std::min(s.minPositive, value);
    }
    // Incremental form of smooth(): same arithmetic, one point.
    const bool wasConstant = s.constant_;
    s.constant_ = s.constant_ && value == s.value.front();
    if (finite) {
        s.emaLast_ = s.emaLast_ * weight_ + (1 - weight_) * value;
        ++s.emaCount_;
    }
    if (wasConstant && !s.constant_) {
        resmooth(s, weight_);  // the whole series stops being passed through
    } else if (s.constant_ || !finite) {
        s.smoothed.append(value);
    } else {
        const double debias = weight_ != 1 ? 1 - std::pow(weight_, s.emaCount_) : 1;
        s.smoothed.append(s.emaLast_ / debias);
    }
    added = true;
    return true;
}

void MetricStore::clear() {
    names_.clear();
    series_.clear();
    rejected_ = 0;
    branches_ = 0;
    Q_EMIT cleared();
}

void MetricStore::setSmoothingWeight(double weight) {
    weight = std::clamp(weight, 0.0, 0.999);
    if (weight == weight_) return;
    weight_ = weight;
    for (auto& s : series_) resmooth(*s, weight_);
    Q_EMIT smoothingChanged();
}

void MetricStore::resmooth(Series& s, double weight) {
    s.smoothed = smooth(s.value, weight);
    s.emaLast_ = 0;
    s.emaCount_ = 0;
    for (double x : s.value) {
        if (!std::isfinite(x)) continue;
        s.emaLast_ = s.emaLast_ * weight + (1 - weight) * x;
        ++s.emaCount_;
    }
    s.constant_ =
        std::all_of(s.value.begin(), s.value.end(), [&](double x) { return x == s.value.front(); });
    ++s.smoothRevision;
}

QVector<double> MetricStore::smooth(const QVector<double>& values, double weight) {
    QVector<double> out;
    out.reserve(values.size());
    const bool constant =
        std::all_of(values.begin(), values.end(), [&](double x) { return x == values.front(); });
    double last = 0;
    int n = 0;
    for (double x : values) {
        if (constant || !std::isfinite(x)) {
            out.append(x);
            continue;
        }
        last = last * weight + (1 - weight) * x;
        ++n;
        const double debias = weight != 1 ? 1 - std::pow(weight, n) : 1;
        out.append(last / debias);
    }
    return out;
}

namespace {

QString csvField(const QString& s) {
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
        !s.contains(QLatin1Char('\n')))
        return s;
    QString q = s;
    q.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + q + QLatin1Char('"');
}

QString number(double x) {
    if (std::isnan(x)) return QStringLiteral("nan");
    if (std::isinf(x)) return x > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    return QString::number(x, 'g', 17);
}

}  // namespace

bool MetricStore::writeCsv(QIODevice* out, const QStringList& namesIn) const {
    const QStringList names = namesIn.isEmpty() ? metricNames() : namesIn;
    struct Row {
        double tokens = 0, wall = 0;
        std::vector<int> index;  // per column: point index in its series, or -1
    };
    std::map<double, Row> rows;
    std::vector<const Series*> cols;
    for (const QString& n : names) cols.push_back(series(n));
    for (std::size_t c = 0; c < cols.size(); ++c) {
        if (!cols[c]) continue;
        const Series& s = *cols[c];
        for (int i = 0; i < s.size(); ++i) {
            Row& r = rows[s.step[i]];
            if (r.index.empty()) {
                r.index.assign(cols.size(), -1);
                r.tokens = s.tokens[i];
                r.wall = s.wallTime[i];
            }
            r.index[c] = i;
        }
    }
    QTextStream ts(out);
    ts << "step,tokens,wall_time";
    for (const QString& n : names) ts << ',' << csvField(n);
    ts << '\n';
    for (const auto& [step, r] : rows) {
        ts << number(step) << ',' << number(r.tokens) << ',' << number(r.wall);
        for (std::size_t c = 0; c < cols.size(); ++c) {
            ts << ',';
            if (r.index[c] >= 0) ts << number(cols[c]->value[r.index[c]]);
        }
        ts << '\n';
    }
    ts.flush();
    return ts.status() == QTextStream::Ok;
}

QString MetricStore::toCsv(const QStringList& names) const {
    QByteArray data;
    {
        QBuffer buffer(&data);
        buffer.open(QIODevice::WriteOnly);
        writeCsv(&buffer, names);
    }
    return QString::fromUtf8(data);
}

}  // namespace lathe::ui
