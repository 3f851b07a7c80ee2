// The config's JSON Schema (lathe::config::json_schema()) read into a tree of editable fields, so
// that the form editor is generated, not written: a new config field appears without GUI code.
// Also the document helpers the editor needs (value at a dotted path, issue path -> field).
#pragma once

#include "engine/config/io.h"

#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace lathe::ui {

using Json = lathe::config::Json;

struct FieldSpec {
    enum class Kind { Group, Bool, Integer, Number, String, Enum, Path, Duration, List, JsonText };
    Kind kind = Kind::JsonText;
    QString key;          ///< last path component ("lr")
    QString path;         ///< dotted path from the root ("train_module.optim.lr"); "" for the root
    QString description;  ///< the schema's description: the tooltip
    bool nullable = false;
    std::optional<double> minimum;
    std::optional<double> maximum;
    bool exclusiveMinimum = false;
    QStringList enumValues;           ///< Enum; and the units of a Duration
    QString format;                   ///< "path", "glob" (strings and lists)
    QString itemType;                 ///< List: "string", "integer" or "number"
    Json defaultValue;                ///< the schema's default (null when none)
    std::vector<FieldSpec> children;  ///< Group

    /// A group whose "enabled" boolean switches it on and off (the callbacks).
    bool isSwitchable() const;
    const FieldSpec* child(const QString& key) const;
};

/// Reads the schema of the whole config (an object with "properties") into a Group.
FieldSpec parseSchema(const Json& schema);
/// Every leaf field (not groups), depth first, in schema order.
std::vector<const FieldSpec*> leafFields(const FieldSpec& root);
const FieldSpec* findField(const FieldSpec& root, const QString& path);

/// The value at a dotted path, or null when absent.
Json valueAt(const Json& doc, const QString& path);
/// Sets the value at a dotted path, creating objects on the way.
void setValueAt(Json& doc, const QString& path, const Json& value);
/// `over` merged into `base` (objects recursively; anything else replaces).
Json deepMerge(Json base, const Json& over);

/// The leaf field an issue path ("dataset.paths[2]", "trainer.max_duration.unit") belongs to:
/// the longest field path that is a prefix of it; "" when none.
QString fieldForIssue(const FieldSpec& root, const QString& issuePath);

}  // namespace lathe::ui
