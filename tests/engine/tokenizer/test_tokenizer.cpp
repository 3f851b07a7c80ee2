// lathe_tokenizer (torch-free): UTF-8 validation and lossy decoding as Rust does it, and a small
// hand-written byte-level BPE tokenizer.json whose ids are worked out by hand: merges by rank
// (leftmost on ties), GPT-2's pre-tokenizer regex, added tokens split out first (lstrip), the
// template's BOS, decoding, and the errors for files Lathe cannot read. (Parity with Hugging Face
// `tokenizers` on real files: tests/peer/check_tokenizers.py.)
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <functional>

using namespace lathe::tokenizer;

using lathe::testing::error_of;

namespace {

// Byte-level vocabulary: the 256 byte characters (GPT-2's table), then merges. 'Ġ' is the space.
std::string tiny_tokenizer_json() {
    std::string vocab;
    int id = 0;
    auto add = [&](const std::string& t) {
        vocab += (vocab.empty() ? "" : ",") + std::string("\"") + t + "\":" + std::to_string(id++);
    };
    // Ids 0..255: each byte's character in GPT-2's table (printable bytes are themselves).
    std::vector<std::string> chars(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + n++;
        append_utf8(chars[b], cp);
    }
    for (int b = 0; b < 256; ++b) {
        std::string c = chars[b];
        if (c == "\"") c = "\\\"";
        if (c == "\\") c = "\\\\";
        add(c);
    }
    add("ab");   // 256
    add("abc");  // 257
    add("\xC4\xA0"
        "a");   // 258: "Ġa"
    add("bc");  // 259
    return R"({"added_tokens":[{"id":260,"content":"<eos>","special":true,"lstrip":true},
               {"id":261,"content":"<s>","special":true}],
        "normalizer":null,
        "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
        "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},
               {"Sequence":{"id":"A"}}],"special_tokens":{"<s>":{"id":"<s>","ids":[261]}}},
        "decoder":{"type":"ByteLevel"},
        "model":{"type":"BPE","vocab":{)" +
           vocab + R"(},"merges":["b c","a b","ab c","Ġ a"]}})";
}

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string write(const std::string& name, const std::string& text) {
        const std::string p = (dir_.path() + "/" + QString::fromStdString(name)).toStdString();
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
        QTest::newRow("normalizer")
            << R"({"model":{"type":"BPE","vocab":{},"merges":[]},"normalizer":{"type":"NFKC"}})"
            << "normalizer \"NFKC\"";
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
