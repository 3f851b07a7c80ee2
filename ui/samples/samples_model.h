// SamplesModel: the sampler callback's text of one run, by step: read from the run folder's
// samples.jsonl and kept up to date from the live run's "samples" messages. Not a widget;
// SamplesPanel shows it.
//
// samples.jsonl is append-only. A resumed run appends from the step after its checkpoint, so a
// line whose step is not after the previous line's starts a new branch: the steps it repeats
// belonged to training that was abandoned, and are dropped, as the plots drop their points.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>

namespace lathe::ui {

class SamplesModel : public QObject {
    Q_OBJECT

public:
    struct Sample {
        QString prompt;
        QString text;
        bool operator==(const Sample& o) const { return prompt == o.prompt && text == o.text; }
    };
    struct Step {
        qint64 step = 0;
        QVector<Sample> samples;
    };

    explicit SamplesModel(QObject* parent = nullptr);

    void clear();
    /// Replaces what is held with `runDir`'s samples.jsonl (none is no error). Returns the number
    /// of lines that were not samples (skipped).
    int loadRun(const QString& runDir);
    /// One step's samples, from the live run: appended, or replacing the steps from `step` on.
    void addStep(qint64 step, const QVector<Sample>& samples);

    QString runDir() const { return runDir_; }
    /// Steps in increasing order.
    const QVector<Step>& steps() const { return steps_; }
    bool isEmpty() const { return steps_.isEmpty(); }
    /// Index of `step` in steps(), or -1.
    int indexOfStep(qint64 step) const;

Q_SIGNALS:
    /// Everything changed (cleared or loaded).
    void reset();
    /// A step was added at the end (index steps().size() - 1).
    void stepAdded();

private:
    void append(qint64 step, const Sample& sample);

    QString runDir_;
    QVector<Step> steps_;
};

}  // namespace lathe::ui
