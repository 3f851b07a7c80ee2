// Data in-process: the built-in corpus, the data loader's determinism, coverage, rank sharding and
// resume, and its shuffled order equal to numpy's (OLMo-core's) for the same seed and epoch; label
// masks beside token files (the training loss with them is checked against OLMo-core's by the peer
// test check_olmo_core_parity, case label_mask).
#include "engine/config/io.h"
#include "engine/data/builtin_corpus.h"
#include "engine/data/data_loader.h"
#include "engine/data/instance_filter.h"
#include "engine/data/numpy_rng.h"
#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <set>

using namespace lathe;

class TestData : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    void builtinCorpus() {
        auto a = data::generate_builtin_corpus(100000, 7);
        auto b = data::generate_builtin_corpus(100000, 7);
        auto c = data::generate_builtin_corpus(100000, 8);
        QCOMPARE(a.size(), size_t(100000));
        QVERIFY(a == b);
        QVERIFY(a != c);
        double h = data::corpus_unigram_entropy(a);
        QVERIFY2(h > 2.3 && h < 3.5, qPrintable(QString::number(h)));  // English-like letters
    }

    void dataLoader() {
        config::DatasetConfig d;
        d.builtin_tokens = 64 * 100;
        d.validation_fraction = 0;
        auto ds = data::TokenDataset::build(d, 256);
        QCOMPARE(ds->num_instances(), int64_t(100));
        config::DataLoaderConfig c;
        c.global_batch_size = 64 * 8;  // 8 instances per batch -> 12 batches per epoch
        data::DataLoader whole(ds, c, 0, 1);
        QCOMPARE(whole.total_batches(), int64_t(12));
        // Determinism and a fresh order each epoch.
        QCOMPARE(whole.epoch_order(1), whole.epoch_order(1));
        QVERIFY(whole.epoch_order(1) != whole.epoch_order(2));
        // One epoch covers 96 distinct instances with no repeat.
        whole.reshuffle(1);
        std::set<int64_t> seen;
        std::vector<std::vector<int64_t>> global;
        while (auto b = whole.next()) {
            global.push_back(b->index);
            for (auto i : b->index) QVERIFY(seen.insert(i).second);
        }
        QCOMPARE(seen.size(), size_t(96));
        // Two ranks take positions r, r+2, ... of the same global batches.
        data::DataLoader r0(ds, c, 0, 2), r1(ds, c, 1, 2);
        r0.reshuffle(1);
        r1.reshuffle(1);
        for (std::size_t b = 0; b < global.size(); ++b) {
            auto x = r0.next(), y = r1.next();
            QVERIFY(x && y);
            for (std::size_t k = 0; k < 4; ++k) {
                QCOMPARE(x->index[k], global[b][2 * k]);
                QCOMPARE(y->index[k], global[b][2 * k + 1]);
            }
            // The tokens are those of the instances.
            std::vector<int64_t> tokens(64);
            ds->instance(x->index[0], tokens.data());
            QVERIFY(torch::equal(x->input_ids[0], torch::tensor(tokens, torch::kInt64)));
        }
        QVERIFY(!r0.next());
        // Resume continues at exactly the next batch.
        data::DataLoader a(ds, c, 0, 1), b(ds, c, 0, 1);
        a.reshuffle(1);
        for (int i = 0; i < 5; ++i) a.next();
        auto state = a.state_dict();
        b.load_state_dict(state);
        b.reshuffle(1);
        QCOMPARE(b.next()->index, a.next()->index);
        // A different dataset is refused.
        config::DatasetConfig other = d;
        other.builtin_seed = 99;
        data::DataLoader o(data::TokenDataset::build(other, 256), c, 0, 1);
        QVERIFY_THROWS_EXCEPTION(std::exception, o.load_state_dict(state));
    }

    // dataset.label_mask_paths: one byte per token, read with each instance and each batch row;
    // a mask of the wrong length or a path that is not one token file is refused by name.
    void labelMasks() {
        QTemporaryDir dir;
        const std::string tokens = dir.filePath("t.u16").toStdString();
        const std::string mask = dir.filePath("t.mask").toStdString();
        const int64_t n = 64 * 10;
        {
            std::ofstream t(tokens, std::ios::binary), m(mask, std::ios::binary);
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t id = static_cast<uint16_t>(i % 250);
                t.write(reinterpret_cast<const char*>(&id), 2);
                const char keep = (i / 7) % 2 ? 1 : 0;
                m.write(&keep, 1);
            }
        }
        config::DatasetConfig d;
        d.source = config::DataSource::numpy;
        d.paths = {tokens};
        const auto plain = data::TokenDataset::build(d, 256);
        QVERIFY(!plain->has_label_mask());
        d.label_mask_paths = {mask};
        const auto ds = data::TokenDataset::build(d, 256);
        QVERIFY(ds->has_label_mask());
        QVERIFY(ds->fingerprint() != plain->fingerprint());
        std::vector<char> got(64);
        ds->instance_mask(3, reinterpret_cast<bool*>(got.data()));
        for (int64_t k = 0; k < 64; ++k) QCOMPARE(bool(got[k]), ((3 * 64 + k) / 7) % 2 == 1);
        config::DataLoaderConfig c;
        c.global_batch_size = 64 * 4;
        data::DataLoader loader(ds, c, 0, 1);
        loader.reshuffle(1);
        auto b = loader.next();
        QVERIFY(b && b->label_mask.defined());
        QCOMPARE(b->label_mask.sizes(), b->input_ids.sizes());
        for (std::size_t r = 0; r < b->index.size(); ++r)
            for (int64_t k = 0; k < 64; ++k)
                QCOMPARE(b->label_mask[int64_t(r)][k].item<bool>(),
                         ((b->index[r] * 64 + k) / 7) % 2 == 1);
        // Wrong length: named, with both sizes.
        {
            std::ofstream m(mask, std::ios::binary | std::ios::app);
            m.put(1);
        }
        try {
            data::TokenDataset::build(d, 256);
            QFAIL("a mask one byte too long was accepted");
        } catch (const std::exception& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("dataset.label_mask_paths[0]") != std::string::npos &&
                         what.find("641 bytes") != std::string::npos &&
                         what.find("640 tokens") != std::string::npos,
                     e.what());
        }
        // A folder of token files has no one mask per entry.
        d.paths = {dir.path().toStdString()};
        QVERIFY_THROWS_EXCEPTION(std::exception, data::TokenDataset::build(d, 256));
        // The config check: numpy only, one mask per path.
        config::ExperimentConfig e;
        e.dataset.source = config::DataSource::numpy;
        e.dataset.paths = {tokens, tokens};
        e.dataset.label_mask_paths = {mask};
        bool named = false;
        for (const auto& issue : config::check_consistency(e))
            named = named || issue.path == "dataset.label_mask_paths";
        QVERIFY(named);
    }

    // dataset.generate_doc_lengths: each token's document, cut after the EOS token as OLMo-core's
    // get_document_lengths cuts them; batches carry it; the EOS id comes from the config, else is
    // refused by name when nothing gives it.
    void documentIds() {
        const auto ids = torch::tensor({{5, 2, 7, 2, 2, 9}, {2, 4, 4, 4, 4, 4}}, torch::kInt64);
        const auto docs = data::document_ids(ids, 2);
        QVERIFY(torch::equal(
            docs, torch::tensor({{0, 0, 1, 1, 2, 3}, {0, 1, 1, 1, 1, 1}}, torch::kInt64)));
        // Document lengths from the ids, as get_document_lengths gives them: [2, 2, 1, 1].
        const auto counts = std::get<2>(torch::unique_consecutive(docs[0], false, true));
        QVERIFY(torch::equal(counts, torch::tensor({2, 2, 1, 1}, torch::kInt64)));

        config::DatasetConfig d;
        d.builtin_tokens = 64 * 20;
        d.generate_doc_lengths = true;
        QVERIFY_THROWS_EXCEPTION(std::exception, data::TokenDataset::build(d, 256));
        try {
            data::TokenDataset::build(d, 256);
        } catch (const std::exception& e) {
            QVERIFY2(std::string(e.what()).find("dataset.eos_token_id") != std::string::npos,
                     e.what());
        }
        d.eos_token_id = 300;
        QVERIFY_THROWS_EXCEPTION(std::exception, data::TokenDataset::build(d, 256));
        d.eos_token_id = int64_t(' ');
        const auto ds = data::TokenDataset::build(d, 256);
        QCOMPARE(ds->doc_eos_id().value_or(-1), int64_t(' '));
        config::DataLoaderConfig c;
        c.global_batch_size = 64 * 4;
        data::DataLoader loader(ds, c, 0, 1);
        loader.reshuffle(1);
        const auto b = loader.next();
        QVERIFY(b && b->doc_ids.defined());
        QVERIFY(torch::equal(b->doc_ids, data::document_ids(b->input_ids, ' ')));
        QVERIFY(b->doc_ids.max().item<int64_t>() > 0);  // words: several documents per row
        // Off: no document ids.
        d.generate_doc_lengths = false;
        data::DataLoader plain(data::TokenDataset::build(d, 256), c, 0, 1);
        plain.reshuffle(1);
        QVERIFY(!plain.next()->doc_ids.defined());
        // The config check names the field for a bytes source without an EOS id.
        config::ExperimentConfig e;
        e.dataset.generate_doc_lengths = true;
        bool named = false;
        for (const auto& issue : config::check_consistency(e))
            named = named || issue.path == "dataset.eos_token_id";
        QVERIFY(named);
    }

    // plan_mixture: each source's tokens and what its ratio needs, reported (not refused) when it
    // needs more repetition than allowed; build() refuses the same source with the same numbers.
    void mixturePlan() {
        QTemporaryDir dir;
        auto write = [&](const char* name, int n) {
            std::vector<uint16_t> t(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = uint16_t(i % 200);
            std::string path = dir.filePath(name).toStdString();
            std::ofstream(path, std::ios::binary)
                .write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.size() * 2));
            return path;
        };
        config::DatasetConfig d;
        d.source = config::DataSource::numpy;
        d.token_dtype = config::TokenDType::uint16;
        d.sequence_length = 64;
        config::MixtureSourceConfig web{"web", 0.25, {write("a.npy", 5000)}};
        config::MixtureSourceConfig code{"code", 0.75, {write("b.npy", 2000)}};
        d.mixture.sources = {web, code};
        d.mixture.requested_tokens = 4096;
        auto plans = data::TokenDataset::plan_mixture(d, 256);
        QCOMPARE(plans.size(), std::size_t(2));
        QCOMPARE(plans[0].name, std::string("web"));
        QCOMPARE(plans[0].available_tokens, int64_t(5000));
        QCOMPARE(plans[0].needed_tokens, int64_t(1024));
        QVERIFY(plans[0].fits());
        QCOMPARE(plans[1].needed_tokens, int64_t(3072));
        QCOMPARE(plans[1].allowed_tokens, int64_t(2000));
        QVERIFY(!plans[1].fits());
        QCOMPARE(plans[1].repetitions, 3072.0 / 2000);
        const std::string error =
            lathe::testing::error_of([&] { data::TokenDataset::build(d, 256, {}, 256); });
        QVERIFY2(error.find("(code): needs 3072 tokens") != std::string::npos &&
                     error.find(">= 1.536") != std::string::npos,
                 error.c_str());
        d.mixture.sources[1].max_repetition_ratio = 2;
        plans = data::TokenDataset::plan_mixture(d, 256);
        QVERIFY(plans[1].fits());
        QCOMPARE(plans[1].allowed_tokens, int64_t(4000));
        d.mixture.sources[1].paths = {dir.filePath("missing.npy").toStdString()};
        QVERIFY(lathe::testing::error_of([&] {
                    data::TokenDataset::plan_mixture(d, 256);
                }).find("dataset.mixture.sources[1].paths") != std::string::npos);
    }

    void repetitionFilter() {
        // A unit repeated max_count times in a row masks the instance, one time fewer does not
        // (instance by instance equality with OLMo-core is check_mixture's).
        std::vector<int64_t> ids(96);
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 89);
        config::InstanceFilterConfig f;  // OLMo-core's defaults: periods 1-13, 32 repeats
        QVERIFY(data::passes_instance_filter(ids.data(), 96, f));
        QVERIFY(data::find_periodic_sequences(ids.data(), 96, 13).empty());
        auto with_run = [&](int64_t period, int64_t times, int64_t at) {
            auto out = ids;
            for (int64_t k = period; k < period * times; ++k)
                out[static_cast<std::size_t>(at + k)] =
                    out[static_cast<std::size_t>(at + k % period)];
            return out;
        };
        auto run = with_run(1, 31, 10);
        QVERIFY(data::passes_instance_filter(run.data(), 96, f));
        run = with_run(1, 32, 10);
        QVERIFY(!data::passes_instance_filter(run.data(), 96, f));
        const auto reps = data::find_periodic_sequences(run.data(), 96, 1);
        QCOMPARE(reps.size(), std::size_t(1));
        QCOMPARE(reps[0].start, int64_t(10));
        QCOMPARE(reps[0].end, int64_t(42));
        QCOMPARE(reps[0].times, int64_t(32));
        // A 3-token unit 10 times: caught with max_count 10 when periods reach 3.
        run = with_run(3, 10, 50);
        f.repetition_max_count = 10;
        QVERIFY(!data::passes_instance_filter(run.data(), 96, f));
        f.repetition_max_period = 2;
        QVERIFY(data::passes_instance_filter(run.data(), 96, f));
        f.repetition_max_period = 13;
        f.repetition_min_period = 4;
        QVERIFY(data::passes_instance_filter(run.data(), 96, f));

        // The data loader marks the batch's masked rows: instance 1 of 4 is degenerate text.
        QTemporaryDir dir;
        const std::string path = dir.filePath("t.txt").toStdString();
        std::string text;
        for (int i = 0; i < 64 * 4; ++i) text += static_cast<char>('a' + (i * 7 + i / 5) % 26);
        text.replace(64 + 5, 40, std::string(40, 'z'));
        std::ofstream(path) << text;
        config::DatasetConfig d;
        d.source = config::DataSource::text;
        d.paths = {path};
        d.instance_filter_config = config::InstanceFilterConfig{};
        config::DataLoaderConfig c;
        c.global_batch_size = 64 * 4;
        c.shuffle = false;
        data::DataLoader loader(data::TokenDataset::build(d, 256), c, 0, 1);
        loader.reshuffle(1);
        const auto b = loader.next();
        QVERIFY(b && b->instance_mask.defined());
        QVERIFY(torch::equal(b->instance_mask, torch::tensor({true, false, true, true})));
        // A period range with no period in it is refused, naming the field.
        config::ExperimentConfig e;
        e.dataset.instance_filter_config = config::InstanceFilterConfig{};
        e.dataset.instance_filter_config->repetition_min_period = 20;
        bool named = false;
        for (const auto& issue : config::check_consistency(e))
            named = named || issue.path == "dataset.instance_filter_config.repetition_min_period";
        QVERIFY(named);
    }

    void shuffledOrderIsNumpys() {
        // The loader's epoch order is numpy's permutation for seed + epoch (checked against numpy
        // itself by the peer test check_numpy_order), and the unshuffled order is the identity.
        config::DatasetConfig d;
        d.builtin_tokens = 64 * 100;
        d.validation_fraction = 0;
        auto ds = data::TokenDataset::build(d, 256);
        config::DataLoaderConfig c;
        c.global_batch_size = 64 * 8;
        c.seed = 17;
        data::DataLoader loader(ds, c, 0, 1);
        QCOMPARE(loader.epoch_order(1), data::numpy_permutation_u32(18, 100));
        QCOMPARE(loader.epoch_order(3), data::numpy_permutation_u32(20, 100));
        c.shuffle = false;
        data::DataLoader plain(ds, c, 0, 1);
        const auto order = plain.epoch_order(1);
        for (uint32_t i = 0; i < order.size(); ++i) QCOMPARE(order[i], i);
    }
};

QTEST_GUILESS_MAIN(TestData)
#include "test_data.moc"
