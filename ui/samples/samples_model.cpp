#include "ui/samples/samples_model.h"

#include "engine/run_folder/layout.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QFile>

namespace lathe::ui {

SamplesModel::SamplesModel(QObject* parent) : QObject(parent) {}

void SamplesModel::clear() {
    runDir_.clear();
    steps_.clear();
    Q_EMIT reset();
}

int SamplesModel::indexOfStep(qint64 step) const {
    for (int i = 0; i < steps_.size(); ++i)
        if (steps_[i].step == step) return i;
    return -1;
}

void SamplesModel::append(qint64 step, const Sample& sample) {
    if (!steps_.isEmpty() && step == steps_.back().step) {
        steps_.back().samples.push_back(sample);
        return;
    }
    // A step not after the last one: a resumed run's; what followed it was abandoned.
    while (!steps_.isEmpty() && steps_.back().step >= step) steps_.pop_back();
    steps_.push_back({step, {sample}});
}

int SamplesModel::loadRun(const QString& runDir) {
    runDir_ = runDir;
    steps_.clear();
    int bad = 0;
    QFile f(QDir(runDir).filePath(QString::fromLatin1(run_folder::kSamplesFile)));
    if (f.open(QIODevice::ReadOnly)) {
        qint64 last = -1;
        while (!f.atEnd()) {
            const QByteArray line = f.readLine();
            if (line.trimmed().isEmpty()) continue;
            const auto j = nlohmann::json::parse(line.constData(), line.constData() + line.size(),
                                                 nullptr, false);
            if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
                !j.contains("prompt") || !j["prompt"].is_string() || !j.contains("text") ||
                !j["text"].is_string()) {
                ++bad;
                continue;
            }
            const qint64 step = j["step"].get<qint64>();
            Sample s{QString::fromStdString(j["prompt"].get<std::string>()),
                     QString::fromStdString(j["text"].get<std::string>())};
            if (step < last)  // a resumed run's first samples: drop the abandoned steps
                while (!steps_.isEmpty() && steps_.back().step >= step) steps_.pop_back();
            append(step, s);
            last = step;
        }
    }
    Q_EMIT reset();
    return bad;
}

void SamplesModel::addStep(qint64 step, const QVector<Sample>& samples) {
    if (samples.isEmpty()) return;
    while (!steps_.isEmpty() && steps_.back().step >= step) steps_.pop_back();
    steps_.push_back({step, samples});
    Q_EMIT stepAdded();
}

}  // namespace lathe::ui
