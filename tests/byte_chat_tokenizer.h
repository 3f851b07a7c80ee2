// A byte-level tokenizer.json for chat tests (test_data_dialog, test_e2e_workbench): one token per
// byte (GPT-2's byte-to-character map, no merges) and ChatML's two special tokens, <|im_start|>
// (256) and <|im_end|> (257), with every field `tokenizers` requires, so transformers reads it too.
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QString>

#include <utility>

namespace lathe::testing {

/// Writes `dir`/tokenizer.json (making `dir`) and returns its path; "" when it cannot be written.
inline QString write_byte_chat_tokenizer(const QString& dir) {
    QDir().mkpath(dir);
    QList<int> bytes;
    for (int b = '!'; b <= '~'; ++b) bytes << b;
    for (int b = 0xA1; b <= 0xAC; ++b) bytes << b;
    for (int b = 0xAE; b <= 0xFF; ++b) bytes << b;
    QJsonObject vocab;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
        const int code = bytes.contains(b) ? b : 256 + extra++;
        vocab.insert(QString(QChar(code)), b);
    }
    QJsonArray added;
    for (const auto& [id, content] : {std::pair{256, "<|im_start|>"}, std::pair{257, "<|im_end|>"}})
        added.append(QJsonObject{{"id", id},
                                 {"content", content},
                                 {"special", true},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false}});
    const QJsonObject byteLevel{{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", true},
                                {"use_regex", true}};
    const QJsonObject tok{
        {"model", QJsonObject{{"type", "BPE"}, {"vocab", vocab}, {"merges", QJsonArray()}}},
        {"added_tokens", added},
        {"pre_tokenizer", byteLevel},
        {"decoder", byteLevel}};
    QFile f(dir + "/tokenizer.json");
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return {};
    f.write(QJsonDocument(tok).toJson());
    return f.fileName();
}

}  // namespace lathe::testing
