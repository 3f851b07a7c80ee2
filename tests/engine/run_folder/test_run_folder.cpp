// lathe_run_folder (torch-free): the records the engine writes and the GUI reads (status.json,
// parent.json, history.jsonl) round-trip field by field, a damaged record is read as far as it
// goes, the default runs root follows the environment, the tensor-file header reader names what
// is wrong with a file, and status.json can still say "failed" on a full disk.
#include "engine/run_folder/crc32c.h"
#include "engine/run_folder/file_io.h"
#include "engine/run_folder/layout.h"
#include "engine/run_folder/records.h"
#include "engine/run_folder/tensor_file_header.h"

#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include <sys/mount.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>

using namespace lathe::run_folder;

using lathe::testing::error_of;

namespace {

// A tensor file with one float32 tensor of `n` values, as the engine writes it.
std::string tensor_file(size_t n) {
    std::vector<float> data(n, 1.5f);
    const uint32_t crc = crc32c(data.data(), n * 4);
    std::string header = "{\"tensors\":[{\"name\":\"w\",\"dtype\":\"float32\",\"shape\":[" +
                         std::to_string(n) + "],\"offset\":0,\"nbytes\":" + std::to_string(n * 4) +
                         ",\"crc32c\":" + std::to_string(crc) + "}]}";
    std::string out(kTensorFileMagic, 8);
    const uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    out += header;
    out.append(reinterpret_cast<const char*>(data.data()), n * 4);
    return out;
}

}  // namespace

class TestRunFolder : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const std::string& name) const {
        return join(dir_.path().toStdString(), name);
    }

private Q_SLOTS:
    void statusRoundTrips() {
        RunStatus s;
        s.state = RunStatus::kStopped;
        s.reason = "SIGINT received";
        s.pid = 4242;
        s.started_at = "2026-12-02T17:00:00Z";
        s.updated_at = "2026-12-02T17:05:00Z";
        s.elapsed_s = 300.5;
        s.step = 30;
        s.max_steps = 100;
        s.tokens = 30720;
        s.max_tokens = 102400;
        s.world_size = 2;
        s.model = "64d x 2 layers, vocab 256";
        s.last_loss = 2.25;
        write_record(path(kStatusFile), s);
        const auto back = read_record<RunStatus>(path(kStatusFile));
        QVERIFY(back);
        QCOMPARE(to_json(*back), to_json(s));
        // Every field is written, in declaration order.
        const auto j = to_json(s);
        QCOMPARE(j.begin().key(), std::string("state"));
        QCOMPARE(j.size(), std::size_t(13));
    }

    // A full disk (a 16 KiB tmpfs, filled up): the atomic write fails, naming the file and
    // leaving no temporary file behind; overwrite_in_place still records the final state.
    void statusOnAFullDisk() {
        QTemporaryDir mnt;
        const std::string dir = mnt.path().toStdString();
        if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=16k") != 0)
            QSKIP(qPrintable(
                QString("cannot mount a tmpfs here (needs root): %1").arg(std::strerror(errno))));
        struct Unmount {
            std::string dir;
            ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
        } unmount{dir};
        const std::string status = join(dir, kStatusFile);
        RunStatus s;
        s.state = RunStatus::kRunning;
        s.step = 14;
        write_record(status, s);
        {
            std::ofstream filler(join(dir, "filler"), std::ios::binary);
            const std::string block(1024, 'x');
            while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) &&
                   filler.flush()) {
            }
        }
        s.state = RunStatus::kFailed;
        s.reason = "metrics: No space left on device";
        const std::string e = error_of([&] { write_record(status, s); });
        QVERIFY2(e.find("status.json.tmp") != std::string::npos &&
                     e.find("No space left on device") != std::string::npos,
                 e.c_str());
        QVERIFY(!std::ifstream(status + ".tmp"));
        QCOMPARE(read_record<RunStatus>(status)->state, std::string(RunStatus::kRunning));
        write_record(status, s, WhenFull::overwrite_in_place);
        const auto back = read_record<RunStatus>(status);
        QVERIFY(back);
        QCOMPARE(back->state, std::string(RunStatus::kFailed));
        QCOMPARE(back->reason, s.reason);
    }

    void damagedRecordsAreReadAsFarAsTheyGo() {
        // Missing fields keep their defaults; a wrong type is noted and ignored; no NaN in JSON.
        std::vector<std::string> problems;
        const auto s = record_from_json<RunStatus>(
            nlohmann::json{{"state", "running"}, {"step", "ten"}, {"last_loss", nullptr}},
            &problems);
        QCOMPARE(s.state, std::string("running"));
        QCOMPARE(s.step, int64_t(-1));
        QVERIFY(!s.last_loss);
        QVERIFY(std::isnan(s.elapsed_s));
        QCOMPARE(problems, std::vector<std::string>{"step: not a number"});
        QVERIFY(to_json(s)["elapsed_s"].is_null());

        std::ofstream(path("garbage.json")) << "{\"state\": ";
        std::string error;
        QVERIFY(!read_record<RunStatus>(path("garbage.json"), &error));
        QCOMPARE(error, std::string("not valid JSON"));
        QVERIFY(!read_record<RunStatus>(path("missing.json"), &error));
    }

    void parentAndHistory() {
        ParentLink p{"base", 15, "/runs/base/step15", "/runs/base"};
        write_record(path(kParentFile), p);
        const auto back = read_record<ParentLink>(path(kParentFile));
        QVERIFY(back);
        QCOMPARE(back->parent_step, int64_t(15));
        QCOMPARE(back->parent_dir, std::string("/runs/base"));

        ResumeEvent e;
        e.time = iso_time_now();
        e.from_step = 20;
        e.checkpoint = "/runs/a/step20";
        e.abandoned = {"step30.abandoned"};
        e.config_changes = {{"train_module.optim.lr", "0.001", "0.002"}};
        append_history(path(kHistoryFile), nlohmann::ordered_json{{"event", "other"}});
        append_history(path(kHistoryFile), to_json(e));
        std::ofstream(path(kHistoryFile), std::ios::app) << "not json\n";
        e.from_step = 40;
        append_history(path(kHistoryFile), to_json(e));
        const auto events = read_resume_events(path(kHistoryFile));
        QCOMPARE(events.size(), std::size_t(2));
        QCOMPARE(events[0].from_step, int64_t(20));
        QCOMPARE(events[0].abandoned, std::vector<std::string>{"step30.abandoned"});
        QCOMPARE(events[0].config_changes.at(0).after, std::string("0.002"));
        QCOMPARE(events[1].from_step, int64_t(40));
    }

    void defaultRunsRoot() {
        qputenv("LATHE_RUNS_DIR", "/tmp/lathe-runs");
        QCOMPARE(default_runs_root(), std::string("/tmp/lathe-runs"));
        qunsetenv("LATHE_RUNS_DIR");
        qputenv("XDG_DATA_HOME", "/xdg");
        QCOMPARE(default_runs_root(), std::string("/xdg/lathe/runs"));
        qunsetenv("XDG_DATA_HOME");
        qputenv("HOME", "/home/u");
        QCOMPARE(default_runs_root(), std::string("/home/u/.local/share/lathe/runs"));
        QCOMPARE(rank_log_file(3), std::string("logs/rank3.log"));
        QVERIFY(!is_run_folder(dir_.path().toStdString() + "/nothing"));
        // A run's config.json makes a run folder (a run that failed before its first status);
        // a Hugging Face model folder's does not (issue 45 item 6: an export listed as a run).
        const std::string run = dir_.path().toStdString() + "/early-run";
        const std::string hf = dir_.path().toStdString() + "/model-hf";
        std::filesystem::create_directories(run);
        std::filesystem::create_directories(hf);
        write_file_atomic(run + "/config.json", R"({"run_name": "early-run", "model": {}})");
        write_file_atomic(hf + "/config.json",
                          R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})");
        QVERIFY(is_run_folder(run));
        QVERIFY(!is_run_folder(hf));
    }

    void tensorFileHeader() {
        const std::string good = tensor_file(100);
        write_file_atomic(path("good.lathe"), good);
        const auto h = read_tensor_file_header(path("good.lathe"));
        QCOMPARE(h.tensors.size(), std::size_t(1));
        QCOMPARE(h.tensors[0].nbytes, uint64_t(400));
        verify_tensor_file_data(path("good.lathe"));

        write_file_atomic(path("short.lathe"), good.substr(0, good.size() - 10));
        QVERIFY(error_of([&] { read_tensor_file_header(path("short.lathe")); }).find("truncated") !=
                std::string::npos);
        write_file_atomic(path("magic.lathe"), "NOTLATHE" + good.substr(8));
        QVERIFY(error_of([&] { read_tensor_file_header(path("magic.lathe")); }).find("bad magic") !=
                std::string::npos);
        std::string flipped = good;
        flipped[flipped.size() - 1] ^= 0x01;
        write_file_atomic(path("flipped.lathe"), flipped);
        read_tensor_file_header(path("flipped.lathe"));  // the structure is fine
        const std::string e = error_of([&] { verify_tensor_file_data(path("flipped.lathe")); });
        QVERIFY2(
            e.find("flipped.lathe: tensor 'w' is corrupt (CRC-32C mismatch)") != std::string::npos,
            e.c_str());
    }

    // notes.json: tags as typed become a clean list; a bad tag is named.
    void runNotes() {
        using namespace lathe::run_folder;
        QCOMPARE(parse_tags(" baseline, lr sweep,,baseline ,"),
                 (std::vector<std::string>{"baseline", "lr sweep"}));
        QVERIFY(parse_tags("  ").empty());
        QVERIFY(lathe::testing::error_of([] { parse_tags("a,b\tc"); }).find("\"b\tc\"") !=
                std::string::npos);
        QVERIFY(lathe::testing::error_of([] {
                    parse_tags(std::string(65, 'x'));
                }).find("longer than 64") != std::string::npos);
        QTemporaryDir dir;
        const std::string file = join(dir.path().toStdString(), kNotesFile);
        RunNotes n;
        n.tags = {"baseline"};
        n.notes = "multi\nline";
        write_record(file, n);
        const auto back = read_record<RunNotes>(file);
        QVERIFY(back && back->tags == n.tags && back->notes == n.notes);
    }
};

QTEST_GUILESS_MAIN(TestRunFolder)
#include "test_run_folder.moc"
