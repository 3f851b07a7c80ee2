#include "ui/config/schema_fields.h"

namespace lathe::ui {
namespace {

QString str(const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>())
                                            : QString();
}

std::optional<double> num(const Json& j, const char* key) {
    auto it = j.find(key);
    if (it != j.end() && it->is_number()) return it->get<double>();
    return std::nullopt;
}

// The schema's type, ignoring "null" in a ["integer", "null"] union.
QString typeOf(const Json& s) {
    auto it = s.find("type");
    if (it == s.end()) return {};
    if (it->is_string()) return QString::fromStdString(it->get<std::string>());
    if (it->is_array()) {
        for (const auto& t : *it)
            if (t.is_string() && t.get<std::string>() != "null")
                return QString::fromStdString(t.get<std::string>());
    }
    return {};
}

FieldSpec parseField(const QString& key, const QString& path, const Json& schema) {
    FieldSpec f;
    f.key = key;
    f.path = path;
    f.description = str(schema, "description");
    f.nullable = schema.value("x-lathe-nullable", false);
    f.defaultValue = schema.contains("default") ? schema["default"] : Json(nullptr);

    // A nullable non-scalar is {"anyOf": [<the schema>, {"type": "null"}]}: unwrap it.
    Json s = schema;
    if (s.contains("anyOf") && !s.contains("type") && f.nullable) {
        for (const auto& alt : s["anyOf"]) {
            if (alt.value("type", Json()) == Json("null")) continue;
            Json merged = alt;
            if (!merged.contains("x-lathe-format") && s.contains("x-lathe-format"))
                merged["x-lathe-format"] = s["x-lathe-format"];
            s = merged;
            break;
        }
    }
    f.format = str(s, "x-lathe-format");
    f.minimum = num(s, "minimum");
    f.maximum = num(s, "maximum");
    if (auto ex = num(s, "exclusiveMinimum")) {
        f.minimum = ex;
        f.exclusiveMinimum = true;
    }
    const QString type = typeOf(s);

    if (f.format == QLatin1String("duration")) {
        f.kind = FieldSpec::Kind::Duration;
        // The object form: {"value": integer >= min, "unit": enum}.
        for (const auto& alt : s.value("anyOf", Json::array())) {
            if (!alt.contains("properties")) continue;
            const Json& props = alt["properties"];
            if (props.contains("value")) f.minimum = num(props["value"], "minimum");
            if (props.contains("unit"))
                for (const auto& u : props["unit"].value("enum", Json::array()))
                    if (u.is_string()) f.enumValues << QString::fromStdString(u.get<std::string>());
        }
        return f;
    }
    if (s.contains("enum")) {
        f.kind = FieldSpec::Kind::Enum;
        for (const auto& v : s["enum"])
            if (v.is_string()) f.enumValues << QString::fromStdString(v.get<std::string>());
        return f;
    }
    // A section that may be null (train_module.scheduler.override_decay) is edited whole, as
    // JSON text, so that it can be null or an object; other sections are groups of fields.
    if (type == QLatin1String("object") && s.contains("properties") && !f.nullable) {
        f.kind = FieldSpec::Kind::Group;
        for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
            const QString k = QString::fromStdString(it.key());
            f.children.push_back(
                parseField(k, path.isEmpty() ? k : path + QLatin1Char('.') + k, it.value()));
        }
        return f;
    }
    if (type == QLatin1String("boolean")) {
        f.kind = FieldSpec::Kind::Bool;
    } else if (type == QLatin1String("integer")) {
        f.kind = FieldSpec::Kind::Integer;
    } else if (type == QLatin1String("number")) {
        f.kind = FieldSpec::Kind::Number;
    } else if (type == QLatin1String("string")) {
        f.kind =
            f.format == QLatin1String("path") ? FieldSpec::Kind::Path : FieldSpec::Kind::String;
    } else if (type == QLatin1String("array")) {
        const Json items = s.value("items", Json::object());
        const QString itemType = typeOf(items);
        if (itemType == QLatin1String("string") || itemType == QLatin1String("integer") ||
            itemType == QLatin1String("number")) {
            f.kind = FieldSpec::Kind::List;
            f.itemType = itemType;
            if (f.format.isEmpty()) f.format = str(items, "x-lathe-format");
            f.minimum = num(items, "minimum");
            f.maximum = num(items, "maximum");
        } else {
            f.kind = FieldSpec::Kind::JsonText;  // lists of objects: edited as JSON text
        }
    } else {
        f.kind = FieldSpec::Kind::JsonText;
    }
    return f;
}

void collectLeaves(const FieldSpec& f, std::vector<const FieldSpec*>& out) {
    if (f.kind != FieldSpec::Kind::Group) {
        out.push_back(&f);
        return;
    }
    for (const auto& c : f.children) collectLeaves(c, out);
}

}  // namespace

bool FieldSpec::isSwitchable() const {
    const FieldSpec* e = child(QStringLiteral("enabled"));
    return kind == Kind::Group && e && e->kind == Kind::Bool;
}

const FieldSpec* FieldSpec::child(const QString& k) const {
    for (const auto& c : children)
        if (c.key == k) return &c;
    return nullptr;
}

FieldSpec parseSchema(const Json& schema) {
    return parseField(QString(), QString(), schema);
}

std::vector<const FieldSpec*> leafFields(const FieldSpec& root) {
    std::vector<const FieldSpec*> out;
    collectLeaves(root, out);
    return out;
}

const FieldSpec* findField(const FieldSpec& root, const QString& path) {
    const FieldSpec* f = &root;
    for (const QString& part : path.split(QLatin1Char('.'), Qt::SkipEmptyParts)) {
        f = f->child(part);
        if (!f) return nullptr;
    }
    return f;
}

Json valueAt(const Json& doc, const QString& path) {
    const Json* j = &doc;
    for (const QString& part : path.split(QLatin1Char('.'), Qt::SkipEmptyParts)) {
        if (!j->is_object()) return nullptr;
        auto it = j->find(part.toStdString());
        if (it == j->end()) return nullptr;
        j = &*it;
    }
    return *j;
}

void setValueAt(Json& doc, const QString& path, const Json& value) {
    Json* j = &doc;
    for (const QString& part : path.split(QLatin1Char('.'), Qt::SkipEmptyParts)) {
        if (!j->is_object()) *j = Json::object();
        j = &(*j)[part.toStdString()];
    }
    *j = value;
}

Json deepMerge(Json base, const Json& over) {
    if (!base.is_object() || !over.is_object()) return over;
    for (auto it = over.begin(); it != over.end(); ++it) {
        auto b = base.find(it.key());
        if (b != base.end() && b->is_object() && it->is_object()) {
            *b = deepMerge(*b, *it);
        } else {
            base[it.key()] = *it;
        }
    }
    return base;
}

QString fieldForIssue(const FieldSpec& root, const QString& issuePath) {
    QString p = issuePath;
    const int bracket = p.indexOf(QLatin1Char('['));
    if (bracket >= 0) p = p.left(bracket);
    // Walk as deep as the path goes; stop at the first leaf.
    const FieldSpec* f = &root;
    QString found;
    for (const QString& part : p.split(QLatin1Char('.'), Qt::SkipEmptyParts)) {
        const FieldSpec* c = f->child(part);
        if (!c) break;
        f = c;
        if (c->kind != FieldSpec::Kind::Group) {
            found = c->path;
            break;
        }
    }
    return found;
}

}  // namespace lathe::ui
