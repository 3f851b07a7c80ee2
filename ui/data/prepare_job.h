// PrepareJob: text to token files from the window. Runs `lathe-engine tokenizer train` (when a
// new tokenizer is asked for) and then `lathe-engine prepare-data --progress json` as child
// processes, reads their JSON progress lines, and says what the config should become. The Data
// dialog (data_dialog.h) is a thin view over it; the engine does the work, so the window never
// waits and Cancel keeps the finished shards for a later resume.
#pragma once

#include "engine/config/io.h"

#include <QObject>
#include <QStringList>
#include <QVector>

#include <utility>

namespace lathe::ui {

class EngineCommand;

struct PrepareRequest {
    QStringList inputs;  ///< text/JSONL files and folders
    QString outDir;      ///< the token files' folder
    QString tokenizer;   ///< an existing tokenizer file (unless trainVocabSize > 0)
    /// > 0: train a SentencePiece tokenizer of this size on the inputs first; it is written
    /// beside the output folder (trainedTokenizerPath()) and copied into it.
    int trainVocabSize = 0;
    QString trainType = QStringLiteral("bpe");  ///< "bpe" or "unigram"
    QString shardSize = QStringLiteral("1GB");
    QString field = QStringLiteral("text");
    /// Chat conversations (JSONL "messages"), rendered with the tokenizer's chat template and
    /// written with label masks: the assistant's turns only, or every token (trainOnAll).
    bool chat = false;
    bool trainOnAll = false;
    /// The template: "" for the tokenizer folder's, else a .jinja file, a
    /// tokenizer_config.json or a model folder (--chat-template).
    QString chatTemplate;
    QStringList templateArgs;  ///< "NAME=VALUE" each (--template-arg)
    /// Leave out a conversation whose assistant turns cannot be told apart (--unmaskable skip)
    /// instead of stopping at it.
    bool skipUnmaskable = false;
    int threads = 0;  ///< 0: every core

    /// Where a trained tokenizer goes: <outDir>-tokenizer.model.
    QString trainedTokenizerPath() const;
    /// What is wrong with the request ("" when it can start).
    QString problem() const;
    QStringList trainArguments() const;
    QStringList prepareArguments() const;
};

/// What a finished preparation gives the config.
struct PrepareResult {
    QString folder;     ///< absolute
    QString tokenizer;  ///< the tokenizer's copy in the folder
    QString dtype;
    qint64 tokens = 0, documents = 0, shards = 0;
    qint64 paddedVocabSize = 0;
    /// (config path, value) pairs: dataset.source, dataset.paths, dataset.tokenizer,
    /// dataset.token_dtype, model.vocab_size.
    QVector<std::pair<QString, lathe::config::Json>> configChanges() const;
};

class PrepareJob : public QObject {
    Q_OBJECT

public:
    enum class State { Idle, Training, Preparing, Finished, Failed, Cancelled };

    explicit PrepareJob(QObject* parent = nullptr);
    ~PrepareJob() override;

    void setEnginePath(const QString& path) { engine_ = path; }
    /// Starts; false (see message()) when the request is incomplete or a job is running.
    bool start(const PrepareRequest& request);
    /// Stops the running step (SIGTERM): prepare-data keeps its finished shards.
    void cancel();

    State state() const { return state_; }
    bool isRunning() const { return state_ == State::Training || state_ == State::Preparing; }
    /// 0..1 while preparing; -1 when unknown (training a tokenizer).
    double fraction() const { return fraction_; }
    /// The latest status line (progress, or the error).
    QString message() const { return message_; }
    const PrepareResult& result() const { return result_; }

    /// Reads one line of `prepare-data --progress json` into the job's state (public for tests).
    /// A line that is not an event is skipped; an event that lacks a field or has one of another
    /// type is a protocol error (protocolError()), which fails the job when the step ends.
    void readProgressLine(const QByteArray& line);
    /// The first event line that did not fit its message (protocol::Prepare*), naming the field.
    QString protocolError() const { return protocolError_; }

Q_SIGNALS:
    void stateChanged(State state);
    void progressChanged(double fraction, const QString& message);
    void finished(bool ok);

private:
    void runStep(const QStringList& arguments, State state);
    void onFinished(bool ok);
    void fail(const QString& message);

    QString engine_;
    PrepareRequest request_;
    PrepareResult result_;
    EngineCommand* command_ = nullptr;
    QString protocolError_;
    State state_ = State::Idle;
    double fraction_ = 0;
    QString message_;
    bool cancelled_ = false;
};

}  // namespace lathe::ui
