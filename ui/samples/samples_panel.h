// SamplesPanel: the Samples dock. The sampler's latest text per prompt, a step slider to see how it
// changed over the run (a thin view over SamplesModel), and "Try it": generate from the selected
// checkpoint, or the run's newest one, in a child `lathe-engine generate` process that a Stop
// button ends. The window never waits for it. Sampling: new tokens, temperature, top-k, top-p.
// Chat mode talks to a fine-tuned model in turns: each prompt is the user's turn, rendered with
// the model's chat template together with the conversation so far (`generate --chat --messages`),
// and the reply joins the conversation; New chat starts over.
#pragma once

#include "ui/samples/samples_model.h"

#include <QWidget>

class QCheckBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QSpinBox;
class QTemporaryFile;
class QTextBrowser;

namespace lathe::ui {

class EngineCommand;

class SamplesPanel : public QWidget {
    Q_OBJECT

public:
    SamplesPanel(SamplesModel* model, QWidget* parent = nullptr);
    ~SamplesPanel() override;

    /// What Try it generates from: a checkpoint, or a run folder (its newest checkpoint), and
    /// whether its prompts are text (byte tokens, or a tokenizer the engine finds with the
    /// checkpoint) or ids. Empty disables Try it.
    void setModelSource(const QString& path, bool bytes);
    QString modelSource() const { return source_; }
    SamplesModel* model() const { return model_; }
    void setEnginePath(const QString& path) { engine_ = path; }

    /// The step shown (-1 when there are no samples).
    qint64 shownStep() const;
    /// Shows the samples of the index-th step of the model.
    void showIndex(int index);
    QString shownText() const;

    /// Try it: starts generating with the prompt box's text; false when it cannot start.
    bool generate();
    void stopGenerating();
    bool isGenerating() const;
    QString tryItOutput() const;
    QLineEdit* promptEdit() const { return prompt_; }
    /// Sampling options (0 top-k and 1 top-p: off).
    void setSampling(int maxNewTokens, double temperature, int topK, double topP);
    /// Chat mode on or off; switching clears the conversation.
    void setChatMode(bool on, const QString& system = {});
    bool chatMode() const;
    /// The conversation so far in chat mode: (role, content) pairs.
    const QVector<std::pair<QString, QString>>& conversation() const { return conversation_; }
    void newChat();
    /// The arguments the next generate() passes to the engine (for tests).
    QStringList lastArguments() const { return lastArguments_; }

Q_SIGNALS:
    /// Try it finished: its text, or the error.
    void generationFinished(bool ok, const QString& output);

private:
    /// The Try it box: prompt, labelled sampling settings, Chat, Generate / Stop, the output.
    QGroupBox* buildTryIt(QWidget* parent);
    void rebuild();
    void onStepAdded();
    void onGenerated(bool ok);
    void updateTryIt();

    SamplesModel* model_;
    QLabel* stepLabel_;
    QSlider* slider_;
    QTextBrowser* view_;
    QLineEdit* prompt_;
    QSpinBox* maxTokens_;
    QDoubleSpinBox* temperature_;
    QSpinBox* topK_;
    QDoubleSpinBox* topP_;
    QCheckBox* chat_;
    QLineEdit* system_;
    QPushButton* newChat_;
    QPushButton* generate_;
    QPushButton* stop_;
    QLabel* sourceLabel_;
    QPlainTextEdit* output_;
    EngineCommand* command_;
    QTemporaryFile* history_ = nullptr;  ///< the conversation the running generation reads
    QVector<std::pair<QString, QString>> conversation_;
    QString pendingUser_;  ///< the user's turn being answered
    QStringList lastArguments_;
    void showConversation(const QString& tail = {});
    QString source_;
    QString engine_;
    bool bytes_ = true;
};

}  // namespace lathe::ui
