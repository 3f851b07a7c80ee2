// Data in-process: the built-in corpus, the data loader's determinism, coverage, rank sharding and
// resume, and its shuffled order equal to numpy's (OLMo-core's) for the same seed and epoch.
#include "engine/config/io.h"
#include "engine/data/builtin_corpus.h"
#include "engine/data/data_loader.h"
#include "engine/data/numpy_rng.h"

#include <QtTest>

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
