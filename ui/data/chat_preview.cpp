#include "ui/data/chat_preview.h"

#include "engine/chat/conversation.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

#include <QFile>
#include <QObject>

namespace lathe::ui {

ChatPreview ChatPreview::of(const QString& tokenizerFile, const QString& jsonl, bool trainOnAll,
                            const QString& templatePath, const QStringList& templateArgs) {
    ChatPreview p;
    QFile f(jsonl);
    if (!f.open(QIODevice::ReadOnly)) {
        p.error = QObject::tr("%1: cannot read").arg(jsonl);
        return p;
    }
    QByteArray line;
    int number = 0;
    while (!f.atEnd()) {
        line = f.readLine();
        ++number;
        if (!line.trimmed().isEmpty()) break;
    }
    p.where = QStringLiteral("%1:%2").arg(jsonl).arg(number);
    try {
        const auto tok = tokenizer::load_tokenizer(tokenizerFile.toStdString());
        auto tmpl = templatePath.isEmpty()
                        ? chat::ChatTemplate::beside_tokenizer(tokenizerFile.toStdString())
                        : std::make_optional(chat::ChatTemplate::load(templatePath.toStdString()));
        if (!tmpl)
            throw Error(tokenizerFile.toStdString() +
                        ": no chat template beside the tokenizer (tokenizer_config.json or "
                        "chat_template.jinja in its folder); choose a template file");
        p.template_ = QString::fromStdString(tmpl->origin());
        nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
        for (const auto& a : templateArgs) chat::add_template_arg(kwargs, a.toStdString());
        tmpl->update_kwargs(kwargs);
        nlohmann::ordered_json j;
        try {
            j = nlohmann::ordered_json::parse(line.toStdString());
        } catch (const std::exception& e) {
            throw Error(p.where.toStdString() + ": not a JSON line: " + e.what());
        }
        if (!j.is_object() || !j.contains("messages"))
            throw Error(p.where.toStdString() + ": no \"messages\" field");
        nlohmann::ordered_json context = nlohmann::ordered_json::object();
        for (const char* key : {"tools", "documents"})
            if (j.contains(key) && !j[key].is_null()) context[key] = j[key];
        const auto e = chat::encode_conversation(
            *tmpl, *tok, j["messages"], trainOnAll ? chat::TrainOn::all : chat::TrainOn::assistant,
            p.where.toStdString(), context);
        // Runs of equal mask, each decoded whole (a byte-level token alone may be part of a
        // character).
        std::size_t start = 0;
        for (std::size_t i = 1; i <= e.ids.size(); ++i) {
            if (i < e.ids.size() && e.mask[i] == e.mask[start]) continue;
            const std::vector<int64_t> ids(e.ids.begin() + static_cast<std::ptrdiff_t>(start),
                                           e.ids.begin() + static_cast<std::ptrdiff_t>(i));
            Run r;
            r.text = QString::fromStdString(tok->decode(ids, false));
            r.trained = e.mask[start] != 0;
            r.tokens = static_cast<int>(ids.size());
            p.runs.push_back(r);
            if (r.trained) p.trainedTokens += r.tokens;
            start = i;
        }
        p.totalTokens = static_cast<int>(e.ids.size());
    } catch (const std::exception& e) {
        p.error = QString::fromStdString(e.what());
    }
    return p;
}

QString ChatPreview::html() const {
    if (!error.isEmpty())
        return QStringLiteral("<p style=\"color:#b00020\">%1</p>").arg(error.toHtmlEscaped());
    QString body;
    for (const auto& r : runs) {
        const QString text = r.text.toHtmlEscaped();
        body += r.trained ? QStringLiteral(
                                "<span style=\"background:#fff3b0;font-weight:bold\">%1"
                                "</span>")
                                .arg(text)
                          : QStringLiteral("<span style=\"color:#888888\">%1</span>").arg(text);
    }
    return QObject::tr(
               "<p>%1: the loss is taken on <b>%2</b> of %3 tokens (%4%, highlighted); the "
               "grey ones are context only. Template: %5</p>")
               .arg(where.toHtmlEscaped())
               .arg(trainedTokens)
               .arg(totalTokens)
               .arg(totalTokens > 0 ? 100.0 * trainedTokens / totalTokens : 0.0, 0, 'f', 1)
               .arg(template_.toHtmlEscaped()) +
           QStringLiteral("<pre style=\"white-space:pre-wrap\">%1</pre>").arg(body);
}

}  // namespace lathe::ui
