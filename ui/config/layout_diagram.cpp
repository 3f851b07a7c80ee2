#include "ui/config/layout_diagram.h"

#include <QPainter>
#include <QPainterPath>

namespace lathe::ui {

namespace {

constexpr int kCell = 34, kGap = 4, kBand = 8, kMargin = 4;

}  // namespace

LayoutDiagram::LayoutDiagram(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("layoutDiagram"));
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void LayoutDiagram::setParallelLayout(const lathe::config::ParallelLayout& layout) {
    layout_ = layout;
    setToolTip(text());
    updateGeometry();
    update();
}

QString LayoutDiagram::text() const {
    const QString ranks = layout_.world == 1 ? tr("1 rank") : tr("%1 ranks").arg(layout_.world);
    if (!layout_.ok()) {
        QStringList lines;
        for (const auto& p : layout_.problems) lines << QString::fromStdString(p);
        return tr("%1: cannot run: %2").arg(ranks, lines.join(QStringLiteral("; ")));
    }
    return ranks + QStringLiteral(": ") + QString::fromStdString(layout_.describe());
}

int LayoutDiagram::gridHeight() const {
    if (!layout_.ok() || layout_.world > kMaxDrawn) return 0;
    const int rows = int(layout_.dp);
    const int bands =
        layout_.strategy == lathe::config::DataParallelType::hsdp ? int(layout_.replicas) - 1 : 0;
    return rows * (kCell / 2 + kGap) + bands * kBand + kMargin;
}

QSize LayoutDiagram::sizeHint() const {
    const int line = fontMetrics().height();
    const int lines = layout_.ok() ? 1 : 1 + int(layout_.problems.size()) * 2;
    return {qMax(200, int(layout_.tp) * (kCell + kGap) + 2 * kMargin),
            lines * line + gridHeight() + 2 * kMargin};
}

void LayoutDiagram::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const int line = fontMetrics().height();
    QRect textRect = rect().adjusted(kMargin, kMargin, -kMargin, -kMargin);
    if (!layout_.ok()) {
        p.setPen(QColor(0xc0, 0x30, 0x30));
        p.drawText(textRect, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, text());
        return;
    }
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(textRect.adjusted(0, 0, 0, -(textRect.height() - line)),
               Qt::AlignLeft | Qt::AlignVCenter, text());
    if (layout_.world > kMaxDrawn) return;
    // Rank r sits at (row dp_index, column tp_index); HSDP's replicas are separated by a band,
    // and the boxes of one sharding group share a colour.
    const bool hsdp = layout_.strategy == lathe::config::DataParallelType::hsdp;
    const bool sharded = layout_.strategy != lathe::config::DataParallelType::ddp;
    const int top = kMargin + line + kGap;
    const int h = kCell / 2;
    for (int64_t r = 0; r < layout_.world; ++r) {
        const int row = int(layout_.dp_index(r)), col = int(layout_.tp_index(r));
        const int band = hsdp ? int(layout_.replica_index(r)) : 0;
        const QRect box(kMargin + col * (kCell + kGap), top + row * (h + kGap) + band * kBand,
                        kCell, h);
        const int hue = sharded ? (hsdp ? band * 70 : 0) + 200 : 120;
        QColor fill = QColor::fromHsv(hue % 360, 60, 235);
        p.setPen(QColor::fromHsv(hue % 360, 140, 150));
        p.setBrush(fill);
        QPainterPath path;
        path.addRoundedRect(box, 4, 4);
        p.drawPath(path);
        p.setPen(Qt::black);
        p.drawText(box, Qt::AlignCenter, QString::number(r));
    }
}

}  // namespace lathe::ui
