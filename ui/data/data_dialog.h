// DataDialog: the workbench's Data page. Prepare tab: choose text files or folders, pick a
// tokenizer file or train one (SentencePiece, with its vocabulary size), prepare token files with a
// progress bar and Cancel; on success the config editor gets dataset.* and model.vocab_size
// (applyToConfig). A thin view over PrepareJob. Mixture tab: MixtureEditor (dataset.mixture).
#pragma once

#include "ui/data/prepare_job.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTextBrowser;
class QVBoxLayout;

namespace lathe::ui {

class MixtureEditor;

class DataDialog : public QDialog {
    Q_OBJECT

public:
    explicit DataDialog(QWidget* parent = nullptr);

    PrepareJob* job() const { return job_; }
    MixtureEditor* mixtureEditor() const { return mixture_; }
    QTabWidget* tabs() const { return tabs_; }
    /// The request the fields describe.
    PrepareRequest request() const;

    // For tests and for callers that know the paths already.
    void addInputs(const QStringList& paths);
    void setOutputFolder(const QString& path);
    void setTokenizerFile(const QString& path);
    /// > 0: train a tokenizer of this size (of `type`) instead of using a file.
    void setTrainTokenizer(int vocabSize, const QString& type = QStringLiteral("bpe"));
    void setShardSize(const QString& size);

    /// Starts preparing (the Prepare button); false when the fields are incomplete.
    bool prepare();
    QString statusText() const;
    /// Chat data: ticks "Chat conversations" (and "Train on every token").
    void setChat(bool chat, bool trainOnAll = false);
    /// The chat preview's HTML ("" while chat is off or no JSONL file and tokenizer are given).
    QString chatPreviewHtml() const;

Q_SIGNALS:
    /// The preparation finished: set these config fields.
    void applyToConfig(const QVector<std::pair<QString, lathe::config::Json>>& changes);

private:
    QGroupBox* buildInputs();
    QGroupBox* buildTokenizer();
    QGroupBox* buildOutput();
    void buildProgressAndButtons(QVBoxLayout* layout);
    void updateButtons();
    void updateChatPreview();
    void onFinished(bool ok);

    PrepareJob* job_;
    QTabWidget* tabs_;
    MixtureEditor* mixture_;
    QListWidget* inputs_;
    QLineEdit* tokenizer_;
    QCheckBox* train_;
    QCheckBox* chat_;
    QCheckBox* trainOnAll_;
    QLineEdit* chatTemplate_;  ///< "" : the tokenizer folder's template
    QLineEdit* templateArgs_;  ///< NAME=VALUE ..., quoted as a shell would
    QCheckBox* skipUnmaskable_;
    QTextBrowser* chatPreview_;
    QString previewKey_;  ///< what the preview shows: tokenizer, file, train-on-all, template
    QSpinBox* vocab_;
    QComboBox* type_;
    QLineEdit* out_;
    QComboBox* shardSize_;
    QProgressBar* progress_;
    QLabel* status_;
    QPushButton* prepareButton_;
    QPushButton* cancelButton_;
    QPushButton* closeButton_;
};

}  // namespace lathe::ui
