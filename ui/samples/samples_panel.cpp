#include "ui/samples/samples_panel.h"

#include "ui/util/engine_command.h"
#include "ui/util/engine_launch.h"

#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTemporaryFile>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace lathe::ui {

SamplesPanel::SamplesPanel(SamplesModel* model, QWidget* parent)
    : QWidget(parent), model_(model), command_(new EngineCommand(this)), engine_(findEngine()) {
    connect(command_, &EngineCommand::finished, this, &SamplesPanel::onGenerated);
    setObjectName(QStringLiteral("samplesPanel"));
    // Side by side: the run's samples by step, then Try it (its controls, then its output). The
    // dock is a tab at the bottom of a laptop's screen, wide and short: stacked, the output box
    // was one or two lines tall (issue 45 item 12).
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->setObjectName(QStringLiteral("samplesSplitter"));
    splitter->setChildrenCollapsible(false);
    layout->addWidget(splitter);

    auto* samples = new QWidget(splitter);
    auto* samplesLayout = new QVBoxLayout(samples);
    samplesLayout->setContentsMargins(0, 0, 0, 0);
    auto* top = new QHBoxLayout;
    stepLabel_ = new QLabel(samples);
    stepLabel_->setObjectName(QStringLiteral("samplesStepLabel"));
    slider_ = new QSlider(Qt::Horizontal, samples);
    slider_->setObjectName(QStringLiteral("samplesSlider"));
    slider_->setToolTip(tr("The step whose samples are shown"));
    top->addWidget(stepLabel_);
    top->addWidget(slider_, 1);
    samplesLayout->addLayout(top);
    view_ = new QTextBrowser(samples);
    view_->setObjectName(QStringLiteral("samplesView"));
    view_->setPlaceholderText(
        tr("No samples yet. Enable trainer.callbacks.sampler in the config to see the model's "
           "text every few steps."));
    view_->setMinimumSize(180, view_->fontMetrics().lineSpacing() * 3);
    samplesLayout->addWidget(view_, 1);

    QGroupBox* box = buildTryIt(splitter);
    splitter->addWidget(samples);
    splitter->addWidget(box);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 3);

    connect(slider_, &QSlider::valueChanged, this, &SamplesPanel::showIndex);
    connect(model_, &SamplesModel::reset, this, &SamplesPanel::rebuild);
    connect(model_, &SamplesModel::stepAdded, this, &SamplesPanel::onStepAdded);
    connect(generate_, &QPushButton::clicked, this, [this] { generate(); });
    connect(prompt_, &QLineEdit::returnPressed, this, [this] { generate(); });
    connect(stop_, &QPushButton::clicked, this, &SamplesPanel::stopGenerating);
    connect(chat_, &QCheckBox::toggled, this,
            [this](bool on) { setChatMode(on, system_->text()); });
    connect(newChat_, &QPushButton::clicked, this, &SamplesPanel::newChat);
    rebuild();
    updateTryIt();
}

QGroupBox* SamplesPanel::buildTryIt(QWidget* parent) {
    auto* box = new QGroupBox(tr("Try it"), parent);
    auto* boxLayout = new QHBoxLayout(box);
    boxLayout->setContentsMargins(6, 2, 6, 4);
    auto* controls = new QVBoxLayout;
    controls->setSpacing(4);
    boxLayout->addLayout(controls, 0);
    prompt_ = new QLineEdit(box);
    prompt_->setObjectName(QStringLiteral("tryItPrompt"));
    prompt_->setMinimumWidth(200);
    maxTokens_ = new QSpinBox(box);
    maxTokens_->setObjectName(QStringLiteral("tryItMaxTokens"));
    maxTokens_->setRange(1, 4096);
    maxTokens_->setValue(32);  // within the tiny preset's 64 positions with a short prompt
    maxTokens_->setToolTip(tr("How many tokens to generate after the prompt"));
    temperature_ = new QDoubleSpinBox(box);
    temperature_->setObjectName(QStringLiteral("tryItTemperature"));
    temperature_->setRange(0, 5);
    temperature_->setSingleStep(0.1);
    temperature_->setValue(0.8);
    temperature_->setSpecialValueText(tr("greedy"));
    temperature_->setToolTip(tr("Temperature (0: greedy, always the likeliest token)"));
    topK_ = new QSpinBox(box);
    topK_->setObjectName(QStringLiteral("tryItTopK"));
    topK_->setRange(0, 1000000);
    topK_->setSpecialValueText(tr("off"));
    topK_->setToolTip(tr("Sample from the K likeliest tokens only (0: all)"));
    topP_ = new QDoubleSpinBox(box);
    topP_->setObjectName(QStringLiteral("tryItTopP"));
    topP_->setRange(0.01, 1.0);
    topP_->setSingleStep(0.05);
    topP_->setDecimals(2);
    topP_->setValue(1.0);
    topP_->setToolTip(
        tr("Nucleus sampling: the likeliest tokens whose probabilities add up to "
           "P (1: all)"));
    chat_ = new QCheckBox(tr("Chat"), box);
    chat_->setObjectName(QStringLiteral("tryItChat"));
    chat_->setToolTip(
        tr("Talk in turns, with the model's chat template (a fine-tuned model with a tokenizer "
           "whose folder has one)"));
    system_ = new QLineEdit(box);
    system_->setObjectName(QStringLiteral("tryItSystem"));
    system_->setPlaceholderText(tr("System prompt (optional)"));
    system_->hide();
    newChat_ = new QPushButton(tr("New chat"), box);
    newChat_->setObjectName(QStringLiteral("tryItNewChat"));
    newChat_->hide();
    generate_ = new QPushButton(tr("Generate"), box);
    generate_->setObjectName(QStringLiteral("tryItGenerate"));
    stop_ = new QPushButton(tr("Stop"), box);
    stop_->setObjectName(QStringLiteral("tryItStop"));
    // The system prompt shares the prompt's row (chat only), so chat mode adds no height.
    auto* promptRow = new QHBoxLayout;
    promptRow->addWidget(system_, 1);
    promptRow->addWidget(prompt_, 2);
    controls->addLayout(promptRow);
    // Every number is labelled (the bare boxes said nothing of what they set).
    auto* sampling = new QGridLayout;
    sampling->setHorizontalSpacing(6);
    sampling->setVerticalSpacing(2);
    auto label = [&](const QString& text, QWidget* buddy, int row, int col) {
        auto* l = new QLabel(text, box);
        l->setBuddy(buddy);
        l->setToolTip(buddy->toolTip());
        sampling->addWidget(l, row, col, Qt::AlignRight);
        sampling->addWidget(buddy, row, col + 1);
    };
    label(tr("&New tokens:"), maxTokens_, 0, 0);
    label(tr("T&emperature:"), temperature_, 0, 2);
    label(tr("Top-&k:"), topK_, 1, 0);
    label(tr("Top-&p:"), topP_, 1, 2);
    controls->addLayout(sampling);
    auto* row = new QHBoxLayout;
    row->addWidget(chat_);
    row->addWidget(newChat_);
    row->addStretch(1);
    row->addWidget(generate_);
    row->addWidget(stop_);
    controls->addLayout(row);
    // Which checkpoint it generates from; the path can be long: clipped here, whole in the
    // tooltip.
    sourceLabel_ = new QLabel(box);
    sourceLabel_->setObjectName(QStringLiteral("tryItSource"));
    sourceLabel_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    sourceLabel_->setEnabled(false);
    controls->addWidget(sourceLabel_);
    controls->addStretch(1);
    output_ = new QPlainTextEdit(box);
    output_->setObjectName(QStringLiteral("tryItOutput"));
    output_->setReadOnly(true);
    output_->setPlaceholderText(tr("The model's text appears here."));
    output_->setMinimumSize(200, output_->fontMetrics().lineSpacing() * 3);
    boxLayout->addWidget(output_, 1);
    return box;
}

SamplesPanel::~SamplesPanel() {
    command_->disconnect(this);
    command_->kill();  // a generation has nothing to keep; the command waits for its end
}

void SamplesPanel::rebuild() {
    const int n = static_cast<int>(model_->steps().size());
    slider_->blockSignals(true);
    slider_->setRange(0, std::max(0, n - 1));
    slider_->setValue(std::max(0, n - 1));
    slider_->setEnabled(n > 1);
    slider_->blockSignals(false);
    showIndex(n - 1);
}

void SamplesPanel::onStepAdded() {
    // Follow the newest step when the newest was shown; otherwise stay where the user is.
    const bool atEnd = slider_->value() == slider_->maximum();
    const int n = static_cast<int>(model_->steps().size());
    slider_->blockSignals(true);
    slider_->setRange(0, n - 1);
    slider_->setEnabled(n > 1);
    if (atEnd) slider_->setValue(n - 1);
    slider_->blockSignals(false);
    showIndex(slider_->value());
}

qint64 SamplesPanel::shownStep() const {
    const int i = slider_->value();
    if (i < 0 || i >= model_->steps().size()) return -1;
    return model_->steps()[i].step;
}

void SamplesPanel::showIndex(int index) {
    const auto& steps = model_->steps();
    if (index < 0 || index >= steps.size()) {
        stepLabel_->setText(tr("No samples"));
        view_->clear();
        return;
    }
    if (slider_->value() != index) {
        slider_->blockSignals(true);
        slider_->setValue(index);
        slider_->blockSignals(false);
    }
    const auto& s = steps[index];
    stepLabel_->setText(tr("Step %1 (%2 of %3)").arg(s.step).arg(index + 1).arg(steps.size()));
    QString html;
    for (const auto& sample : s.samples) {
        html += QStringLiteral("<p style=\"white-space: pre-wrap\"><b>%1</b>%2</p>")
                    .arg(sample.prompt.toHtmlEscaped(), sample.text.toHtmlEscaped());
    }
    view_->setHtml(html);
}

QString SamplesPanel::shownText() const {
    return view_->toPlainText();
}

void SamplesPanel::setModelSource(const QString& path, bool bytes) {
    source_ = path;
    bytes_ = bytes;
    updateTryIt();
}

void SamplesPanel::updateTryIt() {
    const bool running = isGenerating();
    generate_->setEnabled(!running && !source_.isEmpty());
    stop_->setEnabled(running);
    prompt_->setPlaceholderText(bytes_ ? tr("A prompt, e.g. The ")
                                       : tr("Token ids, e.g. 1,2,3 (this run has no tokenizer)"));
    sourceLabel_->setText(source_.isEmpty() ? tr("Select a run or a checkpoint to generate from.")
                                            : tr("Generates from %1").arg(source_));
    sourceLabel_->setToolTip(sourceLabel_->text());
}

bool SamplesPanel::isGenerating() const {
    return command_->isRunning();
}

void SamplesPanel::setSampling(int maxNewTokens, double temperature, int topK, double topP) {
    maxTokens_->setValue(maxNewTokens);
    temperature_->setValue(temperature);
    topK_->setValue(topK);
    topP_->setValue(topP);
}

void SamplesPanel::setChatMode(bool on, const QString& system) {
    {
        QSignalBlocker block(chat_);
        chat_->setChecked(on);
    }
    system_->setText(system);
    system_->setVisible(on);
    newChat_->setVisible(on);
    newChat();
}

bool SamplesPanel::chatMode() const {
    return chat_->isChecked();
}

void SamplesPanel::newChat() {
    conversation_.clear();
    pendingUser_.clear();
    output_->clear();
    updateTryIt();
}

void SamplesPanel::showConversation(const QString& tail) {
    QStringList parts;
    for (const auto& [role, content] : conversation_)
        parts << (role == QStringLiteral("user") ? tr("You: %1") : tr("Model: %1")).arg(content);
    if (!tail.isEmpty()) parts << tail;
    output_->setPlainText(parts.join(QStringLiteral("\n\n")));
    output_->moveCursor(QTextCursor::End);
}

QString SamplesPanel::tryItOutput() const {
    return output_->toPlainText();
}

bool SamplesPanel::generate() {
    if (isGenerating() || source_.isEmpty()) return false;
    const QString prompt = prompt_->text();
    if (prompt.isEmpty()) {
        output_->setPlainText(tr("Type a prompt first."));
        return false;
    }
    QStringList args{QStringLiteral("generate"), source_};
    QTemporaryFile* history = nullptr;
    if (chatMode()) {
        if (!bytes_) {
            output_->setPlainText(tr("Chat needs text: this run has no tokenizer."));
            return false;
        }
        // The conversation so far, for the engine to render with the model's template.
        nlohmann::json messages = nlohmann::json::array();
        for (const auto& [role, content] : conversation_)
            messages.push_back({{"role", role.toStdString()}, {"content", content.toStdString()}});
        history = new QTemporaryFile(
            QDir::temp().filePath(QStringLiteral("lathe-chat-XXXXXX.json")), this);
        if (!history->open() || history->write(QByteArray::fromStdString(messages.dump())) < 0 ||
            !history->flush()) {
            output_->setPlainText(
                tr("Cannot write the conversation: %1").arg(history->errorString()));
            delete history;
            return false;
        }
        args << QStringLiteral("--chat") << QStringLiteral("--messages") << history->fileName()
             << QStringLiteral("--prompt") << prompt;
        if (!system_->text().trimmed().isEmpty())
            args << QStringLiteral("--system") << system_->text().trimmed();
        pendingUser_ = prompt;
    } else if (bytes_) {
        args << QStringLiteral("--prompt") << prompt;
    } else {
        static const QRegularExpression ids(QStringLiteral("^\\s*\\d+(\\s*,\\s*\\d+)*\\s*$"));
        if (!ids.match(prompt).hasMatch()) {
            output_->setPlainText(
                tr("This run has no tokenizer: give the prompt as token ids, e.g. 1,2,3."));
            return false;
        }
        args << QStringLiteral("--prompt-ids") << QString(prompt).remove(QLatin1Char(' '));
    }
    args << QStringLiteral("--max-new-tokens") << QString::number(maxTokens_->value())
         << QStringLiteral("--temperature") << QString::number(temperature_->value())
         << QStringLiteral("--json");
    if (topK_->value() > 0) args << QStringLiteral("--top-k") << QString::number(topK_->value());
    if (topP_->value() < 1.0) args << QStringLiteral("--top-p") << QString::number(topP_->value());
    lastArguments_ = args;
    delete history_;
    history_ = history;
    if (chatMode()) {
        showConversation(tr("You: %1\n\nModel: …").arg(prompt));
        prompt_->clear();
    } else {
        output_->setPlainText(tr("Generating…"));
    }
    command_->setProgram(engine_);
    command_->start(args);
    updateTryIt();
    return true;
}

void SamplesPanel::stopGenerating() {
    if (!isGenerating()) return;
    command_->kill();  // our own child, by its handle
}

void SamplesPanel::onGenerated(bool ok) {
    delete history_;
    history_ = nullptr;
    QString text;
    if (!ok && command_->signalled()) {
        text = tr("Stopped.");
    } else if (!ok) {
        text = command_->error().startsWith(QLatin1String("cannot start"))
                   ? command_->error()
                   : tr("Generation failed: %1").arg(command_->error());
    } else {
        // The first line is the first generation (a summary line follows).
        const QByteArray first = command_->output().left(command_->output().indexOf('\n'));
        QString error;
        const auto g = readOutput<protocol::Generation>(first, "generate", &error);
        ok = g.has_value();
        if (!g) {
            text = tr("The engine's answer does not fit: %1").arg(error);
        } else if (chatMode() && !pendingUser_.isEmpty()) {
            text = QString::fromStdString(g->reply.value_or(g->text.value_or(""))).trimmed();
        } else if (g->text) {
            text =
                QString::fromStdString(g->prompt.value_or("")) + QString::fromStdString(*g->text);
        } else {
            QStringList ids;
            for (const auto id : g->ids) ids << QString::number(id);
            text = ids.join(QLatin1Char(' '));
        }
    }
    if (chatMode() && !pendingUser_.isEmpty()) {
        if (ok) {
            conversation_.append({QStringLiteral("user"), pendingUser_});
            conversation_.append({QStringLiteral("assistant"), text});
            showConversation();
        } else {
            // The turn did not happen: the conversation stays as it was, the prompt comes back.
            prompt_->setText(pendingUser_);
            showConversation(text);
        }
        pendingUser_.clear();
        updateTryIt();
        Q_EMIT generationFinished(ok, text);
        return;
    }
    output_->setPlainText(text);
    updateTryIt();
    Q_EMIT generationFinished(ok, text);
}

}  // namespace lathe::ui
