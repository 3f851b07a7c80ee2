#include "ui/data/prepare_job.h"

#include "ui/util/engine_command.h"
#include "ui/util/engine_launch.h"

#include <QDir>
#include <QFileInfo>

#include <algorithm>
#include <climits>

namespace lathe::ui {

using Json = lathe::config::Json;

QString PrepareRequest::trainedTokenizerPath() const {
    return QDir::cleanPath(outDir) + QStringLiteral("-tokenizer.model");
}

QString PrepareRequest::problem() const {
    if (inputs.isEmpty()) return QObject::tr("Add text or JSONL files or folders.");
    for (const auto& in : inputs)
        if (!QFileInfo::exists(in)) return QObject::tr("%1 does not exist.").arg(in);
    if (outDir.trimmed().isEmpty()) return QObject::tr("Choose a folder for the token files.");
    if (trainVocabSize <= 0 && tokenizer.trimmed().isEmpty())
        return QObject::tr("Choose a tokenizer file, or train a new one.");
    if (trainVocabSize <= 0 && !QFileInfo(tokenizer).isFile())
        return QObject::tr("The tokenizer %1 is not a file.").arg(tokenizer);
    if (chat && trainVocabSize > 0)
        return QObject::tr(
            "Chat data needs the model's own tokenizer (its folder holds the chat "
            "template), not a new one.");
    if (chat && !chatTemplate.isEmpty() && !chatTemplate.startsWith(QStringLiteral("builtin:")) &&
        !QFileInfo::exists(chatTemplate))
        return QObject::tr("The chat template %1 does not exist.").arg(chatTemplate);
    for (const auto& arg : templateArgs)
        if (arg.indexOf(QLatin1Char('=')) < 1)
            return QObject::tr(
                       "Template argument \"%1\": write NAME=VALUE (enable_thinking=false).")
                .arg(arg);
    return {};
}

QStringList PrepareRequest::trainArguments() const {
    QStringList a{QStringLiteral("tokenizer"), QStringLiteral("train")};
    a << inputs;
    a << QStringLiteral("--vocab-size") << QString::number(trainVocabSize)
      << QStringLiteral("--type") << trainType << QStringLiteral("--field") << field
      << QStringLiteral("--out") << trainedTokenizerPath();
    if (threads > 0) a << QStringLiteral("--threads") << QString::number(threads);
    return a;
}

QStringList PrepareRequest::prepareArguments() const {
    QStringList a{QStringLiteral("prepare-data")};
    a << inputs;
    a << QStringLiteral("--tokenizer") << (trainVocabSize > 0 ? trainedTokenizerPath() : tokenizer)
      << QStringLiteral("--out") << outDir << QStringLiteral("--shard-size") << shardSize
      << QStringLiteral("--progress") << QStringLiteral("json");
    if (chat) {
        a << QStringLiteral("--chat") << QStringLiteral("--train-on")
          << (trainOnAll ? QStringLiteral("all") : QStringLiteral("assistant"));
        if (!chatTemplate.isEmpty()) a << QStringLiteral("--chat-template") << chatTemplate;
        for (const auto& arg : templateArgs) a << QStringLiteral("--template-arg") << arg;
        if (skipUnmaskable) a << QStringLiteral("--unmaskable") << QStringLiteral("skip");
        if (field != QStringLiteral("text")) a << QStringLiteral("--field") << field;
    } else {
        a << QStringLiteral("--field") << field;
    }
    if (threads > 0) a << QStringLiteral("--threads") << QString::number(threads);
    return a;
}

QVector<std::pair<QString, Json>> PrepareResult::configChanges() const {
    return {{QStringLiteral("dataset.source"), "numpy"},
            {QStringLiteral("dataset.paths"), Json::array({folder.toStdString()})},
            {QStringLiteral("dataset.tokenizer"), tokenizer.toStdString()},
            {QStringLiteral("dataset.token_dtype"), dtype.toStdString()},
            {QStringLiteral("model.vocab_size"), paddedVocabSize}};
}

PrepareJob::PrepareJob(QObject* parent)
    : QObject(parent), engine_(findEngine()), command_(new EngineCommand(this)) {
    connect(command_, &EngineCommand::lineRead, this, [this](const QByteArray& line) {
        if (state_ == State::Preparing) readProgressLine(line);
    });
    connect(command_, &EngineCommand::finished, this, &PrepareJob::onFinished);
}

// The command's destructor (a child of this job) stops a running step.
PrepareJob::~PrepareJob() = default;

bool PrepareJob::start(const PrepareRequest& request) {
    if (isRunning()) {
        message_ = tr("A preparation is already running.");
        return false;
    }
    const QString problem = request.problem();
    if (!problem.isEmpty()) {
        message_ = problem;
        return false;
    }
    request_ = request;
    result_ = {};
    cancelled_ = false;
    fraction_ = 0;
    if (request.trainVocabSize > 0) {
        message_ = tr("Training a %1 tokenizer of %2 tokens…")
                       .arg(request.trainType)
                       .arg(request.trainVocabSize);
        runStep(request.trainArguments(), State::Training);
    } else {
        message_ = tr("Preparing…");
        runStep(request.prepareArguments(), State::Preparing);
    }
    return true;
}

void PrepareJob::cancel() {
    if (!isRunning()) return;
    cancelled_ = true;
    command_->terminate();
}

void PrepareJob::runStep(const QStringList& arguments, State state) {
    state_ = state;
    fraction_ = state == State::Training ? -1 : 0;
    protocolError_.clear();
    Q_EMIT stateChanged(state_);
    Q_EMIT progressChanged(fraction_, message_);
    command_->setProgram(engine_);
    command_->start(arguments);
}

void PrepareJob::readProgressLine(const QByteArray& line) {
    const std::string event = protocol::output_event(line.toStdString());
    if (event.empty()) return;  // not an event line
    QString error;
    auto note = [this, &error] {
        if (protocolError_.isEmpty()) protocolError_ = error;
    };
    if (event == protocol::PrepareProgress::kEvent) {
        const auto p = readOutput<protocol::PrepareProgress>(line, "prepare-data progress", &error);
        if (!p) return note();
        fraction_ =
            p->bytes_total > 0 ? static_cast<double>(p->bytes_done) / double(p->bytes_total) : 0;
        message_ =
            tr("%1% — %2 MB/s — %3 tokens, %4 shard(s)%5")
                .arg(qRound(fraction_ * 100))
                .arg(p->mb_per_s, 0, 'f', 1)
                .arg(p->tokens)
                .arg(p->shards)
                .arg(p->eta_s >= 0 ? tr(" — about %1 s left").arg(qRound(p->eta_s)) : QString());
        Q_EMIT progressChanged(fraction_, message_);
    } else if (event == protocol::PrepareDone::kEvent) {
        const auto d = readOutput<protocol::PrepareDone>(line, "prepare-data done", &error);
        if (!d) return note();
        result_.folder = QString::fromStdString(d->folder);
        result_.tokenizer = QString::fromStdString(d->tokenizer);
        result_.dtype = QString::fromStdString(d->dtype);
        result_.tokens = d->tokens;
        result_.documents = d->documents;
        result_.shards = d->shards;
        result_.paddedVocabSize = d->padded_vocab_size;
    } else if (event == protocol::PrepareInvalidUtf8::kEvent) {
        const auto u =
            readOutput<protocol::PrepareInvalidUtf8>(line, "prepare-data invalid_utf8", &error);
        if (!u) return note();
        // One event per file: how many places, and the first.
        message_ = tr("Invalid UTF-8 in %1 at %n place(s), the first at byte %2 (replaced)", "",
                      static_cast<int>(std::min<long long>(u->count, INT_MAX)))
                       .arg(QString::fromStdString(u->file))
                       .arg(u->offset);
        Q_EMIT progressChanged(fraction_, message_);
    }
}

void PrepareJob::fail(const QString& message) {
    state_ = cancelled_ ? State::Cancelled : State::Failed;
    message_ = message;
    Q_EMIT stateChanged(state_);
    Q_EMIT progressChanged(fraction_, message_);
    Q_EMIT finished(false);
}

void PrepareJob::onFinished(bool ok) {
    if (cancelled_) {
        fail(state_ == State::Preparing
                 ? tr("Cancelled. The finished shards are kept: Prepare again with the same "
                      "settings goes on from there.")
                 : tr("Cancelled."));
        return;
    }
    if (!ok) {
        // The engine's last line says what was wrong.
        fail(command_->error());
        return;
    }
    if (!protocolError_.isEmpty()) {
        fail(tr("the engine's answer does not fit this workbench: %1").arg(protocolError_));
        return;
    }
    if (state_ == State::Training) {
        message_ = tr("Tokenizer trained: %1. Preparing…").arg(request_.trainedTokenizerPath());
        runStep(request_.prepareArguments(), State::Preparing);
        return;
    }
    if (result_.folder.isEmpty()) {
        fail(tr("prepare-data ended without saying what it made"));
        return;
    }
    state_ = State::Finished;
    fraction_ = 1;
    message_ = tr("Done: %1 tokens (%2), %3 documents, %4 shard(s) in %5")
                   .arg(result_.tokens)
                   .arg(result_.dtype)
                   .arg(result_.documents)
                   .arg(result_.shards)
                   .arg(result_.folder);
    Q_EMIT stateChanged(state_);
    Q_EMIT progressChanged(fraction_, message_);
    Q_EMIT finished(true);
}

}  // namespace lathe::ui
