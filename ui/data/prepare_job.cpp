#include "ui/data/prepare_job.h"

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

PrepareJob::PrepareJob(QObject* parent) : QObject(parent), engine_(findEngine()) {}

PrepareJob::~PrepareJob() {
    if (process_ && process_->state() != QProcess::NotRunning) {
        process_->disconnect(this);
        process_->terminate();
        if (!process_->waitForFinished(5000)) process_->kill();
        process_->waitForFinished(1000);
    }
}

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
    if (!isRunning() || !process_) return;
    cancelled_ = true;
    process_->terminate();
}

void PrepareJob::runStep(const QStringList& arguments, State state) {
    state_ = state;
    fraction_ = state == State::Training ? -1 : 0;
    pending_.clear();
    errors_.clear();
    auto* p = new QProcess(this);
    process_ = p;
    connect(p, &QProcess::readyReadStandardOutput, this, [this, p] {
        pending_ += p->readAllStandardOutput();
        int nl;
        while ((nl = pending_.indexOf('\n')) >= 0) {
            const QByteArray line = pending_.left(nl);
            pending_.remove(0, nl + 1);
            if (state_ == State::Preparing) readProgressLine(line);
        }
    });
    connect(p, &QProcess::readyReadStandardError, this,
            [this, p] { errors_ += p->readAllStandardError(); });
    connect(p, &QProcess::finished, this, &PrepareJob::onFinished);
    connect(p, &QProcess::errorOccurred, this, [this, p](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart && p == process_)
            fail(tr("cannot start %1: %2").arg(engine_, p->errorString()));
    });
    Q_EMIT stateChanged(state_);
    Q_EMIT progressChanged(fraction_, message_);
    p->start(engine_, arguments);
}

void PrepareJob::readProgressLine(const QByteArray& line) {
    Json j;
    try {
        j = Json::parse(line.toStdString());
    } catch (const Json::exception&) {
        return;  // not a progress line
    }
    if (!j.is_object()) return;
    const std::string event = j.value("event", "");
    if (event == "progress") {
        const double total = j.value("bytes_total", 0.0);
        fraction_ = total > 0 ? j.value("bytes_done", 0.0) / total : 0;
        const double eta = j.value("eta_s", -1.0);
        message_ = tr("%1% — %2 MB/s — %3 tokens, %4 shard(s)%5")
                       .arg(qRound(fraction_ * 100))
                       .arg(j.value("mb_per_s", 0.0), 0, 'f', 1)
                       .arg(j.value("tokens", 0LL))
                       .arg(j.value("shards", 0LL))
                       .arg(eta >= 0 ? tr(" — about %1 s left").arg(qRound(eta)) : QString());
        Q_EMIT progressChanged(fraction_, message_);
    } else if (event == "done") {
        result_.folder = QString::fromStdString(j.value("folder", ""));
        result_.tokenizer = QString::fromStdString(j.value("tokenizer", ""));
        result_.dtype = QString::fromStdString(j.value("dtype", ""));
        result_.tokens = j.value("tokens", 0LL);
        result_.documents = j.value("documents", 0LL);
        result_.shards = j.value("shards", 0LL);
        result_.paddedVocabSize = j.value("padded_vocab_size", 0LL);
    } else if (event == "invalid_utf8") {
        // One event per file: how many places, and the first.
        message_ = tr("Invalid UTF-8 in %1 at %n place(s), the first at byte %2 (replaced)", "",
                      static_cast<int>(std::min<long long>(j.value("count", 1LL), INT_MAX)))
                       .arg(QString::fromStdString(j.value("file", "")))
                       .arg(j.value("offset", 0LL));
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

void PrepareJob::onFinished(int code, QProcess::ExitStatus status) {
    QProcess* p = process_;
    if (!p || p != sender()) return;
    p->deleteLater();
    const QString err = QString::fromUtf8(errors_).trimmed();
    if (cancelled_) {
        fail(state_ == State::Preparing
                 ? tr("Cancelled. The finished shards are kept: Prepare again with the same "
                      "settings goes on from there.")
                 : tr("Cancelled."));
        return;
    }
    if (status != QProcess::NormalExit || code != 0) {
        // The engine's last line says what was wrong.
        const QString last = err.section(QLatin1Char('\n'), -1);
        fail(last.isEmpty() ? tr("lathe-engine stopped with exit code %1").arg(code) : last);
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
