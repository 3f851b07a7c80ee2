// lathe_prepare (torch-free): reading documents from text, JSONL, .gz and .zst files (order,
// hidden files, empty documents, invalid UTF-8 with offsets, bad lines and truncated streams),
// prepare-data's shards and manifest with a hand-checkable tokenizer, its refusals, and
// read_manifest's checks. (Parity with Python tokenizers, interrupt and resume, and OLMo-core
// reading the files: tests/peer/check_data.py.)
#include "engine/prepare/documents.h"
#include "engine/prepare/prepare.h"
#include "engine/token_files/manifest.h"
#include "engine/tokenizer/tokenizer.h"

#include "tests/engine/tokenizer/tiny_tokenizer.h"
#include "tests/error_of.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>

using namespace lathe::prepare;
using lathe::testing::error_of;
using lathe::token_files::has_manifest;
using lathe::token_files::Manifest;
using lathe::token_files::manifest_json;
using lathe::token_files::read_manifest;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint16_t> read_u16(const std::string& path) {
    const std::string b = slurp(path);
    std::vector<uint16_t> v(b.size() / 2);
    std::memcpy(v.data(), b.data(), v.size() * 2);
    return v;
}

}  // namespace

class TestPrepare : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    std::string path(const std::string& name) const {
        return (dir_.path() + "/" + QString::fromStdString(name)).toStdString();
    }
    std::string write(const std::string& name, const std::string& bytes) {
        std::string p = path(name);
        std::filesystem::create_directories(std::filesystem::path(p).parent_path());
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
    std::string write_gz(const std::string& name, const std::string& bytes) {
        std::string p = path(name);
        gzFile f = gzopen(p.c_str(), "wb");
        gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
        gzclose(f);
        return p;
    }
    std::string write_zst(const std::string& name, const std::string& bytes) {
        std::string out(ZSTD_compressBound(bytes.size()), '\0');
        out.resize(ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3));
        return write(name, out);
    }
    std::vector<std::string> read_all(const std::vector<std::string>& paths,
                                      DocumentReader** keep = nullptr) {
        static std::unique_ptr<DocumentReader> reader;
        reader = std::make_unique<DocumentReader>(list_sources(paths));
        std::vector<std::string> docs;
        Document d;
        while (reader->next(d)) docs.push_back(d.text);
        if (keep) *keep = reader.get();
        return docs;
    }

private Q_SLOTS:
    void readsEveryKindInOrder() {
        write("in/a/one.txt", "first document\nwith two lines");
        write("in/a/.hidden.txt", "never read");
        write("in/a/empty.txt", "");
        write("in/b.jsonl",
              "{\"text\": \"second\"}\n\n{\"text\": \"\"}\r\n{\"text\": \"third\", \"x\": 1}");
        write_gz("in/c.jsonl.gz", "{\"text\": \"fourth\"}\n{\"text\": \"fifth\"}\n");
        write_zst("in/d.json.zst", "{\"text\": \"sixth \\u00e9\"}\n");
        DocumentReader* r = nullptr;
        const auto docs = read_all({path("in")}, &r);
        QCOMPARE(docs, (std::vector<std::string>{"first document\nwith two lines", "second",
                                                 "third", "fourth", "fifth", "sixth \xC3\xA9"}));
        QCOMPARE(r->sources().size(), std::size_t{5});  // the hidden file is skipped
        // Empty documents (empty.txt, and b.jsonl's "") are not counted: the counts add up to
        // the documents read.
        QCOMPARE(r->documents_per_source(), (std::vector<uint64_t>{0, 1, 2, 2, 1}));
        QCOMPARE(r->bytes_consumed(), r->bytes_total());
        QCOMPARE(r->utf8_problem_count(), uint64_t{0});
        QCOMPARE(r->sources()[3].compression, Compression::gzip);
        QCOMPARE(r->sources()[4].format, SourceFormat::jsonl);
    }

    void invalidUtf8IsReplacedAndReported() {
        write("bad/t.txt", std::string("ok \xFF\xFE then \xC3", 12));
        write("bad/u.jsonl", std::string("{\"text\": \"a\"}\n{\"text\": \"b\x80\"}\n"));
        DocumentReader* r = nullptr;
        const auto docs = read_all({path("bad")}, &r);
        QCOMPARE(docs[0], std::string("ok \xEF\xBF\xBD\xEF\xBF\xBD then \xEF\xBF\xBD"));
        QCOMPARE(docs[2], std::string("b\xEF\xBF\xBD"));
        QCOMPARE(r->utf8_problem_count(), uint64_t{4});
        QCOMPARE(r->utf8_problems()[0].offset, uint64_t{3});
        QCOMPARE(r->utf8_problems()[1].offset, uint64_t{4});
        QCOMPARE(r->utf8_problems()[2].offset, uint64_t{11});
        // In the JSONL file: line 2 starts at byte 14; the bad byte is 11 bytes into it.
        QCOMPARE(r->utf8_problems()[3].offset, uint64_t{25});
        QVERIFY(r->utf8_problems()[3].file.find("u.jsonl") != std::string::npos);
    }

    // Issue 34: a warning per invalid place gave 335,250 lines for 28 files. One call per file
    // now, once the file is read, with the count and the first place; the manifest's list of
    // places is as before.
    void invalidUtf8IsSummedUpPerFile() {
        std::string binary;
        for (int i = 0; i < 5000; ++i) binary += "ok\xFF";
        write("many/a.txt", binary);
        write("many/b.txt", "clean text");
        write("many/c.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\x80\"}\n{\"text\": \"\xC3\"}\n");
        write_gz("many/d.txt.gz", "fine\xFE");
        auto reader = std::make_unique<DocumentReader>(list_sources({path("many")}));
        std::vector<Utf8Problem> calls;
        reader->on_problem = [&](const Utf8Problem& p) { calls.push_back(p); };
        Document d;
        std::size_t docs = 0;
        while (reader->next(d)) ++docs;
        QCOMPARE(docs, std::size_t{6});
        QCOMPARE(calls.size(), std::size_t{3});
        QCOMPARE(calls[0].file, path("many/a.txt"));
        QCOMPARE(calls[0].count, uint64_t{5000});
        QCOMPARE(calls[0].offset, uint64_t{2});
        QCOMPARE(calls[1].file, path("many/c.jsonl"));
        QCOMPARE(calls[1].count, uint64_t{2});
        QCOMPARE(calls[1].offset, uint64_t{25});  // line 2 starts at byte 14
        QCOMPARE(calls[2].file, path("many/d.txt.gz"));
        QCOMPARE(calls[2].count, uint64_t{1});
        QCOMPARE(reader->utf8_problem_count(), uint64_t{5003});
        QCOMPARE(reader->utf8_problems().size(), DocumentReader::kMaxProblems);
        QCOMPARE(describe_utf8_problem(calls[0]),
                 path("many/a.txt") +
                     ": invalid UTF-8 at 5000 places, the first at byte 2 (replaced with U+FFFD)");
        QCOMPARE(describe_utf8_problem(calls[2]),
                 path("many/d.txt.gz") + ": invalid UTF-8 at byte 4 (replaced with U+FFFD)");

        // prepare-data passes the same calls on, and counts every place in the manifest.
        PrepareOptions o;
        o.paths = {path("many")};
        o.tokenizer = write("tiny5.json", lathe::testing::tiny_tokenizer_json());
        o.out = path("many-out");
        o.threads = 2;
        std::vector<Utf8Problem> prepared;
        o.on_problem = [&](const Utf8Problem& p) { prepared.push_back(p); };
        const auto m = prepare_data(o);
        QCOMPARE(prepared.size(), std::size_t{3});
        QCOMPARE(m.invalid_utf8.count, int64_t{5003});
    }

    // Issue 34: an empty JSONL document counted for its source in manifest.json but not in the
    // total. Empty documents are skipped and counted nowhere: the sources, the shards and the
    // total agree.
    void manifestCountsAgree() {
        write("counts/a.jsonl", "{\"text\": \"ab\"}\n{\"text\": \"\"}\n\n{\"text\": \"abc\"}\n");
        write("counts/b.txt", "");
        write("counts/c.txt", "bc");
        PrepareOptions o;
        o.paths = {path("counts")};
        o.tokenizer = write("tiny6.json", lathe::testing::tiny_tokenizer_json());
        o.out = path("counts-out");
        o.shard_bytes = 8;
        const auto m = prepare_data(o);
        QCOMPARE(m.documents, int64_t{3});
        int64_t in_sources = 0, in_shards = 0;
        for (const auto& s : m.sources) in_sources += s.documents;
        for (const auto& s : m.shards) in_shards += s.documents;
        QCOMPARE(in_sources, int64_t{3});
        QCOMPARE(in_shards, int64_t{3});
        QCOMPARE(m.sources[0].documents, int64_t{2});
        QCOMPARE(m.sources[1].documents, int64_t{0});
    }

    void badInputsAreNamed() {
        QVERIFY(error_of([&] { list_sources({path("nope")}); }).find("no such file or folder") !=
                std::string::npos);
        QDir().mkpath(dir_.path() + "/emptydir");
        QVERIFY(error_of([&] { list_sources({path("emptydir")}); }).find("folder holds no files") !=
                std::string::npos);
        write("j/x.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
        QCOMPARE(error_of([&] { read_all({path("j/x.jsonl")}); }),
                 path("j/x.jsonl") + ":2: no \"text\" string field");
        write("j2/x.jsonl", "[1, 2]\n");
        QVERIFY(error_of([&] { read_all({path("j2/x.jsonl")}); }).find(":1: not a JSON object") !=
                std::string::npos);
        std::string gz = slurp(write_gz("t.jsonl.gz", std::string(5000, 'x')));
        write("trunc.jsonl.gz", gz.substr(0, gz.size() / 2));
        QVERIFY(error_of([&] { read_all({path("trunc.jsonl.gz")}); }).find("trunc.jsonl.gz") !=
                std::string::npos);
        write("junk.txt.zst", "this is not zstd data at all");
        QVERIFY(error_of([&] { read_all({path("junk.txt.zst")}); }).find("corrupt zstd") !=
                std::string::npos);
    }

    void preparesShardsAndManifest() {
        const std::string tok = write("tiny.json", lathe::testing::tiny_tokenizer_json());
        // By the tiny tokenizer's merges (b c first): "abc" -> [97 259], "ab" -> [256],
        // " ab" -> [32 256]; EOS = 260.
        write("p/1.txt", "abc");
        write("p/2.txt", "ab ab");
        write("p/3.jsonl", "{\"text\": \"abcabc\"}\n{\"text\": \"bc\"}\n");
        PrepareOptions o;
        o.paths = {path("p")};
        o.tokenizer = tok;
        o.out = path("p-out");
        o.shard_bytes = 8;  // 4 uint16 tokens
        o.threads = 2;
        const auto m = prepare_data(o);
        // Documents: [97 259 260] [256 32 256 260] [97 259 97 259 260] [259 260]; a document
        // never crosses a shard, and a shard closes before it would pass 8 bytes (one longer
        // document has a shard of its own).
        QCOMPARE(m.shards.size(), std::size_t{4});
        QCOMPARE(read_u16(path("p-out/part-00000.npy")), (std::vector<uint16_t>{97, 259, 260}));
        QCOMPARE(read_u16(path("p-out/part-00001.npy")),
                 (std::vector<uint16_t>{256, 32, 256, 260}));
        QCOMPARE(read_u16(path("p-out/part-00002.npy")),
                 (std::vector<uint16_t>{97, 259, 97, 259, 260}));
        QCOMPARE(read_u16(path("p-out/part-00003.npy")), (std::vector<uint16_t>{259, 260}));
        QCOMPARE(m.tokens, int64_t{14});
        QCOMPARE(m.documents, int64_t{4});
        QCOMPARE(m.dtype, std::string("uint16"));
        QCOMPARE(m.tokenizer.padded_vocab_size, int64_t{384});
        QCOMPARE(slurp(path("p-out/tokenizer.json")), slurp(tok));
        QVERIFY(!std::filesystem::exists(path("p-out/.prepare-state.json")));

        const Manifest read = read_manifest(path("p-out"));
        QCOMPARE(read.tokens, int64_t{14});
        QCOMPARE(manifest_json(read), manifest_json(m));
        QCOMPARE(read.tokenizer.id, lathe::tokenizer::tokenizer_file_id(tok));
        QVERIFY(has_manifest(path("p-out")));
        QVERIFY(has_manifest(path("p-out/manifest.json")));

        // Run again: the same settings are done already; other settings are refused.
        QCOMPARE(manifest_json(prepare_data(o)), manifest_json(m));
        o.shard_bytes = 16;
        QVERIFY(error_of([&] { prepare_data(o); }).find("other settings (shard_bytes)") !=
                std::string::npos);

        // uint32 on request.
        o.out = path("p-out32");
        o.dtype = "uint32";
        const auto m32 = prepare_data(o);
        QCOMPARE(slurp(path("p-out32/part-00000.npy")).size(), std::size_t{12});
        QCOMPARE(read_manifest(path("p-out32")).element_size(), 4);
        QCOMPARE(m32.tokens, m.tokens);
    }

    // `prepare-data . --out ./tokens`: the output folder's own files are never input, so a
    // second run finds the same settings.
    void outputInsideInput() {
        const std::string tok = write("tiny4.json", lathe::testing::tiny_tokenizer_json());
        write("self/1.txt", "abcabc");
        PrepareOptions o;
        o.paths = {path("self")};
        o.tokenizer = tok;
        o.out = path("self/tokens");
        const auto m = prepare_data(o);
        QCOMPARE(m.sources.size(), std::size_t{1});
        QCOMPARE(manifest_json(prepare_data(o)), manifest_json(m));
    }

    void refusals() {
        const std::string tok = write("tiny2.json", lathe::testing::tiny_tokenizer_json());
        write("r/1.txt", "abc");
        PrepareOptions o;
        o.paths = {path("r")};
        o.tokenizer = tok;
        o.out = path("r-out");
        o.dtype = "uint8";
        QVERIFY(error_of([&] { prepare_data(o); }).find("use uint16 or uint32") !=
                std::string::npos);
        o.dtype.reset();
        o.eos_id = 9999;
        QVERIFY(error_of([&] { prepare_data(o); }).find("outside the vocabulary") !=
                std::string::npos);
        o.eos_id.reset();
        write("r-busy/keep.txt", "mine");
        o.out = path("r-busy");
        QVERIFY(error_of([&] { prepare_data(o); }).find("not empty") != std::string::npos);
        QCOMPARE(slurp(path("r-busy/keep.txt")), std::string("mine"));
        write("r-empty/e.txt", "");
        o.paths = {path("r-empty")};
        o.out = path("r-out2");
        QVERIFY(error_of([&] { prepare_data(o); }).find("no text") != std::string::npos);
        o.paths = {path("r")};
        o.tokenizer = write("nottok.bin", std::string("\x01\x02garbage", 9));
        QVERIFY(error_of([&] { prepare_data(o); })
                    .find("neither a Hugging Face tokenizer.json nor "
                          "a SentencePiece model") != std::string::npos);
    }

    void manifestChecks() {
        const std::string tok = write("tiny3.json", lathe::testing::tiny_tokenizer_json());
        write("m/1.txt", "abcabc");
        PrepareOptions o;
        o.paths = {path("m")};
        o.tokenizer = tok;
        o.out = path("m-out");
        prepare_data(o);
        // A shard that lost bytes is named with what the manifest expected.
        const std::string shard = path("m-out/part-00000.npy");
        const std::string bytes = slurp(shard);
        write("m-out/part-00000.npy", bytes.substr(0, bytes.size() - 2));
        QVERIFY(error_of([&] { read_manifest(path("m-out")); }).find("part-00000.npy: 8 bytes") !=
                std::string::npos);
        write("m-out/part-00000.npy", bytes);
        std::filesystem::remove(shard);
        QVERIFY(error_of([&] { read_manifest(path("m-out")); }).find("is missing") !=
                std::string::npos);
        write("m-bad/manifest.json", "{\"format\": \"something else\"}");
        QVERIFY(error_of([&] { read_manifest(path("m-bad")); }).find("no \"version\"") !=
                    std::string::npos ||
                error_of([&] { read_manifest(path("m-bad")); }).find("format is not") !=
                    std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestPrepare)
#include "test_prepare.moc"
