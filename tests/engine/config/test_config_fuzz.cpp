// lathe_config under fuzzing: thousands of mutated JSON and YAML configs (truncations, byte flips,
// inserted tokens, deep nesting, alias bombs, huge numbers, bad overrides) go through load(). None
// may crash or throw, and each must take under a second; the slowest case is printed.
#include "engine/config/io.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

using namespace lathe::config;

namespace {

constexpr std::uint32_t kSeed = 20;  // issue 20; fixed, so a failure reproduces
constexpr double kMaxSeconds = 1.0;

struct Case {
    std::string kind;  // how it was made, with the numbers needed to make it again
    Format format = Format::json;
    std::string text;
    std::vector<std::string> overrides;
};

// The first bytes of a case, printable, for a failure message.
std::string preview(const std::string& text) {
    std::string out;
    for (char c : text.substr(0, 60)) {
        if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return text.size() > 60 ? out + "..." : out;
}

std::string describe(const Case& c) {
    std::string s = c.kind + (c.format == Format::json ? " (JSON, " : " (YAML, ") +
                    std::to_string(c.text.size()) + " bytes): " + preview(c.text);
    for (const auto& o : c.overrides) s += " [override " + preview(o) + "]";
    return s;
}

// Pieces that parsers trip over, inserted at random places.
const std::vector<std::string> kTokens = {
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    ":",
    ",",
    ": ",
    "- ",
    "\n",
    "\n  ",
    "\t",
    "#",
    "&a ",
    "*a",
    "<<: *a",
    "? ",
    "!!str ",
    "!!binary ",
    "!",
    "|",
    ">",
    "---\n",
    "...\n",
    "%YAML",
    "~",
    "null",
    "true",
    "1e400",
    "-1e400",
    "1e-400",
    ".inf",
    ".nan",
    "NaN",
    "Infinity",
    "0x1F",
    "1_000",
    "\\u0000",
    "\\ud800",
    "\\",
    std::string(1, '\0'),
    "\xff",
    "\xc3\x28",
    "\"\\\"",
    "[[[[",
    "{{{{",
    "]]]]",
    "}}}}",
    "1e",
    "-",
    "+",
    "99999999999999999999999999999999999",
    "seed: 1",
    "\"seed\": 1",
};

const std::vector<std::string> kHugeNumbers = {
    "1e400",
    "-1e400",
    "1e-400",
    "1.7976931348623157e308",
    "4.9e-324",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "123456789012345678901234567890123456789012345678901234567890",
    std::string(400, '9'),
    "0." + std::string(400, '0') + "1",
    "1" + std::string(400, '0') + ".5",
    "1e99999999999999999999",
    "-0",
    ".inf",
    "-.inf",
    ".nan",
};

const std::vector<std::string> kNumericFields = {
    "seed",
    "model.d_model",
    "model.n_layers",
    "train_module.optim.lr",
    "train_module.rank_microbatch_size",
    "dataset.sequence_length",
    "data_loader.global_batch_size",
    "trainer.max_duration.value",
    "launch.nproc",
};

// {"a": {"b": {"c": value}}} for "a.b.c", in either format.
std::string nested_field(const std::string& dotted, const std::string& value, Format format) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        auto dot = dotted.find('.', start);
        parts.push_back(dotted.substr(start, dot == std::string::npos ? dot : dot - start));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    std::string out;
    if (format == Format::json) {
        for (const auto& p : parts) out += "{\"" + p + "\": ";
        out += value;
        out += std::string(parts.size(), '}');
    } else {
        for (std::size_t i = 0; i < parts.size(); ++i)
            out += std::string(2 * i, ' ') + parts[i] + (i + 1 < parts.size() ? ":\n" : ": ");
        out += value + "\n";
    }
    return out;
}

class Fuzzer {
public:
    explicit Fuzzer(std::uint32_t seed) : rng_(seed) {}

    std::size_t below(std::size_t n) {
        return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
    }
    template <class T>
    const T& pick(const std::vector<T>& v) {
        return v[below(v.size())];
    }

    // One random mutation of `text`; `how` says which.
    std::string mutate(std::string text, std::string& how) {
        const std::size_t kind = below(6);
        const std::size_t pos = below(text.size() + 1);
        switch (kind) {
            case 0:
                how = "truncate at " + std::to_string(pos);
                return text.substr(0, pos);
            case 1: {
                const std::size_t flips = 1 + below(8);
                how = std::to_string(flips) + " byte flips";
                for (std::size_t i = 0; i < flips && !text.empty(); ++i) {
                    char& c = text[below(text.size())];
                    c = below(2) ? static_cast<char>(c ^ (1 << below(8)))
                                 : static_cast<char>(below(256));
                }
                return text;
            }
            case 2: {
                const std::size_t n = 1 + below(4);
                how = "insert " + std::to_string(n) + " tokens";
                for (std::size_t i = 0; i < n; ++i)
                    text.insert(below(text.size() + 1), pick(kTokens));
                return text;
            }
            case 3: {
                const std::size_t len = below(text.size() - pos + 1);
                how = "delete " + std::to_string(len) + " at " + std::to_string(pos);
                return text.erase(pos, len);
            }
            case 4: {
                const std::size_t len = below(std::min<std::size_t>(200, text.size() - pos) + 1);
                const std::string slice = text.substr(pos, len);
                const std::size_t copies = 1 + below(20);
                how = "repeat " + std::to_string(len) + " bytes x" + std::to_string(copies);
                for (std::size_t i = 0; i < copies; ++i) text.insert(below(text.size() + 1), slice);
                return text;
            }
            default: {
                // A number, or the start of one, replaced by a huge one.
                std::size_t at = text.find_first_of("0123456789", pos);
                if (at == std::string::npos) at = text.find_first_of("0123456789");
                const std::string& huge = pick(kHugeNumbers);
                how = "number -> " + huge.substr(0, 20);
                if (at == std::string::npos) return text + huge;
                std::size_t end = at;
                while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
                    ++end;
                return text.replace(at, end - at, huge);
            }
        }
    }

private:
    std::mt19937 rng_;
};

}  // namespace

class TestConfigFuzz : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    int cases_ = 0;
    double slowest_ = 0;
    std::string slowest_case_;

    // Loads one case from a file, as the CLI does; fails the test if it crashes the check, throws,
    // reports an empty issue or takes too long.
    void run(const Case& c) {
        const std::string path =
            dir_.filePath(c.format == Format::json ? "case.json" : "case.yaml").toStdString();
        {
            std::ofstream f(path, std::ios::binary | std::ios::trunc);
            f << c.text;
        }
        const auto t0 = std::chrono::steady_clock::now();
        Loaded l;
        try {
            l = load(path, c.overrides);
        } catch (const std::exception& e) {
            QFAIL(qPrintable(QString::fromStdString("load() threw '" + std::string(e.what()) +
                                                    "' on " + describe(c))));
        }
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++cases_;
        if (s > slowest_) {
            slowest_ = s;
            slowest_case_ = describe(c);
        }
        if (s > kMaxSeconds) {
            QFAIL(qPrintable(QString::asprintf("%.2f s (limit %.1f s) on ", s, kMaxSeconds) +
                             QString::fromStdString(describe(c))));
        }
        for (const auto& i : l.issues) {
            if (i.message.empty())
                QFAIL(qPrintable(
                    QString::fromStdString("an issue without a message on " + describe(c))));
        }
    }

    // The documents mutations start from: the tiny preset, the full canonical config in both
    // formats, and YAML with anchors and aliases.
    std::vector<Case> bases() {
        const Json full = to_json(load("tiny").config);
        return {
            {"preset tiny", Format::json, *preset_text("tiny"), {}},
            {"canonical", Format::json, dump_document(full, Format::json), {}},
            {"canonical", Format::yaml, dump_document(full, Format::yaml), {}},
            {"anchors",
             Format::yaml,
             "model: &m\n  d_model: 64\n  n_layers: 2\n  n_heads: 4\n"
             "trainer:\n  max_duration: 10steps\n  steps_to_skip:\n    - {start: 1, stop: 2}\n"
             "    - &s {start: 4, stop: 5}\n    - *s\n"
             "train_module:\n  optim: {lr: 1.0e-3, betas: [0.9, 0.95]}\n",
             {}},
        };
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void cleanupTestCase() {
        qInfo("%d cases; slowest %.3f s: %s", cases_, slowest_, slowest_case_.c_str());
    }

    void mutations() {
        Fuzzer fuzz(kSeed);
        const auto seeds = bases();
        for (int i = 0; i < 2400; ++i) {
            Case c = seeds[static_cast<std::size_t>(i) % seeds.size()];
            // Up to three mutations on top of each other.
            const std::size_t rounds = 1 + fuzz.below(3);
            std::string how;
            for (std::size_t r = 0; r < rounds; ++r) {
                std::string step;
                c.text = fuzz.mutate(c.text, step);
                how += (how.empty() ? "" : ", ") + step;
            }
            c.kind = "mutation " + std::to_string(i) + " of " + c.kind + ": " + how;
            run(c);
            if (QTest::currentTestFailed()) return;
        }
    }

    void deepNesting() {
        Fuzzer fuzz(kSeed + 1);
        const std::vector<std::size_t> depths = {2,   100, 255, 256,  257,  300,   498,
                                                 499, 500, 600, 1000, 5000, 100000};
        int i = 0;
        for (std::size_t depth : depths) {
            for (int variant = 0; variant < 8; ++variant, ++i) {
                Case c;
                c.format = variant % 2 ? Format::yaml : Format::json;
                const bool objects = variant & 2;
                const bool closed = !(variant & 4);
                std::string open = objects ? (c.format == Format::json ? "{\"a\": " : "{a: ") : "[";
                std::string text;
                text.reserve(depth * (open.size() + 1) + 1);
                for (std::size_t d = 0; d < depth; ++d) text += open;
                text += "1";
                if (closed) text += std::string(depth, objects ? '}' : ']');
                if (objects) {
                    text = c.format == Format::json ? "{\"model\": " + text + "}"
                                                    : "model: " + text + "\n";
                }
                c.text = std::move(text);
                c.kind = "nesting " + std::to_string(depth) + (objects ? " objects" : " arrays") +
                         (closed ? "" : ", unclosed");
                run(c);
                if (QTest::currentTestFailed()) return;
            }
            // YAML block style: indentation instead of brackets (kept below ~1 MB of text).
            if (depth <= 1000) {
                Case c;
                c.format = Format::yaml;
                for (std::size_t d = 0; d < depth; ++d)
                    c.text += std::string(2 * d, ' ') + (fuzz.below(2) ? "a:\n" : "- \n");
                c.text += std::string(2 * depth, ' ') + "b: 1\n";
                c.kind = "block nesting " + std::to_string(depth);
                run(c);
                if (QTest::currentTestFailed()) return;
            }
        }
        // A deep override key and value.
        Case c{"deep override key", Format::json, "{}", {}};
        std::string key = "a";
        for (int d = 0; d < 60000; ++d) key += ".a";
        c.overrides = {key + "=1", "seed=" + std::string(100000, '[')};
        run(c);
    }

    void aliasBombs() {
        Fuzzer fuzz(kSeed + 2);
        for (int i = 0; i < 120; ++i) {
            const std::size_t levels = 2 + fuzz.below(12);
            const std::size_t width = 2 + fuzz.below(9);
            const bool maps = fuzz.below(2);
            Case c;
            c.format = Format::yaml;
            c.text = "a0: &a0 [lol, lol, lol]\n";
            for (std::size_t l = 1; l <= levels; ++l) {
                const std::string prev = "*a" + std::to_string(l - 1);
                c.text +=
                    "a" + std::to_string(l) + ": &a" + std::to_string(l) + (maps ? " {" : " [");
                for (std::size_t w = 0; w < width; ++w) {
                    if (w) c.text += ", ";
                    c.text += maps ? "k" + std::to_string(w) + ": " + prev : prev;
                }
                c.text += maps ? "}\n" : "]\n";
            }
            // Used inside a real section too, and sometimes mutated.
            c.text += "model: *a" + std::to_string(levels) + "\n";
            std::string how = "plain";
            if (fuzz.below(3) == 0) c.text = fuzz.mutate(c.text, how);
            c.kind = "alias bomb " + std::to_string(i) + ": " + std::to_string(width) + "^" +
                     std::to_string(levels) + (maps ? " maps, " : " lists, ") + how;
            run(c);
            if (QTest::currentTestFailed()) return;
        }
        // An anchor used inside itself, and one that is never defined.
        run({"self-referencing anchor", Format::yaml, "model: &a [1, *a]\n", {}});
        run({"self-referencing map", Format::yaml, "model: &a {x: *a}\n", {}});
        run({"unknown anchor", Format::yaml, "model: *nope\n", {}});
        run({"alias bomb in an override",
             Format::json,
             "{}",
             {"model=[&a [1,1,1,1,1,1,1,1,1,1], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], "
              "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], "
              "&e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e], "
              "&g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]]"}});
    }

    void hugeNumbers() {
        int i = 0;
        for (const auto& number : kHugeNumbers) {
            for (const auto& field : kNumericFields) {
                for (Format format : {Format::json, Format::yaml}) {
                    run({"huge number " + std::to_string(i++) + ": " + field,
                         format,
                         nested_field(field, number, format),
                         {}});
                    if (QTest::currentTestFailed()) return;
                }
                // The same through an override.
                run({"huge number override " + field, Format::json, "{}", {field + "=" + number}});
                if (QTest::currentTestFailed()) return;
            }
        }
    }

    void badOverrides() {
        Fuzzer fuzz(kSeed + 3);
        for (int i = 0; i < 400; ++i) {
            Case c{"", Format::json, *preset_text("tiny"), {}};
            const std::size_t n = 1 + fuzz.below(3);
            for (std::size_t k = 0; k < n; ++k) {
                std::string key = fuzz.pick(kNumericFields);
                std::string value = fuzz.pick(kHugeNumbers);
                std::string how;
                if (fuzz.below(2)) value = fuzz.mutate("{value: 10, unit: steps}", how);
                if (fuzz.below(4) == 0) key = fuzz.mutate(key, how);
                c.overrides.push_back((fuzz.below(2) ? "--" : "") + key + "=" + value);
            }
            c.kind = "overrides " + std::to_string(i);
            run(c);
            if (QTest::currentTestFailed()) return;
        }
    }

    void largeFiles() {
        // Many keys in one object (ordered_json looks keys up one by one: quadratic, minutes at
        // 4 MiB), a file over the size limit, a long scalar and a long key.
        std::string flat = "{";
        for (int k = 0; flat.size() < kMaxDocumentBytes / 4; ++k)
            flat += (k ? ",\"k" : "\"k") + std::to_string(k) + "\":1";
        flat += "}";
        run({"flat object, 1 MiB", Format::json, flat, {}});
        std::string yaml;
        for (int k = 0; yaml.size() < kMaxDocumentBytes / 16; ++k)
            yaml += "k" + std::to_string(k) + ": 1\n";
        run({"flat YAML map, 256 KiB", Format::yaml, yaml, {}});
        run({"over the limit", Format::json, std::string(kMaxDocumentBytes + 1, ' '), {}});
        run({"long scalar", Format::yaml, "seed: " + std::string(1 << 20, '7') + "\n", {}});
        run({"long key", Format::yaml, std::string(1 << 20, 'k') + ": 1\n", {}});
    }
};

QTEST_GUILESS_MAIN(TestConfigFuzz)
#include "test_config_fuzz.moc"
