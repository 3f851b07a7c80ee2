// lathe_protocol: message round trips, decode errors, framing, fuzzing, and the engine-side
// ControlClient against a real listening socket (a QLocalServer standing in for the GUI).
#include "engine/config/io.h"
#include "engine/protocol/control_client.h"
#include "engine/protocol/line_buffer.h"
#include "engine/protocol/messages.h"

#include <QElapsedTimer>
#include <QLocalServer>
#include <QLocalSocket>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

using namespace lathe::protocol;

Q_DECLARE_METATYPE(Event)
Q_DECLARE_METATYPE(Command)

namespace {

// Test lines are written with ' for " (moc's tokenizer does not understand raw strings).
std::string q(const char* s) {
    std::string out(s);
    for (auto& c : out)
        if (c == '\'') c = '"';
    return out;
}

Event decode_ok(const std::string& line) {
    DecodedEvent d = decode_event(line);
    if (auto* err = std::get_if<DecodeError>(&d)) {
        qFatal("unexpected decode error: %s in %s", err->reason.c_str(), line.c_str());
    }
    return std::get<Event>(d);
}

std::string reason_of(const DecodedEvent& d) {
    auto* err = std::get_if<DecodeError>(&d);
    return err ? err->reason : std::string();
}

Hello sample_hello() {
    Hello h;
    h.world_size = 2;
    h.device = "cpu";
    h.run_dir = "/tmp/runs/tiny";
    h.config = lathe::config::to_json(lathe::config::load("tiny").config);
    return h;
}

// A random valid event.
Event random_event(std::mt19937& rng) {
    std::uniform_int_distribution<int> kind(0, 7);
    std::uniform_int_distribution<int64_t> step(0, 1000000);
    std::uniform_real_distribution<double> real(-1e3, 1e3);
    switch (kind(rng)) {
        case 0:
            return sample_hello();
        case 1: {
            Metrics m{step(rng), step(rng) * 2048, std::abs(real(rng)), {}};
            m.values = {
                {"train/CE loss", real(rng)}, {"optim/LR", 1e-3}, {"throughput/device/TPS", 1e5}};
            return m;
        }
        case 2:
            return Log{"info", step(rng) % 8,
                       "step " + std::to_string(step(rng)) + " \"quoted\" ü"};
        case 3:
            return Status{RunState::running, step(rng), step(rng), 1234.5, 3.5};
        case 4:
            return CheckpointSaved{step(rng), "/tmp/runs/tiny/step10", 0.25};
        case 5:
            return ErrorEvent{"out of memory"};
        case 6:
            return Samples{step(rng), {{"The ", "cat \"sat\" ü"}, {"A", ""}}};
        default:
            return Bye{ExitReason::stopped};
    }
}

}  // namespace

class TestProtocol : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void roundTripEvents_data() {
        QTest::addColumn<Event>("event");
        QTest::newRow("hello") << Event(sample_hello());
        Metrics m{10, 20480, 12.5, {{"train/CE loss", 5.25}, {"optim/LR", 3e-3}}};
        QTest::newRow("metrics") << Event(m);
        Metrics nan{11, 0, 0.0, {{"train/CE loss", std::numeric_limits<double>::quiet_NaN()}}};
        QTest::newRow("metrics with NaN") << Event(nan);
        QTest::newRow("metrics empty") << Event(Metrics{0, 0, 0.0, {}});
        QTest::newRow("log") << Event(
            Log{"warning", 3, "line with \"quotes\", tabs\t and ünïcödé"});
        QTest::newRow("status full") << Event(Status{RunState::running, 42, 300, 15000.5, 12.25});
        QTest::newRow("status unknown total")
            << Event(Status{RunState::checkpointing, 42, std::nullopt, 0.0, std::nullopt});
        for (auto s :
             {RunState::starting, RunState::stopping, RunState::finished, RunState::failed})
            QTest::newRow(to_string(s)) << Event(Status{s, 1, 2, 3.0, 4.0});
        QTest::newRow("checkpoint") << Event(CheckpointSaved{100, "/runs/x/step100", 1.5});
        QTest::newRow("error") << Event(ErrorEvent{"CUDA out of memory"});
        QTest::newRow("samples") << Event(Samples{40, {{"The ", "quick brown"}, {"Once", ""}}});
        QTest::newRow("no samples") << Event(Samples{0, {}});
        QTest::newRow("bye finished") << Event(Bye{ExitReason::finished});
        QTest::newRow("bye stopped") << Event(Bye{ExitReason::stopped});
        QTest::newRow("bye failed") << Event(Bye{ExitReason::failed});
    }
    void roundTripEvents() {
        QFETCH(Event, event);
        std::string line = encode(event);
        QVERIFY(!line.empty());
        QCOMPARE(line.back(), '\n');
        QCOMPARE(line.find('\n'), line.size() - 1);  // exactly one line
        auto j = Json::parse(line);
        QCOMPARE(j["v"].get<int>(), kVersion);
        QCOMPARE(QString::fromStdString(j["type"].get<std::string>()), QString(type_name(event)));
        Event back = decode_ok(line);
        QCOMPARE(back.index(), event.index());
        QVERIFY(back == event);
    }

    void roundTripCommands_data() {
        QTest::addColumn<Command>("command");
        QTest::newRow("checkpoint") << Command(SaveCheckpoint{});
        QTest::newRow("stop") << Command(Stop{true});
        QTest::newRow("stop without checkpoint") << Command(Stop{false});
    }
    void roundTripCommands() {
        QFETCH(Command, command);
        std::string line = encode(command);
        DecodedCommand d = decode_command(line);
        QVERIFY(std::holds_alternative<Command>(d));
        QVERIFY(std::get<Command>(d) == command);
        // A command is not an event (except that "checkpoint" means something else there).
        if (std::holds_alternative<Stop>(command))
            QVERIFY(std::holds_alternative<DecodeError>(decode_event(line)));
    }

    void stopDefaultsToCheckpoint() {
        DecodedCommand d = decode_command(q("{'v':1,'type':'stop'}"));
        QVERIFY(std::holds_alternative<Command>(d));
        QCOMPARE(std::get<Stop>(std::get<Command>(d)).checkpoint, true);
    }

    void decodeErrors_data() {
        QTest::addColumn<QByteArray>("line");
        QTest::addColumn<QString>("reason");
        QTest::newRow("empty") << QByteArray("") << "empty line";
        QTest::newRow("not json") << QByteArray("hello world") << "malformed JSON";
        QTest::newRow("truncated")
            << QByteArray("{\"v\":1,\"type\":\"log\",\"lev") << "malformed JSON";
        QTest::newRow("array") << QByteArray("[1,2,3]") << "not a JSON object";
        QTest::newRow("no version")
            << QByteArray::fromStdString(q("{'type':'bye','exit_reason':'finished'}"))
            << "missing protocol version";
        QTest::newRow("version 2")
            << QByteArray::fromStdString(q("{'v':2,'type':'bye','exit_reason':'finished'}"))
            << "unsupported protocol version 2";
        QTest::newRow("version string")
            << QByteArray::fromStdString(q("{'v':'1','type':'bye','exit_reason':'finished'}"))
            << "unsupported protocol version";
        QTest::newRow("no type") << QByteArray::fromStdString(q("{'v':1}"))
                                 << "missing or non-string 'type'";
        QTest::newRow("unknown type") << QByteArray::fromStdString(q("{'v':1,'type':'dance'}"))
                                      << "unknown event type 'dance'";
        QTest::newRow("missing field")
            << QByteArray::fromStdString(q("{'v':1,'type':'log','level':'info','rank':0}"))
            << "log: missing field 'message'";
        QTest::newRow("wrong type")
            << QByteArray::fromStdString(
                   q("{'v':1,'type':'metrics','step':'7','tokens':0,'wall_time':0,'values':{}}"))
            << "metrics: field 'step' must be an integer";
        QTest::newRow("negative step")
            << QByteArray::fromStdString(
                   q("{'v':1,'type':'metrics','step':-1,'tokens':0,'wall_time':0,'values':{}}"))
            << "metrics: field 'step' is below 0";
        QTest::newRow("float step")
            << QByteArray::fromStdString(
                   q("{'v':1,'type':'metrics','step':1.5,'tokens':0,'wall_time':0,'values':{}}"))
            << "metrics: field 'step' must be an integer";
        QTest::newRow("huge step")
            << QByteArray::fromStdString(q("{'v':1,'type':'metrics','step':18446744073709551615,'"
                                           "tokens':0,'wall_time':0,'values':{}}"))
            << "metrics: field 'step' must be an integer in range";
        QTest::newRow("metric not a number")
            << QByteArray::fromStdString(q(
                   "{'v':1,'type':'metrics','step':1,'tokens':0,'wall_time':0,'values':{'a':'x'}}"))
            << "metrics: metric 'a' is not a number";
        QTest::newRow("values not object")
            << QByteArray::fromStdString(
                   q("{'v':1,'type':'metrics','step':1,'tokens':0,'wall_time':0,'values':[]}"))
            << "metrics: field 'values' must be an object";
        QTest::newRow("bad state")
            << QByteArray::fromStdString(q("{'v':1,'type':'status','state':'dancing','step':1,'"
                                           "total_steps':null,'tokens_per_s':0,'eta_s':null}"))
            << "status: unknown state 'dancing'";
        QTest::newRow("bad exit reason")
            << QByteArray::fromStdString(q("{'v':1,'type':'bye','exit_reason':'bored'}"))
            << "bye: unknown exit_reason 'bored'";
        QTest::newRow("hello config not object")
            << QByteArray::fromStdString(q("{'v':1,'type':'hello','protocol_version':1,'world_size'"
                                           ":1,'device':'cpu','run_dir':'','config':[]}"))
            << "hello: field 'config' must be an object";
        QTest::newRow("hello other version")
            << QByteArray::fromStdString(q("{'v':1,'type':'hello','protocol_version':3,'world_size'"
                                           ":1,'device':'cpu','run_dir':'','config':{}}"))
            << "hello: hello announces protocol version 3";
        QTest::newRow("hello zero ranks")
            << QByteArray::fromStdString(q("{'v':1,'type':'hello','protocol_version':1,'world_size'"
                                           ":0,'device':'cpu','run_dir':'','config':{}}"))
            << "hello: field 'world_size' is below 1";
        QTest::newRow("samples not array")
            << QByteArray::fromStdString(q("{'v':1,'type':'samples','step':1,'samples':{}}"))
            << "samples: field 'samples' must be an array";
        QTest::newRow("sample without text")
            << QByteArray::fromStdString(
                   q("{'v':1,'type':'samples','step':1,'samples':[{'prompt':'a'}]}"))
            << "samples: samples[0] must be an object with string fields";
        QTest::newRow("deep nesting")
            << QByteArray(std::string(100, '[').c_str()) << "nesting deeper than 64";
        QTest::newRow("invalid utf8")
            << QByteArray("{\"v\":1,\"type\":\"error\",\"message\":\"\xff\xfe\"}")
            << "malformed JSON";
    }
    void decodeErrors() {
        QFETCH(QByteArray, line);
        QFETCH(QString, reason);
        DecodedEvent d = decode_event(line.toStdString());
        QVERIFY2(std::holds_alternative<DecodeError>(d), line.constData());
        QVERIFY2(QString::fromStdString(reason_of(d)).startsWith(reason),
                 qPrintable(QString::fromStdString(reason_of(d))));
    }

    void unknownFieldsAreIgnored() {
        auto e = decode_ok(q("{'v':1,'type':'error','message':'x','future_field':[1,2]}"));
        QCOMPARE(std::get<ErrorEvent>(e).message, std::string("x"));
    }

    void oversizedLineIsRejected() {
        std::string line =
            q("{'v':1,'type':'error','message':'") + std::string(kMaxLineBytes, 'a') + "\"}";
        QVERIFY(reason_of(decode_event(line)).find("exceeds the limit") != std::string::npos);
    }

    void encoderCutsLongMessagesAndBadUtf8() {
        std::string huge(3 * kMaxLineBytes, 'x');
        huge[100] = '\xc3';  // a lone UTF-8 lead byte
        for (const Event& e : {Event(Log{"info", 0, huge}), Event(ErrorEvent{huge})}) {
            std::string line = encode(e);
            QVERIFY(line.size() <= kMaxLineBytes + 1);
            Event back = decode_ok(line);
            std::string msg = std::holds_alternative<Log>(back)
                                  ? std::get<Log>(back).message
                                  : std::get<ErrorEvent>(back).message;
            QVERIFY(msg.size() > kMaxLineBytes / 2);
            QVERIFY(msg.find("[cut]") != std::string::npos);
            QVERIFY(msg.find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD replaced the bad byte
        }
        // Samples too long for a line: every text is cut, each keeps a share.
        const Samples many{7, {{"p", huge}, {"q", huge}, {"r", "short"}}};
        const std::string line = encode(Event(many));
        QVERIFY(line.size() <= kMaxLineBytes + 1);
        const auto back = std::get<Samples>(decode_ok(line));
        QCOMPARE(back.samples.size(), std::size_t{3});
        QVERIFY(back.samples[0].text.find("[cut]") != std::string::npos);
        QVERIFY(back.samples[0].text.size() > kMaxLineBytes / 64);
        QCOMPARE(back.samples[2].text, std::string("short"));
    }

    void lineBufferSplitsAnyChunking() {
        std::string stream;
        std::vector<std::string> expected;
        for (int i = 0; i < 50; ++i) {
            expected.push_back("line " + std::to_string(i));
            stream += expected.back() + (i % 3 == 0 ? "\r\n" : "\n");
            if (i % 7 == 0) stream += "\n";  // empty lines are skipped
        }
        for (std::size_t chunk :
             {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{64}, stream.size()}) {
            LineBuffer buf;
            std::vector<std::string> got;
            for (std::size_t i = 0; i < stream.size(); i += chunk) {
                for (auto& item : buf.feed(std::string_view(stream).substr(i, chunk))) {
                    QVERIFY(std::holds_alternative<std::string>(item));
                    got.push_back(std::get<std::string>(item));
                }
            }
            QCOMPARE(got, expected);
            QCOMPARE(buf.pending(), std::size_t{0});
        }
    }

    void lineBufferDropsOversizedLines() {
        LineBuffer buf(16);
        std::vector<LineBuffer::Item> items;
        auto feed = [&](std::string_view s) {
            for (auto& it : buf.feed(s)) items.push_back(std::move(it));
            QVERIFY(buf.pending() <= 16);
        };
        feed("short\n0123456789");
        feed("0123456789abcdef");  // now over the limit: dropped, memory released
        QCOMPARE(buf.pending(), std::size_t{0});
        for (int i = 0; i < 1000; ++i) feed("still the same long line ");
        feed("end\nnext\nexactly16bytes!!\n");
        QCOMPARE(items.size(), std::size_t{4});
        QCOMPARE(std::get<std::string>(items[0]), std::string("short"));
        QVERIFY(std::holds_alternative<DecodeError>(items[1]));
        QVERIFY(std::get<DecodeError>(items[1]).reason.find("dropped a line of") !=
                std::string::npos);
        QCOMPARE(std::get<std::string>(items[2]), std::string("next"));
        QCOMPARE(std::get<std::string>(items[3]), std::string("exactly16bytes!!"));
        QCOMPARE(buf.dropped(), std::size_t{1});
    }

    // Thousands of random, truncated and mutated lines: decoding never throws or crashes, every
    // intact line still decodes, and the framing stays bounded.
    void fuzzDecodeAndFraming() {
        std::mt19937 rng(20240607);
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_int_distribution<int> pick(0, 9);
        int errors = 0, intact = 0;
        std::string stream;
        for (int i = 0; i < 20000; ++i) {
            std::string line = encode(random_event(rng));
            line.pop_back();
            bool mutated = true;
            switch (pick(rng)) {
                case 0:  // truncate
                    line.resize(
                        std::uniform_int_distribution<std::size_t>(0, line.size() - 1)(rng));
                    break;
                case 1:  // flip bytes
                    for (int k = 0; k < 4; ++k)
                        line[std::uniform_int_distribution<std::size_t>(0, line.size() - 1)(rng)] =
                            static_cast<char>(byte(rng));
                    break;
                case 2: {  // random bytes
                    line.assign(std::uniform_int_distribution<std::size_t>(0, 300)(rng), '\0');
                    for (auto& c : line) c = static_cast<char>(byte(rng));
                    break;
                }
                case 3:  // swap the type
                    if (auto p = line.find("\"type\":\""); p != std::string::npos)
                        line.insert(p + 8, "x");
                    break;
                case 4:  // change a number into a string
                    if (auto p = line.find("\"step\":"); p != std::string::npos)
                        line.insert(p + 7, "\"");
                    break;
                default:
                    mutated = false;
            }
            const bool has_newline = line.find('\n') != std::string::npos;
            try {
                DecodedEvent d = decode_event(line);
                DecodedCommand c = decode_command(line);
                if (std::holds_alternative<DecodeError>(d)) {
                    ++errors;
                    QVERIFY(!reason_of(d).empty());
                    QVERIFY2(mutated || has_newline, reason_of(d).c_str());
                } else if (!mutated) {
                    ++intact;
                }
                (void)c;
            } catch (const std::exception& e) {
                QFAIL(e.what());
            }
            stream += line + "\n";
        }
        QVERIFY(errors > 5000);
        QVERIFY(intact > 5000);
        // The same stream through the framing, in random chunks, with a small limit.
        LineBuffer buf(2048);
        std::size_t lines = 0, dropped = 0;
        for (std::size_t i = 0; i < stream.size();) {
            std::size_t n = std::uniform_int_distribution<std::size_t>(1, 9000)(rng);
            for (auto& item : buf.feed(std::string_view(stream).substr(i, n))) {
                if (std::holds_alternative<std::string>(item)) {
                    ++lines;
                    QVERIFY(std::get<std::string>(item).size() <= 2048);
                    (void)decode_event(std::get<std::string>(item));
                } else {
                    ++dropped;
                }
            }
            QVERIFY(buf.pending() <= 2048);
            i += n;
        }
        QVERIFY(lines > 15000);
        QVERIFY(dropped > 0);  // the hello lines carry the whole config: over 2 KiB
    }

    void clientFailsWithoutServer() {
        QTemporaryDir dir;
        ControlClient client;
        std::string error;
        QVERIFY(!client.connect((dir.path() + "/nobody.sock").toStdString(), &error));
        QVERIFY(error.find("cannot connect") != std::string::npos);
        QVERIFY(!client.connected());
        client.send(Bye{});  // a no-op, not a crash
        QCOMPARE(client.dropped(), std::size_t{1});
        std::string long_path(200, 'a');
        QVERIFY(!client.connect(long_path, &error));
    }

    void clientTalksToServer() {
        QTemporaryDir dir;
        QLocalServer server;
        const QString path = dir.path() + "/control.sock";
        QVERIFY(server.listen(path));
        ControlClient client;
        std::string error;
        QVERIFY2(client.connect(path.toStdString(), &error), error.c_str());
        QVERIFY(client.connected());
        QTRY_VERIFY(server.hasPendingConnections());
        QLocalSocket* peer = server.nextPendingConnection();

        const int n = 500;
        client.send(sample_hello());
        for (int i = 1; i <= n; ++i)
            client.send(Metrics{i, i * 2048, i * 0.1, {{"train/CE loss", 10.0 / i}}});
        client.send(Bye{ExitReason::finished});

        LineBuffer buf;
        std::vector<Event> got;
        QElapsedTimer t;
        t.start();
        while (got.size() < std::size_t(n) + 2 && t.elapsed() < 10000) {
            if (peer->bytesAvailable() == 0) peer->waitForReadyRead(100);
            QByteArray data = peer->readAll();
            for (auto& item : buf.feed(std::string_view(data.constData(), data.size())))
                got.push_back(decode_ok(std::get<std::string>(item)));
        }
        QCOMPARE(got.size(), std::size_t(n + 2));
        QVERIFY(std::holds_alternative<Hello>(got.front()));
        QVERIFY(std::get<Hello>(got.front()) == sample_hello());
        for (int i = 1; i <= n; ++i) QCOMPARE(std::get<Metrics>(got[i]).step, int64_t(i));
        QVERIFY(std::holds_alternative<Bye>(got.back()));
        QVERIFY(client.flush(std::chrono::seconds(1)));

        // Commands, with garbage in between, arrive in order; the garbage becomes warnings.
        peer->write(QByteArray::fromStdString(encode(SaveCheckpoint{})));
        peer->write("not json\n{\"v\":1,\"type\":\"explode\"}\n");
        peer->write(QByteArray::fromStdString(encode(Stop{false})).left(10));
        peer->flush();
        QTest::qWait(50);
        peer->write(QByteArray::fromStdString(encode(Stop{false})).mid(10));
        peer->flush();
        std::vector<Command> commands;
        QTRY_VERIFY(([&] {
            for (auto& c : client.poll_commands()) commands.push_back(c);
            return commands.size() >= 2;
        }()));
        QVERIFY(std::holds_alternative<SaveCheckpoint>(commands[0]));
        QVERIFY(std::get<Stop>(commands[1]) == Stop{false});
        auto invalid = client.poll_invalid();
        QCOMPARE(invalid.count, std::size_t{2});
        QCOMPARE(invalid.reasons.size(), std::size_t{2});
        QCOMPARE(invalid.reasons[0], std::string("malformed JSON"));
        QCOMPARE(invalid.reasons[1], std::string("unknown command type 'explode'"));
        QVERIFY(client.poll_commands().empty());

        // A flood: every line counted, a bounded number of reasons kept.
        const int flood = 200000;
        QByteArray garbage;
        for (int i = 0; i < flood; ++i) garbage += "x\n";
        peer->write(garbage);
        peer->flush();
        std::size_t counted = 0, kept = 0, most_kept = 0;
        QTRY_VERIFY_WITH_TIMEOUT(([&] {
                                     auto batch = client.poll_invalid();
                                     counted += batch.count;
                                     kept += batch.reasons.size();
                                     most_kept = std::max(most_kept, batch.reasons.size());
                                     return counted >= std::size_t(flood);
                                 }()),
                                 20000);
        QCOMPARE(counted, std::size_t(flood));
        QVERIFY(most_kept <= ControlClient::kMaxInvalidReasons);
        QVERIFY(kept < counted);
    }

    // What the engine logs for a flood of invalid commands: the first few of each window one by
    // one, then one summary line per window with the count; nothing is silently lost.
    void invalidCommandLogIsRateLimited() {
        using Clock = InvalidCommandLog::Clock;
        InvalidCommandLog log(3, std::chrono::seconds(10));
        const Clock::time_point t0{};
        auto batch = [](std::size_t n) {
            InvalidCommands b;
            b.count = n;
            for (std::size_t i = 0; i < std::min<std::size_t>(n, 100); ++i)
                b.reasons.push_back("bad " + std::to_string(i));
            return b;
        };
        auto lines = log.feed(batch(2), t0);
        QCOMPARE(lines.size(), std::size_t{2});
        QCOMPARE(lines[0], std::string("dropped a malformed command: bad 0"));
        lines = log.feed(batch(1000000), t0 + std::chrono::seconds(1));
        QCOMPARE(lines.size(), std::size_t{1});  // the third of the burst; the rest counted
        QVERIFY(log.feed({}, t0 + std::chrono::seconds(5)).empty());
        lines = log.feed({}, t0 + std::chrono::seconds(10));  // the window is over
        QCOMPARE(lines.size(), std::size_t{1});
        QCOMPARE(lines[0], std::string("dropped 1000002 invalid messages in the last 10 s (the "
                                       "first 3 are logged above)"));
        QVERIFY(log.feed({}, t0 + std::chrono::seconds(30)).empty());
        // A new window logs again; a window within its burst needs no summary.
        lines = log.feed(batch(2), t0 + std::chrono::seconds(31));
        QCOMPARE(lines.size(), std::size_t{2});
        QVERIFY(log.finish().empty());
        log.feed(batch(50), t0 + std::chrono::seconds(40));
        lines = log.finish();
        QCOMPARE(lines.size(), std::size_t{1});
        QVERIFY(lines[0].rfind("dropped 50 invalid messages", 0) == 0);
    }

    // The GUI vanishes while the engine is sending from another thread: sends turn into no-ops,
    // connected() turns false, nothing blocks and the destructor joins promptly.
    void serverDisappearsMidStream() {
        QTemporaryDir dir;
        auto server = std::make_unique<QLocalServer>();
        const QString path = dir.path() + "/control.sock";
        QVERIFY(server->listen(path));
        QElapsedTimer life;
        life.start();
        {
            ControlClient client;
            QVERIFY(client.connect(path.toStdString()));
            QTRY_VERIFY(server->hasPendingConnections());
            QLocalSocket* peer = server->nextPendingConnection();
            std::atomic<bool> run{true};
            std::atomic<int> sent{0};
            std::atomic<qint64> slowest_ms{0};
            std::thread trainer([&] {
                QElapsedTimer t;
                while (run) {
                    t.start();
                    client.send(Metrics{sent + 1, 0, 0.0, {{"train/CE loss", 1.0}}});
                    slowest_ms = std::max<qint64>(slowest_ms, t.elapsed());
                    ++sent;
                }
            });
            QTRY_VERIFY(peer->waitForReadyRead(10) || sent > 1000);
            QVERIFY(peer->readAll().size() > 0 || sent > 1000);
            peer->abort();
            server.reset();  // the GUI is gone
            QTRY_VERIFY_WITH_TIMEOUT(!client.connected(), 5000);
            const int at_disconnect = sent;
            QTRY_VERIFY(sent > at_disconnect + 1000);  // still sending, quickly, as no-ops
            run = false;
            trainer.join();
            QVERIFY2(slowest_ms < 500, qPrintable(QString::number(slowest_ms.load())));
            QVERIFY(client.dropped() > 0);
            QVERIFY(client.poll_commands().empty());
        }
        QVERIFY(life.elapsed() < 15000);
    }

    // A GUI that accepts but never reads: the queue's byte budget caps memory, send() stays fast.
    void stalledServerDoesNotBlockSends() {
        QTemporaryDir dir;
        QLocalServer server;
        const QString path = dir.path() + "/control.sock";
        QVERIFY(server.listen(path));
        QElapsedTimer total;
        {
            ControlClient client(256 * 1024);
            QVERIFY(client.connect(path.toStdString()));
            QTRY_VERIFY(server.hasPendingConnections());
            QLocalSocket* peer = server.nextPendingConnection();
            peer->setReadBufferSize(1);  // Qt reads no more than this
            std::string text(4000, 'x');
            QElapsedTimer t;
            qint64 slowest = 0;
            for (int i = 0; i < 20000; ++i) {
                t.start();
                client.send(Log{"info", 0, text});
                slowest = std::max(slowest, t.elapsed());
            }
            QVERIFY(slowest < 200);
            QVERIFY(client.dropped() > 0);
            QVERIFY(!client.flush(std::chrono::milliseconds(100)));
            total.start();
        }  // close(): bounded flush, then shutdown wakes the blocked writer
        QVERIFY(total.elapsed() < 5000);
    }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "test_protocol.moc"
