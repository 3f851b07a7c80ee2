// The Data page's chat preview: one conversation of a chat JSONL file rendered with the model's
// chat template and tokenized as prepare-data --chat would, in runs of tokens the loss sees
// (trained) or not (masked), and as HTML with the masked runs dimmed and the trained ones
// highlighted. Torch-free: lathe_chat and lathe_tokenizer, no engine process.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

namespace lathe::ui {

struct ChatPreview {
    struct Run {
        QString text;
        bool trained = false;
        int tokens = 0;
    };
    QVector<Run> runs;
    int trainedTokens = 0, totalTokens = 0;
    QString where;      ///< file:line of the conversation shown
    QString error;      ///< why there is nothing to show ("" when there is)
    QString template_;  ///< the template in force: its file ("" when none was found)

    /// The first conversation of `jsonl` (the first non-blank line) with `templatePath` (a
    /// .jinja file, a tokenizer_config.json or a model folder), else the tokenizer file's
    /// template, and `templateArgs` ("NAME=VALUE" each, prepare-data's --template-arg); the
    /// line's `tools` and `documents` go to the template, as prepare-data hands them over.
    /// Errors (no template, a bad line or argument, a template that raises) land in `error`.
    static ChatPreview of(const QString& tokenizerFile, const QString& jsonl, bool trainOnAll,
                          const QString& templatePath = {}, const QStringList& templateArgs = {});
    /// Masked runs grey, trained runs bold on a highlight, whitespace kept; or the error.
    QString html() const;
};

}  // namespace lathe::ui
