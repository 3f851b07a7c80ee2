// lathe_tokenizer (torch-free): UTF-8 validation and lossy decoding as Rust does it, and a small
// hand-written byte-level BPE tokenizer.json whose ids are worked out by hand: merges by rank
// (leftmost on ties), GPT-2's pre-tokenizer regex, added tokens split out first (lstrip), the
// template's BOS, decoding, and the errors for files Lathe cannot read. (Parity with Hugging Face
// `tokenizers` on real files: tests/peer/check_tokenizers.py.)
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

#include "tests/engine/tokenizer/tiny_tokenizer.h"
#include "tests/error_of.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

using namespace lathe::tokenizer;

using lathe::testing::error_of;

using lathe::testing::tiny_tokenizer_json;

namespace {

// A byte-level BPE over 'a', 'b' and the space ('Ġ'), whole texts as one piece (ByteLevel without
// its regex), with merges for long runs and others drawn at random, in a random rank order (so
// a merge can make a pair that ranks below the one just merged).
struct RunsBpe {
    std::string json;
    std::vector<std::string> tokens;                          // by id
    std::vector<std::pair<std::string, std::string>> merges;  // by rank
};

RunsBpe runs_bpe(uint32_t seed) {
    RunsBpe b;
    uint32_t shifted = 256;  // GPT-2's table: bytes that are not printable move past 255
    for (int c = 0; c < 256; ++c) {
        const bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
        std::string t;
        append_utf8(t, printable ? static_cast<uint32_t>(c) : shifted++);
        b.tokens.push_back(t);
    }
    const std::string sp = "\xC4\xA0";  // 'Ġ', the space
    std::vector<std::pair<std::string, std::string>> merges = {
        {"a", "a"},    {"aa", "aa"}, {"aaaa", "aaaa"}, {"aa", "a"},  {sp, sp},   {sp + sp, sp + sp},
        {sp + sp, sp}, {sp, "a"},    {"a", "b"},       {"ab", "ab"}, {"b", "a"}, {"abab", "abab"}};
    std::vector<std::string> pool = {"a", "b", sp, "aa", "aaaa", sp + sp, "ab", "ba", "abab"};
    uint32_t x = seed;
    auto draw = [&](std::size_t n) {
        x = x * 1664525u + 1013904223u;
        return static_cast<std::size_t>(x >> 8) % n;
    };
    auto known = [&](const std::pair<std::string, std::string>& m) {
        return std::find(merges.begin(), merges.end(), m) != merges.end();
    };
    while (merges.size() < 60) {
        const std::pair<std::string, std::string> m{pool[draw(pool.size())],
                                                    pool[draw(pool.size())]};
        if (m.first.size() + m.second.size() > 16 || known(m)) continue;
        merges.push_back(m);
        if (std::find(pool.begin(), pool.end(), m.first + m.second) == pool.end())
            pool.push_back(m.first + m.second);
    }
    for (std::size_t i = merges.size() - 1; i > 0; --i) std::swap(merges[i], merges[draw(i + 1)]);
    b.merges = merges;
    for (const auto& [l, r] : merges)
        if (std::find(b.tokens.begin(), b.tokens.end(), l + r) == b.tokens.end())
            b.tokens.push_back(l + r);
    auto quoted = [](const std::string& t) {
        return "\"" + (t == "\"" ? "\\\"" : t == "\\" ? "\\\\" : t) + "\"";
    };
    std::string vocab, merge_list;
    for (std::size_t id = 0; id < b.tokens.size(); ++id)
        vocab += (id ? "," : "") + quoted(b.tokens[id]) + ":" + std::to_string(id);
    for (const auto& [l, r] : merges)
        merge_list += (merge_list.empty() ? "" : ",") + quoted(l + " " + r);
    b.json = R"({"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":false},)"
             R"("decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{)" +
             vocab + "},\"merges\":[" + merge_list + "]}}";
    return b;
}

// The merge loop as Lathe had it before issue 34: rescan every pair, merge the lowest rank
// (leftmost on ties), again until no pair has a merge. Quadratic, and plainly right.
std::vector<int64_t> rescanning_bpe(const RunsBpe& b, const std::string& text) {
    std::map<std::string, int64_t> id;
    for (std::size_t i = 0; i < b.tokens.size(); ++i) id.emplace(b.tokens[i], i);
    std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges;  // pair -> (rank, id)
    for (std::size_t r = 0; r < b.merges.size(); ++r) {
        const auto& [l, rr] = b.merges[r];
        merges.emplace((static_cast<uint64_t>(id.at(l)) << 32) | static_cast<uint64_t>(id.at(rr)),
                       std::make_pair(static_cast<int64_t>(r), id.at(l + rr)));
    }
    std::vector<int64_t> syms;
    for (const char c : text) syms.push_back(id.at(c == ' ' ? "\xC4\xA0" : std::string(1, c)));
    while (syms.size() > 1) {
        int64_t best_rank = std::numeric_limits<int64_t>::max(), best_id = -1;
        std::size_t best_pos = 0;
        for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
            const auto it = merges.find((static_cast<uint64_t>(syms[i]) << 32) |
                                        static_cast<uint64_t>(syms[i + 1]));
            if (it != merges.end() && it->second.first < best_rank) {
                best_rank = it->second.first;
                best_id = it->second.second;
                best_pos = i;
            }
        }
        if (best_id < 0) break;
        syms[best_pos] = best_id;
        syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    }
    return syms;
}

std::string repeated(const std::string& s, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += s;
    return out;
}

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string write(const std::string& name, const std::string& text) {
        std::string p = (dir_.path() + "/" + QString::fromStdString(name)).toStdString();
        std::ofstream(p) << text;
        return p;
    }

private Q_SLOTS:
    void utf8() {
        QVERIFY(!first_invalid_utf8("plain ascii é 😀"));
        QCOMPARE(*first_invalid_utf8("ab\xC3"), std::size_t{2});
        QCOMPARE(*first_invalid_utf8("a\xED\xA0\x80"), std::size_t{1});  // a surrogate
        // One U+FFFD per maximal invalid subsequence, as Rust's from_utf8_lossy.
        QCOMPARE(lossy_utf8("a\xE2\x82"
                            "b"),
                 std::string("a\xEF\xBF\xBD"
                             "b"));
        QCOMPARE(lossy_utf8("\xC0\xAF"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
        QCOMPARE(lossy_utf8("\xF0\x9F\x98"), std::string("\xEF\xBF\xBD"));
        QCOMPARE(lossy_utf8("ok"), std::string("ok"));
    }

    void bpeByHand() {
        const auto t = load_tokenizer(write("tiny.json", tiny_tokenizer_json()));
        QCOMPARE(t->vocab_size(), int64_t{262});
        QCOMPARE(t->bos_id().value_or(-1), int64_t{261});
        QCOMPARE(t->eos_id().value_or(-1), int64_t{260});  // a special "<eos>" is the EOS
        QVERIFY(t->id().rfind("fnv1a64:", 0) == 0);
        // "abc": ranks b c (0) < a b (1): a + bc, and "a bc" has no merge -> [97, 259].
        QCOMPARE(t->encode("abc"), (std::vector<int64_t>{97, 259}));
        // " ab": GPT-2's regex keeps the space with the word; a b (rank 1) goes before Ġ a
        // (rank 3), and "Ġ ab" has no merge.
        QCOMPARE(t->encode(" ab"), (std::vector<int64_t>{32, 256}));
        QCOMPARE(t->encode(" a"), (std::vector<int64_t>{258}));
        // "abab": one piece; a b twice (leftmost first), no further merge.
        QCOMPARE(t->encode("abab"), (std::vector<int64_t>{256, 256}));
        // Added tokens first; lstrip takes the spaces before "<eos>" with it.
        QCOMPARE(t->encode("ab  <eos>ab<s>"), (std::vector<int64_t>{256, 260, 256, 261}));
        QCOMPARE(t->encode("abc", true), (std::vector<int64_t>{261, 97, 259}));
        // Decoding: bytes back, special tokens as they are or skipped.
        QCOMPARE(t->decode({261, 258, 98, 260}), std::string("<s> ab<eos>"));
        QCOMPARE(t->decode({261, 258, 98, 260}, true), std::string(" ab"));
        const std::string text = "Grüße, 世界! 😀\t\n  x";
        QCOMPARE(t->decode(t->encode(text)), text);
        QVERIFY(error_of([&] { t->decode({5000}); }).find("not in the vocabulary") !=
                std::string::npos);
        QVERIFY(error_of([&] { t->encode("a\xFF"); }).find("not valid UTF-8 at byte 1") !=
                std::string::npos);
    }

    // Issue 34: merging rescanned every pair after each merge, so a long run of one character
    // took minutes. The ids stay those of the rescanning loop on long runs, repeated pairs and
    // random text, under merge orders where ranks and positions tie and interleave.
    void bpeLongRunsMergeAsBefore() {
        for (const uint32_t seed : {1u, 2u, 3u}) {
            const RunsBpe b = runs_bpe(seed);
            const auto t = load_tokenizer(write("runs.json", b.json));
            std::vector<std::string> texts;
            for (std::size_t n = 1; n <= 40; ++n) {
                texts.emplace_back(n, 'a');
                texts.emplace_back(n, ' ');
                texts.push_back(repeated("ab", n));
            }
            uint32_t x = seed;
            for (int k = 0; k < 40; ++k) {
                std::string text;
                while (text.size() < 2000) {
                    x = x * 1664525u + 1013904223u;
                    text += std::string(1 + (x >> 8) % (k % 2 ? 200 : 5), "ab "[(x >> 20) % 3]);
                }
                texts.push_back(text);
            }
            if (seed == 1) {
                texts.emplace_back(20000, 'a');
                texts.emplace_back(20000, ' ');
                texts.push_back(repeated("ab", 10000));
                texts.push_back(repeated("aab", 7000));
            }
            for (const auto& text : texts) {
                const auto ids = t->encode(text);
                QVERIFY2(ids == rescanning_bpe(b, text),
                         qPrintable(QString("seed %1, %2 bytes: %3...")
                                        .arg(seed)
                                        .arg(text.size())
                                        .arg(QString::fromStdString(text.substr(0, 40)))));
                QCOMPARE(t->decode(ids), text);
            }
        }
    }

    // A SentencePiece model Lathe trains (libsentencepiece) on generated text: lossless round
    // trips (byte fallback for characters it never saw), BOS/EOS, the kind and file name, and a
    // model folder's tokenizer found by name. (Parity with Python sentencepiece: check_data.py.)
    void sentencePiece() {
        std::vector<std::string> lines;
        const char* words[] = {"lathe", "turns", "wood", "round", "café",
                               "naïve", "the",   "a",    "42"};
        uint32_t x = 7;
        for (int i = 0; i < 3000; ++i) {
            std::string line;
            for (int w = 0; w < 8; ++w) {
                x = x * 1664525u + 1013904223u;
                line += std::string(words[(x >> 16) % 9]) + (w < 7 ? " " : "");
            }
            lines.push_back(line);
        }
        std::size_t next = 0;
        SentencePieceTrainOptions o;
        o.vocab_size = 300;
        o.threads = 1;
        const std::string model = train_sentencepiece(
            [&](std::string& s) {
                if (next >= lines.size()) return false;
                s = lines[next++];
                return true;
            },
            o);
        QCOMPARE(canonical_file_name(model), std::string("tokenizer.model"));
        QCOMPARE(canonical_file_name("  {\"model\": {}}"), std::string("tokenizer.json"));
        QDir().mkpath(dir_.path() + "/sp");
        const std::string path = write("sp/tokenizer.model", model);
        QCOMPARE(find_tokenizer_file((dir_.path() + "/sp").toStdString()), path);
        QCOMPARE(find_tokenizer_file(dir_.path().toStdString() + "/nothing"), std::string());
        const auto t = load_tokenizer(path);
        QCOMPARE(t->vocab_size(), int64_t{300});
        QCOMPARE(t->bos_id().value_or(-1), int64_t{1});
        QCOMPARE(t->eos_id().value_or(-1), int64_t{2});
        QCOMPARE(t->file_name(), std::string("tokenizer.model"));
        QCOMPARE(t->id(), tokenizer_file_id(path));
        for (const std::string& text :
             {std::string("the lathe turns wood"), std::string("  two  spaces\tand a tab"),
              std::string("unseen: ЖЗИ 😀 ẞ"), lines[5]}) {
            const auto ids = t->encode(text);
            QCOMPARE(t->decode(ids), text);
            const auto with_bos = t->encode(text, true);
            QCOMPARE(with_bos.front(), int64_t{1});
            QCOMPARE(std::vector<int64_t>(with_bos.begin() + 1, with_bos.end()), ids);
        }
        QVERIFY(t->encode("the lathe").size() < std::string("the lathe").size());  // it merged
        QVERIFY(error_of([&] { t->decode({300}); }).find("outside the vocabulary") !=
                std::string::npos);
        o.model_type = "wordpiece";
        QVERIFY(error_of([&] {
                    train_sentencepiece([](std::string&) { return false; }, o);
                }).find("use bpe or unigram") != std::string::npos);
    }

    void filesLatheCannotRead_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("empty") << ""
                               << "not a tokenizer file";
        QTest::newRow("unigram") << R"({"model":{"type":"Unigram"}})"
                                 << "model.type is \"Unigram\"";
        QTest::newRow("no byte level")
            << R"({"model":{"type":"BPE","vocab":{},"merges":[]},"pre_tokenizer":null})"
            << "no ByteLevel step";
        // NFC, NFD, NFKC, NFKD and Sequence are implemented (utf8proc); others are refused.
        QTest::newRow("normalizer")
            << R"({"model":{"type":"BPE","vocab":{},"merges":[]},"normalizer":{"type":"Lowercase"}})"
            << "normalizer \"Lowercase\"";
        QTest::newRow("normalizer in a sequence")
            << R"({"model":{"type":"BPE","vocab":{},"merges":[]},"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Strip"}]}})"
            << "normalizer \"Strip\"";
        QTest::newRow("metaspace")
            << R"({"model":{"type":"BPE","vocab":{},"merges":[]},"pre_tokenizer":{"type":"Metaspace"}})"
            << "pre_tokenizer \"Metaspace\"";
        QTest::newRow("merge of unknowns")
            << R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a z"]}})"
            << "merge 0 (\"a\", \"z\")";
    }
    void filesLatheCannotRead() {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        const std::string p = write("bad.json", text.toStdString());
        const std::string err = error_of([&] { load_tokenizer(p); });
        QVERIFY2(err.find(p) == 0 && err.find(expected.toStdString()) != std::string::npos,
                 err.c_str());
    }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
