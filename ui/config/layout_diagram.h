// LayoutDiagram: the parallel layout of the config being edited, drawn as its mesh: one box per
// rank, data-parallel ranks down (HSDP's replicas banded), tensor-parallel ranks across, and the
// strategy above. A layout that cannot run shows the engine's own messages
// (config::parallel_layout, which `launch` and the ranks check with) in place of the mesh.
#pragma once

#include "engine/config/layout.h"

#include <QWidget>

namespace lathe::ui {

class LayoutDiagram : public QWidget {
    Q_OBJECT
public:
    explicit LayoutDiagram(QWidget* parent = nullptr);
    void setParallelLayout(const lathe::config::ParallelLayout& layout);
    const lathe::config::ParallelLayout& parallelLayout() const { return layout_; }
    /// What the diagram says in words: "4 ranks: fsdp over 2 x tp 2", or the problems.
    QString text() const;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override { return {160, 40}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    /// The grid is drawn up to this many ranks; beyond it, the words only.
    static constexpr int kMaxDrawn = 64;
    int gridHeight() const;
    lathe::config::ParallelLayout layout_;
};

}  // namespace lathe::ui
