// lathe_sinks: CRC-32C, exact JSONL/CSV text, TensorBoard files checked by an independent reader,
// failure injection, the JSONL reader and AsyncSinkWriter.
#include "engine/run_folder/crc32c.h"
#include "engine/sinks/async_sink_writer.h"
#include "engine/sinks/csv_sink.h"
#include "engine/sinks/jsonl_reader.h"
#include "engine/sinks/jsonl_sink.h"
#include "engine/sinks/run_sinks.h"
#include "engine/sinks/tensorboard_sink.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

using namespace lathe::sinks;
using lathe::run_folder::crc32c;
using lathe::run_folder::mask_crc;
using lathe::run_folder::unmask_crc;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(std::string)

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void append_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string path_in(const QTemporaryDir& dir, const char* name) {
    return dir.filePath(QString::fromLatin1(name)).toStdString();
}

// Two records with awkward names (comma, quotes), NaN and infinity.
std::vector<MetricRecord> sample_records() {
    MetricRecord a;
    a.step = 1;
    a.tokens = 4096;
    a.wall_time = 1700000000.25;
    a.add("train/CE loss", 2.5);
    a.add("optim/LR", 0.0003);
    a.add("odd, \"name\" (x/y)", kNaN);
    MetricRecord b;
    b.step = 2;
    b.tokens = 8192;
    b.wall_time = 1700000001.5;
    b.add("train/CE loss", 2.25);
    b.add("throughput/device/TPS", 12345);
    b.add("odd, \"name\" (x/y)", -kInf);
    return {a, b};
}

// ---- An independent TFRecord/Event reader: bitwise CRC-32C, hand-decoded protobuf ----------

std::uint32_t bitwise_crc32c(const std::string& data) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (unsigned char byte : data) {
        c ^= byte;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

std::uint32_t masked(std::uint32_t c) {
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::uint64_t read_le(const std::string& s, std::size_t pos, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[pos + i])) << (8 * i);
    }
    return v;
}

struct Cursor {
    const std::string& s;
    std::size_t pos;
    std::size_t end;

    bool done() const { return pos >= end; }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (pos >= end) throw std::runtime_error("truncated varint");
            auto b = static_cast<unsigned char>(s[pos++]);
            v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        throw std::runtime_error("varint too long");
    }
    std::uint64_t fixed(int bytes) {
        if (pos + bytes > end) throw std::runtime_error("truncated fixed field");
        auto v = read_le(s, pos, bytes);
        pos += bytes;
        return v;
    }
    std::string bytes() {
        auto n = varint();
        if (pos + n > end) throw std::runtime_error("truncated length-delimited field");
        std::string v = s.substr(pos, n);
        pos += n;
        return v;
    }
    void skip(std::uint32_t wire_type) {
        switch (wire_type) {
            case 0:
                varint();
                break;
            case 1:
                fixed(8);
                break;
            case 2:
                bytes();
                break;
            case 5:
                fixed(4);
                break;
            default:
                throw std::runtime_error("bad wire type");
        }
    }
};

struct DecodedEvent {
    double wall_time = 0;
    std::int64_t step = 0;
    std::string file_version;
    std::vector<std::pair<std::string, float>> values;
};

DecodedEvent decode_event(const std::string& data) {
    DecodedEvent e;
    Cursor c{data, 0, data.size()};
    while (!c.done()) {
        auto key = c.varint();
        auto field = key >> 3;
        auto wire = static_cast<std::uint32_t>(key & 7);
        if (field == 1 && wire == 1) {
            auto bits = c.fixed(8);
            std::memcpy(&e.wall_time, &bits, 8);
        } else if (field == 2 && wire == 0) {
            e.step = static_cast<std::int64_t>(c.varint());
        } else if (field == 3 && wire == 2) {
            e.file_version = c.bytes();
        } else if (field == 5 && wire == 2) {
            std::string summary = c.bytes();
            Cursor sc{summary, 0, summary.size()};
            while (!sc.done()) {
                auto skey = sc.varint();
                if ((skey >> 3) != 1 || (skey & 7) != 2) {
                    sc.skip(static_cast<std::uint32_t>(skey & 7));
                    continue;
                }
                std::string value = sc.bytes();
                Cursor vc{value, 0, value.size()};
                std::string tag;
                float simple = std::nanf("");
                bool has_simple = false;
                while (!vc.done()) {
                    auto vkey = vc.varint();
                    if (vkey == ((1 << 3) | 2)) {
                        tag = vc.bytes();
                    } else if (vkey == ((2 << 3) | 5)) {
                        auto bits = static_cast<std::uint32_t>(vc.fixed(4));
                        std::memcpy(&simple, &bits, 4);
                        has_simple = true;
                    } else {
                        vc.skip(static_cast<std::uint32_t>(vkey & 7));
                    }
                }
                if (!has_simple) throw std::runtime_error("Summary.Value without simple_value");
                e.values.emplace_back(tag, simple);
            }
        } else {
            c.skip(wire);
        }
    }
    return e;
}

// Every record of an events file; fails the test on a bad CRC. Stops at a truncated last record,
// as TensorBoard does.
std::vector<DecodedEvent> read_events(const std::string& path) {
    const std::string s = read_file(path);
    std::vector<DecodedEvent> events;
    std::size_t pos = 0;
    while (pos + 12 <= s.size()) {
        const std::string len_bytes = s.substr(pos, 8);
        const auto len = read_le(s, pos, 8);
        const auto len_crc = static_cast<std::uint32_t>(read_le(s, pos + 8, 4));
        if (len_crc != masked(bitwise_crc32c(len_bytes))) {
            throw std::runtime_error("bad length CRC at byte " + std::to_string(pos));
        }
        if (pos + 12 + len + 4 > s.size()) break;  // half-written record
        const std::string data = s.substr(pos + 12, len);
        const auto data_crc = static_cast<std::uint32_t>(read_le(s, pos + 12 + len, 4));
        if (data_crc != masked(bitwise_crc32c(data))) {
            throw std::runtime_error("bad data CRC at byte " + std::to_string(pos));
        }
        events.push_back(decode_event(data));
        pos += 12 + len + 4;
    }
    if (pos != s.size()) throw std::runtime_error("trailing bytes after the last record");
    return events;
}

std::string only_events_file(const std::string& dir) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().filename().string().find("tfevents") != std::string::npos) {
            found.push_back(entry.path().string());
        }
    }
    if (found.size() != 1) throw std::runtime_error("expected one events file");
    return found[0];
}

// ---- Sinks for testing the base class and the writer ----------------------------------------

// Remembers steps; optionally throws on a given write, or sleeps per write (a slow disk).
class MemorySink final : public MetricSink {
public:
    explicit MemorySink(int throw_on_write = -1, int sleep_ms = 0)
        : MetricSink("memory"), throw_on_write_(throw_on_write), sleep_ms_(sleep_ms) {}
    ~MemorySink() override { close(); }

    std::vector<std::int64_t> steps;
    int opens = 0;
    int closes = 0;

protected:
    void do_open() override { ++opens; }
    void do_write(const MetricRecord& record) override {
        if (static_cast<int>(steps.size()) == throw_on_write_) {
            throw std::runtime_error("simulated failure");
        }
        if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
        steps.push_back(record.step);
    }
    void do_flush() override {}
    void do_close() override { ++closes; }

private:
    int throw_on_write_;
    int sleep_ms_;
};

std::unique_ptr<MetricSink> make_sink(const std::string& kind, const std::string& path) {
    if (kind == "jsonl") return std::make_unique<JsonlSink>(path);
    if (kind == "csv") return std::make_unique<CsvSink>(path);
    return std::make_unique<TensorBoardSink>(path);
}

}  // namespace

class TestSinks : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // ---- CRC-32C -------------------------------------------------------------------------
    void crc32c_known_values_data() {
        QTest::addColumn<std::string>("data");
        QTest::addColumn<quint32>("crc");
        std::string ascending, descending;
        for (int i = 0; i < 32; ++i) {
            ascending += static_cast<char>(i);
            descending += static_cast<char>(31 - i);
        }
        // The check value, and RFC 3720 (iSCSI) appendix B.4.
        QTest::newRow("123456789") << std::string("123456789") << quint32(0xE3069283);
        QTest::newRow("empty") << std::string() << quint32(0);
        QTest::newRow("32 zeros") << std::string(32, '\0') << quint32(0x8A9136AA);
        QTest::newRow("32 0xFF") << std::string(32, '\xFF') << quint32(0x62A8AB43);
        QTest::newRow("0..31") << ascending << quint32(0x46DD794E);
        QTest::newRow("31..0") << descending << quint32(0x113FDB5C);
    }
    void crc32c_known_values() {
        QFETCH(std::string, data);
        QFETCH(quint32, crc);
        QCOMPARE(crc32c(data), crc);
        QCOMPARE(bitwise_crc32c(data), crc);  // the test's own reader agrees
    }

    void crc32c_continues() {
        std::string text = "The quick brown fox jumps over the lazy dog";
        for (std::size_t cut = 0; cut <= text.size(); ++cut) {
            QCOMPARE(crc32c(text.substr(cut), crc32c(text.substr(0, cut))), crc32c(text));
        }
    }

    void masked_crc() {
        QCOMPARE(mask_crc(0xE3069283u), 0xC78AB0E5u);
        QCOMPARE(mask_crc(0u), 0xA282EAD8u);
        for (std::uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) {
            QCOMPARE(unmask_crc(mask_crc(c)), c);
            QCOMPARE(mask_crc(c), masked(c));
        }
    }

    // ---- JSONL -------------------------------------------------------------------------------
    void jsonl_exact_content() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        {
            JsonlSink sink(path);
            for (const auto& r : sample_records()) sink.write(r);
            QVERIFY(!sink.failed());
            QCOMPARE(sink.records_written(), std::uint64_t(2));
        }
        const std::string want =
            "{\"step\":1,\"tokens\":4096,\"wall_time\":1700000000.25,\"values\":{\"train/CE "
            "loss\":2.5,\"optim/LR\":3e-04,\"odd, \\\"name\\\" (x/y)\":null}}"
            "\n"
            "{\"step\":2,\"tokens\":8192,\"wall_time\":1700000001.5,\"values\":{\"train/CE "
            "loss\":2.25,\"throughput/device/TPS\":12345,\"odd, \\\"name\\\" (x/y)\":null}}"
            "\n";
        QCOMPARE(read_file(path), want);
    }

    void jsonl_escapes_names() {
        MetricRecord r;
        r.step = -3;
        r.tokens = 5'000'000'000LL;
        r.wall_time = 0.1;
        r.add("tab\there \\ \"q\" \x01 caf\xC3\xA9", 1e-300);
        QCOMPARE(JsonlSink::format(r),
                 std::string("{\"step\":-3,\"tokens\":5000000000,\"wall_time\":0.1,\"values\":{"
                             "\"tab\\there \\\\ \\\"q\\\" \\u0001 café\":1e-300}}"
                             "\n"));
        auto back = parse_jsonl_metric_line(JsonlSink::format(r));
        QVERIFY(back);
        QCOMPARE(back->values.at(0).first, r.values.at(0).first);
        QCOMPARE(back->values.at(0).second, 1e-300);
        QCOMPARE(back->tokens, r.tokens);
    }

    void jsonl_round_trip() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        std::vector<MetricRecord> records;
        for (int i = 0; i < 100; ++i) {
            MetricRecord r;
            r.step = i;
            r.tokens = i * 1000;
            r.wall_time = 1700000000.0 + i / 3.0;
            r.add("z/last first", std::exp(-i / 7.0));  // insertion order, not sorted
            r.add("a/first", i % 10 == 0 ? kNaN : 1.0 / (i + 3));
            records.push_back(r);
        }
        {
            JsonlSink sink(path);
            for (const auto& r : records) sink.write(r);
        }
        std::size_t bad = 99;
        auto back = read_jsonl_metrics(path, &bad);
        QCOMPARE(bad, std::size_t(0));
        QCOMPARE(back.size(), records.size());
        for (std::size_t i = 0; i < records.size(); ++i) {
            QCOMPARE(back[i].step, records[i].step);
            QCOMPARE(back[i].tokens, records[i].tokens);
            QCOMPARE(back[i].wall_time, records[i].wall_time);  // exact: shortest round trip
            QCOMPARE(back[i].values.size(), std::size_t(2));
            QCOMPARE(back[i].values[0].first, std::string("z/last first"));
            QCOMPARE(back[i].values[0].second, records[i].values[0].second);
            if (std::isnan(records[i].values[1].second)) {
                QVERIFY(std::isnan(back[i].values[1].second));
            } else {
                QCOMPARE(back[i].values[1].second, records[i].values[1].second);
            }
        }
    }

    void jsonl_reader_half_written_last_line() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        JsonlSink sink(path);
        auto records = sample_records();
        sink.write(records[0]);
        sink.write(records[1]);  // flushed: visible while the sink is open
        const auto complete_size = fs::file_size(path);
        append_file(path, "{\"step\":3,\"tokens\":12288,\"wall_ti");

        std::size_t bad = 99;
        auto all = read_jsonl_metrics(path, &bad);
        QCOMPARE(all.size(), std::size_t(2));
        QCOMPARE(bad, std::size_t(0));

        JsonlChunk chunk = read_jsonl_metrics_from(path, 0);
        QCOMPARE(chunk.records.size(), std::size_t(2));
        QCOMPARE(chunk.next_offset, std::uint64_t(complete_size));

        // The writer finishes the line; following from next_offset gives just the new record.
        append_file(path, "me\":3.5,\"values\":{\"x\":1}}");
        chunk = read_jsonl_metrics_from(path, chunk.next_offset);
        QCOMPARE(chunk.records.size(), std::size_t(0));             // still no newline
        QCOMPARE(read_jsonl_metrics(path).size(), std::size_t(3));  // complete, so used
        append_file(path, "\n");
        chunk = read_jsonl_metrics_from(path, complete_size);
        QCOMPARE(chunk.records.size(), std::size_t(1));
        QCOMPARE(chunk.records[0].step, std::int64_t(3));
        QCOMPARE(chunk.records[0].wall_time, 3.5);
        QCOMPARE(chunk.next_offset, std::uint64_t(fs::file_size(path)));
    }

    void jsonl_reader_restarts_on_rewritten_file() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        auto records = sample_records();
        {
            JsonlSink sink(path);
            sink.write(records[0]);
            sink.write(records[1]);
        }
        JsonlChunk chunk = read_jsonl_metrics_from(path, 0);
        QCOMPARE(chunk.records.size(), std::size_t(2));
        QVERIFY(!chunk.restarted);
        {
            JsonlSink sink(path);  // a new run truncates the file
            sink.write(records[1]);
        }
        chunk = read_jsonl_metrics_from(path, chunk.next_offset);
        QVERIFY(chunk.restarted);
        QCOMPARE(chunk.records.size(), std::size_t(1));
        QCOMPARE(chunk.records[0].step, std::int64_t(2));
    }

    void jsonl_append_after_crash() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        auto records = sample_records();
        {
            JsonlSink sink(path);
            sink.write(records[0]);
        }
        append_file(path, "{\"step\":2,\"tok");  // the crash
        {
            JsonlSink sink(path, OpenMode::append);
            sink.write(records[1]);
        }
        std::size_t bad = 0;
        auto back = read_jsonl_metrics(path, &bad);
        QCOMPARE(back.size(), std::size_t(2));
        QCOMPARE(back[1].step, std::int64_t(2));
        QCOMPARE(bad, std::size_t(0));  // the fragment was cut off: whole records only
        QCOMPARE(read_file(path), JsonlSink::format(records[0]) + JsonlSink::format(records[1]));
        // A file that is nothing but a fragment becomes empty before the first record.
        write_file(path, "{\"st");
        {
            JsonlSink sink(path, OpenMode::append);
            sink.write(records[0]);
        }
        QCOMPARE(read_file(path), JsonlSink::format(records[0]));
    }

    void csv_append_after_crash() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.csv");
        auto records = sample_records();
        {
            CsvSink sink(path);
            sink.write(records[0]);
        }
        const std::string whole = read_file(path);
        append_file(path, "2,8192,17000");  // a full disk mid-row
        {
            CsvSink sink(path, OpenMode::append);
            sink.write(records[1]);
        }
        QCOMPARE(read_file(path), whole + CsvSink::format(records[1]));
    }

    void jsonl_reader_missing_file_throws() {
        QVERIFY_THROWS_EXCEPTION(std::runtime_error,
                                 read_jsonl_metrics("/nonexistent-lathe-dir/metrics.jsonl"));
    }

    // ---- CSV ---------------------------------------------------------------------------------
    void csv_exact_content() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.csv");
        {
            CsvSink sink(path);
            for (const auto& r : sample_records()) sink.write(r);
            sink.write(MetricRecord{3, 1, 2.0, {}});  // no values: no rows
        }
        QCOMPARE(read_file(path),
                 std::string("step,tokens,wall_time,name,value\n"
                             "1,4096,1700000000.25,train/CE loss,2.5\n"
                             "1,4096,1700000000.25,optim/LR,3e-04\n"
                             "1,4096,1700000000.25,\"odd, \"\"name\"\" (x/y)\",nan\n"
                             "2,8192,1700000001.5,train/CE loss,2.25\n"
                             "2,8192,1700000001.5,throughput/device/TPS,12345\n"
                             "2,8192,1700000001.5,\"odd, \"\"name\"\" (x/y)\",-inf\n"));
    }

    void csv_quoting_data() {
        QTest::addColumn<std::string>("name");
        QTest::addColumn<std::string>("field");
        QTest::newRow("plain") << std::string("train/CE loss") << std::string("train/CE loss");
        QTest::newRow("parentheses") << std::string("acc (%)") << std::string("acc (%)");
        QTest::newRow("comma") << std::string("a,b") << std::string("\"a,b\"");
        QTest::newRow("quote") << std::string("say \"hi\"") << std::string("\"say \"\"hi\"\"\"");
        QTest::newRow("newline") << std::string("two\nlines") << std::string("\"two\nlines\"");
        QTest::newRow("cr") << std::string("x\ry") << std::string("\"x\ry\"");
        QTest::newRow("empty") << std::string() << std::string();
    }
    void csv_quoting() {
        QFETCH(std::string, name);
        QFETCH(std::string, field);
        std::string out;
        CsvSink::append_field(out, name);
        QCOMPARE(out, field);
    }

    void csv_append_keeps_one_header() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.csv");
        auto records = sample_records();
        {
            CsvSink sink(path, OpenMode::append);  // new file: header
            sink.write(records[0]);
        }
        {
            CsvSink sink(path, OpenMode::append);  // resumed: no second header
            sink.write(records[1]);
        }
        const std::string text = read_file(path);
        QCOMPARE(text, std::string(CsvSink::kHeader) + CsvSink::format(records[0]) +
                           CsvSink::format(records[1]));
    }

    // ---- TensorBoard -------------------------------------------------------------------------
    void tensorboard_file_read_back() {
        QTemporaryDir dir;
        const std::string path = TensorBoardSink::unique_path_in(dir.path().toStdString());
        const std::string name = fs::path(path).filename().string();
        QVERIFY(name.rfind("events.out.tfevents.", 0) == 0);
        QVERIFY(name.size() > 6 && name.substr(name.size() - 6) == ".lathe");

        std::vector<MetricRecord> records = sample_records();
        MetricRecord big;  // multi-byte varints: a large step, a long tag, a long summary
        big.step = 5'000'000'000LL;
        big.wall_time = 1700000002.125;
        big.add(std::string(300, 'x'), 0.1);
        for (int i = 0; i < 40; ++i) big.add("group/metric " + std::to_string(i), i * 0.5);
        records.push_back(big);

        const double before = unix_time_now();
        TensorBoardSink sink(path);
        for (std::size_t i = 0; i < records.size(); ++i) {
            sink.write(records[i]);
            // Flushed per step: a live reader already sees this record.
            QCOMPARE(read_events(path).size(), i + 2);
        }
        sink.close();
        QVERIFY(!sink.failed());

        auto events = read_events(path);
        QCOMPARE(events.size(), records.size() + 1);
        QCOMPARE(events[0].file_version, std::string("brain.Event:2"));
        QVERIFY(events[0].wall_time >= before - 1 && events[0].wall_time <= unix_time_now() + 1);
        QVERIFY(events[0].values.empty());
        for (std::size_t i = 0; i < records.size(); ++i) {
            const DecodedEvent& e = events[i + 1];
            const MetricRecord& r = records[i];
            QCOMPARE(e.step, r.step);
            QCOMPARE(e.wall_time, r.wall_time);
            QVERIFY(e.file_version.empty());
            QCOMPARE(e.values.size(), r.values.size());
            for (std::size_t k = 0; k < r.values.size(); ++k) {
                QCOMPARE(e.values[k].first, r.values[k].first);
                const float want = static_cast<float>(r.values[k].second);
                if (std::isnan(want)) {
                    QVERIFY(std::isnan(e.values[k].second));
                } else {
                    QCOMPARE(e.values[k].second, want);  // float32, bit for bit
                }
            }
        }
    }

    void tensorboard_unique_names() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        std::string first = TensorBoardSink::unique_path_in(d);
        std::ofstream(first) << "";
        std::string second = TensorBoardSink::unique_path_in(d);
        QVERIFY(first != second);
        QVERIFY(second.find("tfevents") != std::string::npos);
    }

    // ---- Failures ----------------------------------------------------------------------------
    void failure_reports_once_data() {
        QTest::addColumn<std::string>("kind");
        QTest::addColumn<std::string>("path");
        QTest::addColumn<std::string>("reason");
        const std::string gone = (fs::temp_directory_path() / "lathe-no-such-dir-4f1c/m").string();
        for (const char* kind : {"jsonl", "csv", "tensorboard"}) {
            QTest::addRow("%s disk full", kind) << std::string(kind) << std::string("/dev/full")
                                                << std::string("No space left on device");
            QTest::addRow("%s missing folder", kind)
                << std::string(kind) << gone << std::string("No such file or directory");
            QTest::addRow("%s under /proc", kind)
                << std::string(kind) << std::string("/proc/lathe-no-such/metrics") << std::string();
        }
    }
    void failure_reports_once() {
        QFETCH(std::string, kind);
        QFETCH(std::string, path);
        QFETCH(std::string, reason);
        std::vector<std::string> errors;
        auto sink = make_sink(kind, path);
        sink->set_error_handler([&](const std::string& line) { errors.push_back(line); });
        try {
            for (const auto& r : sample_records()) sink->write(r);
            for (int i = 0; i < 5; ++i) sink->write(sample_records()[0]);
            sink->flush();
            sink->close();
            sink->close();
        } catch (...) {
            QFAIL("a sink threw into its caller");
        }
        QCOMPARE(errors.size(), std::size_t(1));
        QVERIFY2(errors[0].find(path) != std::string::npos, errors[0].c_str());
        if (!reason.empty())
            QVERIFY2(errors[0].find(reason) != std::string::npos, errors[0].c_str());
        QVERIFY(errors[0].find('\n') == std::string::npos);  // one line
        QVERIFY(sink->failed());
        QCOMPARE(sink->error(), errors[0]);
        QCOMPARE(sink->records_written(), std::uint64_t(0));
        QVERIFY(!sink->open());
    }

    void failure_open_checks_folder_up_front() {
        int errors = 0;
        JsonlSink sink("/proc/lathe-no-such/metrics.jsonl");
        sink.set_error_handler([&](const std::string&) { ++errors; });
        QVERIFY(!sink.open());
        sink.write(sample_records()[0]);
        QCOMPARE(errors, 1);
    }

    void failure_in_hook_and_handler() {
        MemorySink sink(/*throw_on_write=*/2);
        int errors = 0;
        sink.set_error_handler([&](const std::string& line) {
            ++errors;
            QVERIFY(line.find("memory") != std::string::npos);
            QVERIFY(line.find("simulated failure") != std::string::npos);
            throw std::runtime_error("a handler that throws too");  // must not escape
        });
        try {
            for (int i = 0; i < 6; ++i) sink.write(MetricRecord{i, 0, 0.0, {}});
            sink.close();
        } catch (...) {
            QFAIL("an exception escaped the sink");
        }
        QCOMPARE(errors, 1);
        QCOMPARE(sink.steps, (std::vector<std::int64_t>{0, 1}));
        QCOMPARE(sink.records_written(), std::uint64_t(2));
        QCOMPARE(sink.opens, 1);
        QCOMPARE(sink.closes, 1);  // released on failure, not again by close()
    }

    void never_opened_sink_creates_no_file() {
        QTemporaryDir dir;
        const std::string path = path_in(dir, "metrics.jsonl");
        {
            JsonlSink sink(path);
            sink.close();
            sink.write(sample_records()[0]);  // after close: ignored
            QVERIFY(sink.is_closed());
        }
        QVERIFY(!fs::exists(path));
    }

    // ---- AsyncSinkWriter ---------------------------------------------------------------------
    void async_10000_records_in_order() {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        std::atomic<int> errors{0};  // called on the writer's thread: no QFAIL there
        auto sinks = make_run_sinks(d, {}, [&](const std::string&) { ++errors; });
        auto memory = std::make_unique<MemorySink>();
        MemorySink* mem = memory.get();
        sinks.push_back(std::move(memory));
        constexpr int kCount = 10000;
        {
            AsyncSinkWriter writer(std::move(sinks));
            for (int i = 0; i < kCount; ++i) {
                MetricRecord r;
                r.step = i;
                r.tokens = i * 2048LL;
                r.wall_time = 1700000000.0 + i;
                r.add("train/CE loss", 1.0 / (i + 1));
                r.add("optim/LR", i * 1e-6);
                writer.submit(std::move(r));
            }
            writer.flush();
            QCOMPARE(writer.written(), std::uint64_t(kCount));
            QCOMPARE(mem->steps.size(), std::size_t(kCount));  // safe: the writer is idle
            writer.close();
            QCOMPARE(writer.submitted(), std::uint64_t(kCount));
            QCOMPARE(writer.dropped(), std::uint64_t(0));
            for (const auto& sink : writer.sinks()) QVERIFY(!sink->failed());
            for (int i = 0; i < kCount; ++i) QCOMPARE(mem->steps[i], std::int64_t(i));
        }  // the writer owns (and now destroys) the sinks
        QCOMPARE(errors.load(), 0);

        auto back = read_jsonl_metrics(d + "/metrics.jsonl");
        QCOMPARE(back.size(), std::size_t(kCount));
        for (int i = 0; i < kCount; ++i) {
            QCOMPARE(back[i].step, std::int64_t(i));
            QCOMPARE(back[i].values[0].second, 1.0 / (i + 1));
        }
        const std::string csv = read_file(d + "/metrics.csv");
        QCOMPARE(std::count(csv.begin(), csv.end(), '\n'), std::ptrdiff_t(1 + 2 * kCount));
        auto events = read_events(only_events_file(d));
        QCOMPARE(events.size(), std::size_t(kCount + 1));
        for (int i = 0; i < kCount; ++i) QCOMPARE(events[i + 1].step, std::int64_t(i));
    }

    void async_many_threads() {
        auto memory = std::make_unique<MemorySink>();
        MemorySink* mem = memory.get();
        std::vector<std::unique_ptr<MetricSink>> sinks;
        sinks.push_back(std::move(memory));
        AsyncSinkWriter writer(std::move(sinks), 64);  // small queue: exercise the waiting too
        writer.set_error_handler([](const std::string&) {});
        constexpr int kThreads = 4, kEach = 2500;
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&writer, t] {
                for (int i = 0; i < kEach; ++i)
                    writer.submit(MetricRecord{t * 100000 + i, 0, 0.0, {}});
            });
        }
        for (auto& th : threads) th.join();
        writer.close();
        QCOMPARE(mem->steps.size(), std::size_t(kThreads * kEach));
        std::vector<std::int64_t> next(kThreads, 0);
        for (auto step : mem->steps) {
            const auto t = step / 100000;
            QCOMPARE(step % 100000, next[t]);  // each thread's records in its order
            ++next[t];
        }
    }

    void async_backpressure_blocks_and_warns_once() {
        auto memory = std::make_unique<MemorySink>(-1, /*sleep_ms=*/1);
        MemorySink* mem = memory.get();
        std::vector<std::unique_ptr<MetricSink>> sinks;
        sinks.push_back(std::move(memory));
        AsyncSinkWriter writer(std::move(sinks), 4);
        std::atomic<int> warnings{0};
        writer.set_error_handler([&](const std::string& line) {
            QVERIFY(line.find("behind") != std::string::npos);
            ++warnings;
        });
        for (int i = 0; i < 60; ++i) writer.submit(MetricRecord{i, 0, 0.0, {}});
        writer.close();
        QVERIFY(writer.blocked_submits() > 0);
        QCOMPARE(warnings.load(), 1);
        QCOMPARE(writer.dropped(), std::uint64_t(0));
        QCOMPARE(mem->steps.size(), std::size_t(60));
        for (int i = 0; i < 60; ++i) QCOMPARE(mem->steps[i], std::int64_t(i));
    }

    void async_close_is_idempotent_and_drops_late_records() {
        auto memory = std::make_unique<MemorySink>();
        MemorySink* mem = memory.get();
        std::vector<std::unique_ptr<MetricSink>> sinks;
        sinks.push_back(std::move(memory));
        AsyncSinkWriter writer(std::move(sinks));
        writer.submit(MetricRecord{1, 0, 0.0, {}});
        writer.close();
        writer.close();
        writer.submit(MetricRecord{2, 0, 0.0, {}});
        writer.flush();  // returns at once after close
        QCOMPARE(writer.dropped(), std::uint64_t(1));
        QCOMPARE(mem->steps, (std::vector<std::int64_t>{1}));
        QCOMPARE(mem->closes, 1);
        QVERIFY(mem->is_closed());
    }

    void async_failing_sink_does_not_stop_others() {
        QTemporaryDir dir;
        std::vector<std::unique_ptr<MetricSink>> sinks;
        sinks.push_back(std::make_unique<JsonlSink>("/dev/full"));
        sinks.push_back(std::make_unique<JsonlSink>(path_in(dir, "metrics.jsonl")));
        std::atomic<int> errors{0};
        for (auto& s : sinks) s->set_error_handler([&](const std::string&) { ++errors; });
        {
            AsyncSinkWriter writer(std::move(sinks));
            for (int i = 0; i < 100; ++i) writer.submit(MetricRecord{i, 0, 0.0, {{"x", 1.0}}});
        }  // the destructor drains and closes
        QCOMPARE(errors.load(), 1);
        QCOMPARE(read_jsonl_metrics(path_in(dir, "metrics.jsonl")).size(), std::size_t(100));
    }
};

QTEST_GUILESS_MAIN(TestSinks)
#include "test_sinks.moc"
