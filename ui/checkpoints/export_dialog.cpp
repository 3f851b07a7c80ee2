#include "ui/checkpoints/export_dialog.h"

#include "engine/config/memory_estimate.h"
#include "ui/util/engine_command.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace lathe::ui {

ExportDialog::ExportDialog(QWidget* parent) : QDialog(parent), command_(new EngineCommand(this)) {
    connect(command_, &EngineCommand::finished, this, &ExportDialog::onFinished);
    setObjectName(QStringLiteral("exportDialog"));
    setWindowTitle(tr("Export to Hugging Face"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("Writes a Hugging Face model folder (config.json, model.safetensors, the tokenizer) of "
           "the checkpoint's family, for transformers' from_pretrained."),
        this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    auto pathRow = [this, form](QLineEdit*& edit, const QString& label, const QString& name,
                                bool folder) {
        auto* row = new QHBoxLayout;
        edit = new QLineEdit(this);
        edit->setObjectName(name);
        auto* browse = new QPushButton(tr("Browse…"), this);
        row->addWidget(edit, 1);
        row->addWidget(browse);
        form->addRow(label, row);
        connect(edit, &QLineEdit::textChanged, this, &ExportDialog::updateButtons);
        connect(browse, &QPushButton::clicked, this, [this, edit, folder] {
            const QString dir = QFileDialog::getExistingDirectory(
                this, folder ? tr("Output folder") : tr("Checkpoint folder (stepN)"), edit->text());
            if (!dir.isEmpty()) edit->setText(dir);
        });
    };
    pathRow(checkpoint_, tr("Checkpoint:"), QStringLiteral("exportCheckpoint"), false);
    pathRow(out_, tr("Output folder:"), QStringLiteral("exportOut"), true);
    out_->setPlaceholderText(tr("A new or empty folder"));
    dtype_ = new QComboBox(this);
    dtype_->setObjectName(QStringLiteral("exportDType"));
    dtype_->addItems({QStringLiteral("float32"), QStringLiteral("bfloat16")});
    dtype_->setToolTip(tr("The weights' dtype in the folder (bfloat16: half the size)"));
    form->addRow(tr("Weights:"), dtype_);
    shardSize_ = new QComboBox(this);
    shardSize_->setEditable(true);
    shardSize_->addItems({QStringLiteral("5GB"), QStringLiteral("2GB"), QStringLiteral("10GB")});
    shardSize_->setToolTip(tr("Larger weights are split into model-0000N-of-0000M.safetensors"));
    form->addRow(tr("Shard size:"), shardSize_);
    layout->addLayout(form);
    status_ = new QLabel(this);
    status_->setObjectName(QStringLiteral("exportStatus"));
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(status_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    export_ = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
    export_->setObjectName(QStringLiteral("exportButton"));
    connect(export_, &QPushButton::clicked, this, &ExportDialog::startExport);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
    layout->addWidget(buttons);
    resize(560, sizeHint().height());
    updateButtons();
}

void ExportDialog::setCheckpoint(const QString& path) {
    checkpoint_->setText(path);
    if (out_->text().isEmpty() && !path.isEmpty()) {
        // ~/lathe-exports/<run>-<step>-hf: a suggestion, editable. Not beside the run, where the
        // runs list would have to tell a model folder from a run.
        const QFileInfo ckpt(path);
        const QFileInfo run(ckpt.path());
        out_->setText(QDir(QDir::homePath() + QStringLiteral("/lathe-exports"))
                          .filePath(run.fileName() + "-" + ckpt.fileName() + "-hf"));
    }
}

void ExportDialog::setOutputFolder(const QString& path) {
    out_->setText(path);
}

void ExportDialog::setDType(const QString& dtype) {
    dtype_->setCurrentText(dtype);
}

QStringList ExportDialog::arguments() const {
    return {QStringLiteral("export"),
            checkpoint_->text().trimmed(),
            out_->text().trimmed(),
            QStringLiteral("--dtype"),
            dtype_->currentText(),
            QStringLiteral("--max-shard-size"),
            shardSize_->currentText().trimmed()};
}

QString ExportDialog::statusText() const {
    return status_->text();
}

void ExportDialog::updateButtons() {
    export_->setEnabled(!isRunning() && !checkpoint_->text().trimmed().isEmpty() &&
                        !out_->text().trimmed().isEmpty());
}

bool ExportDialog::startExport() {
    if (isRunning()) return false;
    if (checkpoint_->text().trimmed().isEmpty() || out_->text().trimmed().isEmpty()) {
        status_->setText(tr("Choose a checkpoint and an output folder first."));
        return false;
    }
    status_->setText(tr("Exporting…"));
    command_->start(arguments());
    updateButtons();
    return true;
}

bool ExportDialog::isRunning() const {
    return command_->isRunning();
}

void ExportDialog::onFinished(bool ok) {
    QString message;
    if (ok) {
        QString error;
        const auto r = readOutput<protocol::ExportResult>(command_->output(), "export", &error);
        if (r) {
            message = tr("Exported to %1: %2 file(s), %3 tensors, %4 of %5 weights.")
                          .arg(QString::fromStdString(r->exported))
                          .arg(r->files.size())
                          .arg(r->tensors)
                          .arg(QString::fromStdString(
                              lathe::config::human_bytes(double(r->weight_bytes))))
                          .arg(QString::fromStdString(r->dtype));
        } else {
            ok = false;
            message = tr("Export failed: the engine's answer does not fit: %1").arg(error);
        }
    } else {
        message = tr("Export failed: %1").arg(command_->error());
    }
    status_->setText(message);
    updateButtons();
    Q_EMIT finished(ok, message);
}

}  // namespace lathe::ui
