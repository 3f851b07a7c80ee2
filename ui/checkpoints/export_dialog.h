// ExportDialog: File > Export to Hugging Face… The checkpoint selected in the Checkpoints dock (or
// one chosen here), an output folder, the weights' dtype and the shard size; Export runs
// `lathe-engine export CKPT OUT --dtype D --max-shard-size S` through an EngineCommand (the window
// never waits), then says what was written (protocol::ExportResult: files, tensors, size) or the
// engine's error.
#pragma once

#include <QDialog>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace lathe::ui {

class EngineCommand;

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
    bool isRunning() const;
    QString statusText() const;

Q_SIGNALS:
    /// The export ended: ok, and the folder written (or the error).
    void finished(bool ok, const QString& message);

private:
    void updateButtons();
    void onFinished(bool ok);
    QLineEdit* checkpoint_;
    QLineEdit* out_;
    QComboBox* dtype_;
    QComboBox* shardSize_;
    QLabel* status_;
    QPushButton* export_;
    EngineCommand* command_;
};

}  // namespace lathe::ui
