#include "ui/data/data_dialog.h"

#include "engine/chat/template.h"
#include "ui/data/chat_preview.h"
#include "ui/data/mixture_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWidget>

namespace lathe::ui {

DataDialog::DataDialog(QWidget* parent) : QDialog(parent), job_(new PrepareJob(this)) {
    setObjectName(QStringLiteral("dataDialog"));
    setWindowTitle(tr("Data"));
    // Two tabs: Prepare (text to token files) and Mixture (sources in set proportions).
    auto* outer = new QVBoxLayout(this);
    tabs_ = new QTabWidget(this);
    tabs_->setObjectName(QStringLiteral("dataTabs"));
    outer->addWidget(tabs_);
    auto* preparePage = new QWidget(tabs_);
    auto* layout = new QVBoxLayout(preparePage);
    tabs_->addTab(preparePage, tr("Prepare"));
    mixture_ = new MixtureEditor(tabs_);
    tabs_->addTab(mixture_, tr("Mixture"));
    connect(mixture_, &MixtureEditor::applyToConfig, this, &DataDialog::applyToConfig);

    layout->addWidget(buildInputs());
    layout->addWidget(buildTokenizer());
    layout->addWidget(buildOutput());
    buildProgressAndButtons(layout);

    connect(job_, &PrepareJob::progressChanged, this, [this](double fraction, const QString& msg) {
        if (fraction < 0) {
            progress_->setRange(0, 0);  // busy: training a tokenizer
        } else {
            progress_->setRange(0, 1000);
            progress_->setValue(qRound(fraction * 1000));
        }
        status_->setText(msg);
    });
    connect(job_, &PrepareJob::stateChanged, this, &DataDialog::updateButtons);
    connect(job_, &PrepareJob::finished, this, &DataDialog::onFinished);
    updateButtons();
}

// The text to prepare: files and folders, and whether they are chat conversations.
QGroupBox* DataDialog::buildInputs() {
    auto* inputsBox = new QGroupBox(tr("Text"), this);
    auto* inputsLayout = new QVBoxLayout(inputsBox);
    inputsLayout->addWidget(new QLabel(
        tr("UTF-8 text files (one document each), JSONL files with a \"text\" field (one "
           "document per line), .gz or .zst too, and folders of them."),
        inputsBox));
    inputs_ = new QListWidget(inputsBox);
    inputs_->setObjectName(QStringLiteral("dataInputs"));
    inputsLayout->addWidget(inputs_);
    auto* inputButtons = new QHBoxLayout;
    auto* addFiles = new QPushButton(tr("Add files…"), inputsBox);
    auto* addFolder = new QPushButton(tr("Add folder…"), inputsBox);
    auto* remove = new QPushButton(tr("Remove"), inputsBox);
    inputButtons->addWidget(addFiles);
    inputButtons->addWidget(addFolder);
    inputButtons->addWidget(remove);
    inputButtons->addStretch();
    inputsLayout->addLayout(inputButtons);
    chat_ =
        new QCheckBox(tr("Chat conversations: JSONL lines with \"messages\" (role and content), "
                         "rendered with the model's chat template"),
                      inputsBox);
    chat_->setObjectName(QStringLiteral("dataChat"));
    chat_->setToolTip(
        tr("Label masks are written beside the token files, so the loss is taken on "
           "the assistant's replies only. The template comes from the "
           "tokenizer's folder (tokenizer_config.json or chat_template.jinja)."));
    trainOnAll_ = new QCheckBox(tr("Train on every token, prompts included"), inputsBox);
    trainOnAll_->setObjectName(QStringLiteral("dataTrainOnAll"));
    trainOnAll_->setEnabled(false);
    inputsLayout->addWidget(chat_);
    inputsLayout->addWidget(trainOnAll_);
    // Which template renders the conversations: the tokenizer folder's, or one the user picks,
    // and its variables (prepare-data --chat-template, --template-arg).
    auto* templateBox = new QWidget(inputsBox);
    templateBox->setEnabled(false);
    auto* templateRow = new QHBoxLayout(templateBox);
    templateRow->setContentsMargins(0, 0, 0, 0);
    templateRow->addWidget(new QLabel(tr("Template:"), inputsBox));
    chatTemplate_ = new QLineEdit(inputsBox);
    chatTemplate_->setObjectName(QStringLiteral("dataChatTemplate"));
    chatTemplate_->setPlaceholderText(tr("the tokenizer folder's (chat_template.jinja)"));
    chatTemplate_->setToolTip(
        tr("A .jinja file, a tokenizer_config.json, a model folder or builtin:NAME whose "
           "template renders the conversations; empty: the one beside the tokenizer. It is kept "
           "with the data, the run's checkpoints and the export."));
    templateRow->addWidget(chatTemplate_, 1);
    auto* chooseTemplate = new QPushButton(tr("Choose…"), inputsBox);
    templateRow->addWidget(chooseTemplate);
    // Lathe's own templates, for a model without one (chat::ChatTemplate::builtin).
    auto* builtin = new QToolButton(inputsBox);
    builtin->setObjectName(QStringLiteral("dataChatBuiltin"));
    builtin->setText(tr("Built-in"));
    builtin->setPopupMode(QToolButton::InstantPopup);
    auto* builtinMenu = new QMenu(builtin);
    for (const auto& name : chat::ChatTemplate::builtin_names()) {
        const QString value = QStringLiteral("builtin:") + QString::fromStdString(name);
        builtinMenu->addAction(QString::fromStdString(name), this,
                               [this, value] { chatTemplate_->setText(value); });
    }
    builtin->setMenu(builtinMenu);
    templateRow->addWidget(builtin);
    templateRow->addWidget(new QLabel(tr("Arguments:"), inputsBox));
    templateArgs_ = new QLineEdit(inputsBox);
    templateArgs_->setObjectName(QStringLiteral("dataTemplateArgs"));
    templateArgs_->setPlaceholderText(QStringLiteral("enable_thinking=false"));
    templateArgs_->setToolTip(
        tr("Template variables, NAME=VALUE separated by spaces (VALUE is JSON or text; quote "
           "one with spaces), as apply_chat_template(**kwargs) passes them."));
    templateRow->addWidget(templateArgs_, 1);
    inputsLayout->addWidget(templateBox);
    skipUnmaskable_ = new QCheckBox(
        tr("Leave out conversations whose turns the template does not let be told apart"),
        inputsBox);
    skipUnmaskable_->setObjectName(QStringLiteral("dataSkipUnmaskable"));
    skipUnmaskable_->setToolTip(
        tr("A template that rewrites an earlier reply (drops its reasoning, say) can leave the "
           "reply nowhere to be found. Checked: such lines are left out and counted; unchecked: "
           "the preparation stops at the first, naming it."));
    skipUnmaskable_->setEnabled(false);
    inputsLayout->addWidget(skipUnmaskable_);
    connect(skipUnmaskable_, &QCheckBox::toggled, this, &DataDialog::updateButtons);
    connect(chooseTemplate, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(
            this, tr("Chat template"), {}, tr("Chat templates (*.jinja *.json);;All files (*)"));
        if (!f.isEmpty()) chatTemplate_->setText(f);
    });
    connect(chatTemplate_, &QLineEdit::textChanged, this, &DataDialog::updateButtons);
    connect(templateArgs_, &QLineEdit::textChanged, this, &DataDialog::updateButtons);
    // What the loss will see: the first conversation, trained tokens highlighted.
    chatPreview_ = new QTextBrowser(inputsBox);
    chatPreview_->setObjectName(QStringLiteral("dataChatPreview"));
    chatPreview_->setVisible(false);
    chatPreview_->setMinimumHeight(120);
    inputsLayout->addWidget(chatPreview_);
    connect(chat_, &QCheckBox::toggled, this, [this, templateBox](bool on) {
        trainOnAll_->setEnabled(on);
        templateBox->setEnabled(on);
        skipUnmaskable_->setEnabled(on);
        updateButtons();
    });
    connect(trainOnAll_, &QCheckBox::toggled, this, &DataDialog::updateButtons);
    connect(addFiles, &QPushButton::clicked, this,
            [this] { addInputs(QFileDialog::getOpenFileNames(this, tr("Text or JSONL files"))); });
    connect(addFolder, &QPushButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("A folder of text"));
        if (!d.isEmpty()) addInputs({d});
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        delete inputs_->currentItem();
        updateButtons();
    });
    return inputsBox;
}

// The tokenizer: an existing file, or a new SentencePiece model trained on the text.
QGroupBox* DataDialog::buildTokenizer() {
    auto* tokBox = new QGroupBox(tr("Tokenizer"), this);
    auto* tokForm = new QFormLayout(tokBox);
    auto* fileRow = new QHBoxLayout;
    tokenizer_ = new QLineEdit(tokBox);
    tokenizer_->setObjectName(QStringLiteral("dataTokenizer"));
    tokenizer_->setPlaceholderText(tr("tokenizer.json (Hugging Face) or a SentencePiece .model"));
    auto* browseTok = new QPushButton(tr("Browse…"), tokBox);
    fileRow->addWidget(tokenizer_, 1);
    fileRow->addWidget(browseTok);
    tokForm->addRow(tr("File:"), fileRow);
    train_ = new QCheckBox(tr("Train a new SentencePiece tokenizer on this text"), tokBox);
    train_->setObjectName(QStringLiteral("dataTrain"));
    tokForm->addRow(train_);
    auto* trainRow = new QHBoxLayout;
    vocab_ = new QSpinBox(tokBox);
    vocab_->setObjectName(QStringLiteral("dataVocabSize"));
    vocab_->setRange(300, 1000000);
    vocab_->setValue(32000);
    vocab_->setSingleStep(1000);
    type_ = new QComboBox(tokBox);
    type_->setObjectName(QStringLiteral("dataTokenizerType"));
    type_->addItems({QStringLiteral("bpe"), QStringLiteral("unigram")});
    trainRow->addWidget(new QLabel(tr("Vocabulary:"), tokBox));
    trainRow->addWidget(vocab_);
    trainRow->addWidget(new QLabel(tr("Type:"), tokBox));
    trainRow->addWidget(type_);
    trainRow->addStretch();
    tokForm->addRow(trainRow);
    connect(browseTok, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(
            this, tr("Tokenizer file"), {}, tr("Tokenizers (*.json *.model);;All files (*)"));
        if (!f.isEmpty()) setTokenizerFile(f);
    });
    connect(train_, &QCheckBox::toggled, this, &DataDialog::updateButtons);
    connect(tokenizer_, &QLineEdit::textChanged, this, &DataDialog::updateButtons);
    return tokBox;
}

// Where the token files go, and their shard size.
QGroupBox* DataDialog::buildOutput() {
    auto* outBox = new QGroupBox(tr("Token files"), this);
    auto* outForm = new QFormLayout(outBox);
    auto* outRow = new QHBoxLayout;
    out_ = new QLineEdit(outBox);
    out_->setObjectName(QStringLiteral("dataOut"));
    out_->setPlaceholderText(tr("A new or empty folder"));
    auto* browseOut = new QPushButton(tr("Browse…"), outBox);
    outRow->addWidget(out_, 1);
    outRow->addWidget(browseOut);
    outForm->addRow(tr("Folder:"), outRow);
    shardSize_ = new QComboBox(outBox);
    shardSize_->setObjectName(QStringLiteral("dataShardSize"));
    shardSize_->setEditable(true);
    shardSize_->addItems({QStringLiteral("1GB"), QStringLiteral("256MB"), QStringLiteral("64MB"),
                          QStringLiteral("4GB")});
    outForm->addRow(tr("Shard size:"), shardSize_);
    connect(browseOut, &QPushButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("Folder for the token files"));
        if (!d.isEmpty()) setOutputFolder(d);
    });
    connect(out_, &QLineEdit::textChanged, this, &DataDialog::updateButtons);
    return outBox;
}

// The progress bar, the status line and Prepare / Cancel / Close.
void DataDialog::buildProgressAndButtons(QVBoxLayout* layout) {
    progress_ = new QProgressBar(this);
    progress_->setObjectName(QStringLiteral("dataProgress"));
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    layout->addWidget(progress_);
    status_ = new QLabel(this);
    status_->setObjectName(QStringLiteral("dataStatus"));
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(status_);

    auto* buttons = new QDialogButtonBox(this);
    prepareButton_ = buttons->addButton(tr("&Prepare"), QDialogButtonBox::ActionRole);
    prepareButton_->setObjectName(QStringLiteral("dataPrepare"));
    cancelButton_ = buttons->addButton(tr("&Cancel"), QDialogButtonBox::ActionRole);
    cancelButton_->setObjectName(QStringLiteral("dataCancel"));
    closeButton_ = buttons->addButton(QDialogButtonBox::Close);
    layout->addWidget(buttons);
    connect(prepareButton_, &QPushButton::clicked, this, &DataDialog::prepare);
    connect(cancelButton_, &QPushButton::clicked, job_, &PrepareJob::cancel);
    connect(closeButton_, &QPushButton::clicked, this, &QDialog::reject);
}

PrepareRequest DataDialog::request() const {
    PrepareRequest r;
    for (int i = 0; i < inputs_->count(); ++i) r.inputs << inputs_->item(i)->text();
    r.outDir = out_->text().trimmed();
    r.tokenizer = tokenizer_->text().trimmed();
    r.trainVocabSize = train_->isChecked() ? vocab_->value() : 0;
    r.trainType = type_->currentText();
    r.shardSize = shardSize_->currentText().trimmed();
    r.chat = chat_->isChecked();
    r.trainOnAll = r.chat && trainOnAll_->isChecked();
    if (r.chat) {
        r.chatTemplate = chatTemplate_->text().trimmed();
        r.templateArgs = QProcess::splitCommand(templateArgs_->text());
        r.skipUnmaskable = skipUnmaskable_->isChecked();
    }
    return r;
}

void DataDialog::addInputs(const QStringList& paths) {
    for (const auto& p : paths) {
        if (p.isEmpty() || !inputs_->findItems(p, Qt::MatchExactly).isEmpty()) continue;
        inputs_->addItem(p);
    }
    updateButtons();
}

void DataDialog::setOutputFolder(const QString& path) {
    out_->setText(path);
}

void DataDialog::setTokenizerFile(const QString& path) {
    train_->setChecked(false);
    tokenizer_->setText(path);
}

void DataDialog::setTrainTokenizer(int vocabSize, const QString& type) {
    train_->setChecked(vocabSize > 0);
    if (vocabSize > 0) vocab_->setValue(vocabSize);
    type_->setCurrentText(type);
}

void DataDialog::setShardSize(const QString& size) {
    shardSize_->setCurrentText(size);
}

bool DataDialog::prepare() {
    const bool ok = job_->start(request());
    if (!ok) status_->setText(job_->message());
    updateButtons();
    return ok;
}

QString DataDialog::statusText() const {
    return status_->text();
}

void DataDialog::setChat(bool chat, bool trainOnAll) {
    chat_->setChecked(chat);
    trainOnAll_->setChecked(trainOnAll);
    updateButtons();
}

QString DataDialog::chatPreviewHtml() const {
    return previewKey_.isEmpty() ? QString() : chatPreview_->toHtml();
}

void DataDialog::updateChatPreview() {
    // The first JSONL file among the inputs, with the tokenizer's template; recomputed only when
    // one of them changes (loading a large tokenizer takes a moment).
    QString jsonl;
    for (int i = 0; i < inputs_->count() && jsonl.isEmpty(); ++i) {
        const QString in = inputs_->item(i)->text();
        if (QFileInfo(in).isFile() && in.contains(QStringLiteral(".json"))) jsonl = in;
    }
    const QString tok = tokenizer_->text().trimmed();
    const bool show = chat_->isChecked() && !jsonl.isEmpty() && QFileInfo(tok).isFile();
    chatPreview_->setVisible(show);
    const QString key = show ? tok + QLatin1Char('\n') + jsonl + QLatin1Char('\n') +
                                   (trainOnAll_->isChecked() ? QStringLiteral("all") : QString()) +
                                   QLatin1Char('\n') + chatTemplate_->text() + QLatin1Char('\n') +
                                   templateArgs_->text()
                             : QString();
    if (key == previewKey_) return;
    previewKey_ = key;
    chatPreview_->setHtml(show ? ChatPreview::of(tok, jsonl, trainOnAll_->isChecked(),
                                                 chatTemplate_->text().trimmed(),
                                                 QProcess::splitCommand(templateArgs_->text()))
                                     .html()
                               : QString());
}

void DataDialog::updateButtons() {
    updateChatPreview();
    const bool running = job_->isRunning();
    tokenizer_->setEnabled(!running && !train_->isChecked());
    vocab_->setEnabled(!running && train_->isChecked());
    type_->setEnabled(!running && train_->isChecked());
    prepareButton_->setEnabled(!running && request().problem().isEmpty());
    prepareButton_->setToolTip(request().problem());
    cancelButton_->setEnabled(running);
    closeButton_->setEnabled(!running);
}

void DataDialog::onFinished(bool ok) {
    updateButtons();
    if (!ok) {
        // A failed or cancelled job has not made the data: the bar must not say 100% (issue 34).
        progress_->setRange(0, 1000);
        progress_->setValue(0);
        return;
    }
    Q_EMIT applyToConfig(job_->result().configChanges());
    status_->setText(job_->message() + QLatin1Char('\n') +
                     tr("The config now trains on it (dataset.* and model.vocab_size = %1).")
                         .arg(job_->result().paddedVocabSize));
}

}  // namespace lathe::ui
