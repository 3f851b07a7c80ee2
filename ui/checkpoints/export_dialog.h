// ExportDialog: File > Export to Hugging Face… The checkpoint selected in the Checkpoints dock (or
// one chosen here), an output folder, the weights' dtype and the shard size; Export runs
// `lathe-engine export CKPT OUT --dtype D --max-shard-size S` as a child process (the window never
// waits), then says what was written (files, tensors, size) or the engine's error.
#pragma once

#include <QDialog>
#include <QPointer>
#include <QProcess>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace lathe::ui {

class ExportDialog : public QDialog {
    Q_OBJECT

public:
    explicit ExportDialog(QWidget* parent = nullptr);

    void setCheckpoint(const QString& path);
    void setOutputFolder(const QString& path);
    /// "float32" or "bfloat16".
    void setDType(const QString& dtype);
    /// The arguments Export passes to the engine.
    QStringList arguments() const;
    /// Starts the export; false (see statusText()) when a field is missing or one is running.
    bool startExport();
    bool isRunning() const { return process_ && process_->state() != QProcess::NotRunning; }
    QString statusText() const;

Q_SIGNALS:
    /// The export ended: ok, and the folder written (or the error).
    void finished(bool ok, const QString& message);

private:
    void updateButtons();
    QLineEdit* checkpoint_;
    QLineEdit* out_;
    QComboBox* dtype_;
    QComboBox* shardSize_;
    QLabel* status_;
    QPushButton* export_;
    QPointer<QProcess> process_;
};

}  // namespace lathe::ui
