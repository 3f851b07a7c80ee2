// lathe_hf (torch-free): the safetensors writer and reader round-trip, and the reader refuses every
// way a file can lie (truncated, a header longer than the file, offsets that overlap, leave a hole
// or disagree with dtype x shape, trailing bytes, an unknown dtype) with the file and the tensor
// named. The Olmo2 names and config.json map both ways, and configs Lathe's model cannot be are
// refused naming the field.
#include "engine/hf/family.h"
#include "engine/hf/safetensors.h"

#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <fstream>
#include <functional>

using namespace lathe::hf;

using lathe::testing::error_of;

namespace {

// A raw safetensors file: `header` as given, then `data` bytes.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
    std::ofstream f(path, std::ios::binary);
    uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << data;
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path(const char* name) { return (dir_.path() + "/" + name).toStdString(); }

private Q_SLOTS:
    void roundTrip() {
        const std::string p = path("a.safetensors");
        std::vector<float> a = {1, 2, 3, 4, 5, 6};
        std::vector<uint16_t> b = {7, 8, 9};
        {
            SafetensorsWriter w(p, {{"a", "F32", {2, 3}, 0, 0}, {"b", "BF16", {3}, 0, 0}},
                                {{"format", "pt"}});
            QVERIFY(!QFile::exists(QString::fromStdString(p)));  // only after finish()
            w.write("a", a.data(), a.size() * 4);
            w.write("b", b.data(), b.size() * 2);
            w.finish();
        }
        SafetensorsReader r(p);
        const auto& h = r.header();
        QCOMPARE(h.tensors.size(), std::size_t{2});
        QCOMPARE(h.metadata.at("format"), std::string("pt"));
        QCOMPARE(h.data_start % 8, uint64_t{0});  // the data starts aligned
        const auto* ea = h.find("a");
        QVERIFY(ea);
        QCOMPARE(ea->shape, (std::vector<int64_t>{2, 3}));
        std::vector<float> back(6);
        r.read(*ea, back.data());
        QCOMPARE(back, a);
        std::vector<uint16_t> back_b(3);
        r.read(*h.find("b"), back_b.data());
        QCOMPARE(back_b, b);
        QVERIFY(!h.find("c"));
    }

    void writerRefusesMisuse() {
        const std::string p = path("w.safetensors");
        float x[2] = {1, 2};
        {
            SafetensorsWriter w(p, {{"x", "F32", {2}, 0, 0}, {"y", "F32", {1}, 0, 0}});
            QVERIFY(error_of([&] { w.write("y", x, 4); }).find("out of order") !=
                    std::string::npos);
            QVERIFY(error_of([&] { w.write("x", x, 4); }).find("has 4 bytes") != std::string::npos);
            w.write("x", x, 8);
            QVERIFY(error_of([&] { w.finish(); }).find("never written") != std::string::npos);
        }
        // An abandoned writer leaves nothing behind.
        QVERIFY(!QFile::exists(QString::fromStdString(p)));
        QVERIFY(!QFile::exists(QString::fromStdString(p + ".tmp")));
        QVERIFY(error_of([&] {
                    SafetensorsWriter w(p, {{"x", "F32", {1}, 0, 0}, {"x", "F32", {1}, 0, 0}});
                }).find("repeated") != std::string::npos);
    }

    void readerNamesWhatIsWrong_data() {
        QTest::addColumn<QString>("header");
        QTest::addColumn<int>("data_bytes");
        QTest::addColumn<QString>("expected");
        const QString ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
        QTest::newRow("truncated data") << ok << 4 << "truncated";
        QTest::newRow("trailing bytes") << ok << 12 << "no tensor uses";
        QTest::newRow("not json") << "{\"a\":" << 8 << "not JSON";
        QTest::newRow("not an object") << "[1,2]" << 8 << "not a JSON object";
        QTest::newRow("offsets disagree with shape")
            << R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})" << 8
            << "tensor 'a': data_offsets hold 8 bytes but dtype and shape need 12";
        QTest::newRow("unknown dtype") << R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})"
                                       << 2 << "tensor 'a': unknown safetensors dtype 'Q4'";
        QTest::newRow("overlap") << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"
                                 << 8 << "overlap";
        QTest::newRow("hole") << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})" << 8
                              << "a hole";
        QTest::newRow("negative shape")
            << R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})" << 4
            << "tensor 'a': shape holds";
        QTest::newRow("missing field") << R"({"a":{"dtype":"F32","shape":[1]}})" << 4
                                       << "tensor 'a': needs dtype, shape and data_offsets";
        QTest::newRow("bad metadata")
            << R"({"__metadata__":{"format":1}})" << 0 << "__metadata__.format is not a string";
    }
    void readerNamesWhatIsWrong() {
        QFETCH(QString, header);
        QFETCH(int, data_bytes);
        QFETCH(QString, expected);
        const std::string p = path("bad.safetensors");
        write_raw(p, header.toStdString(), std::string(static_cast<size_t>(data_bytes), '\0'));
        const std::string err = error_of([&] { read_safetensors_header(p); });
        QVERIFY2(err.find(p) == 0, err.c_str());
        QVERIFY2(err.find(expected.toStdString()) != std::string::npos, err.c_str());
    }

    void headerLongerThanTheFile() {
        const std::string p = path("lying.safetensors");
        std::ofstream f(p, std::ios::binary);
        uint64_t n = 1000;
        f.write(reinterpret_cast<const char*>(&n), 8);
        f << "{}";
        f.close();
        QVERIFY(error_of([&] { read_safetensors_header(p); }).find("truncated") !=
                std::string::npos);
        std::ofstream g(p, std::ios::binary | std::ios::trunc);
        n = uint64_t{1} << 40;
        g.write(reinterpret_cast<const char*>(&n), 8);
        g.close();
        QVERIFY(error_of([&] { read_safetensors_header(p); }).find("larger than") !=
                std::string::npos);
        std::ofstream h(p, std::ios::binary | std::ios::trunc);
        h << "abc";
        h.close();
        QVERIFY(error_of([&] { read_safetensors_header(p); }).find("shorter than") !=
                std::string::npos);
    }

    void namesBothWays() {
        lathe::config::ModelConfig m;
        m.n_layers = 3;
        const std::vector<std::string> lathe = {"embeddings.weight",
                                                "blocks.2.attention.w_q.weight",
                                                "blocks.0.attention.k_norm.weight",
                                                "blocks.1.attention_norm.weight",
                                                "blocks.1.feed_forward.w1.weight",
                                                "blocks.1.feed_forward.w3.weight",
                                                "blocks.1.feed_forward.w2.weight",
                                                "blocks.0.feed_forward_norm.weight",
                                                "lm_head_norm.weight",
                                                "lm_head.weight"};
        for (const auto& n : lathe) {
            const auto hf = hf_name(n, m);
            QVERIFY2(hf.has_value(), n.c_str());
            QCOMPARE(lathe_name(*hf, m).value_or(""), n);
            QCOMPARE(lathe_name(n, m).value_or(""), n);  // OLMo-core's names are Lathe's
        }
        QCOMPARE(*hf_name("blocks.1.feed_forward.w1.weight", m),
                 std::string("model.layers.1.mlp.gate_proj.weight"));
        QCOMPARE(*hf_name("blocks.0.attention_norm.weight", m),
                 std::string("model.layers.0.post_attention_layernorm.weight"));
        QCOMPARE(lathe_name("lm_head.w_out.weight", m).value_or(""), std::string("lm_head.weight"));
        QCOMPARE(lathe_name("lm_head.norm.weight", m).value_or(""),
                 std::string("lm_head_norm.weight"));
        QVERIFY(!lathe_name("model.layers.x.mlp.gate_proj.weight", m));
        QVERIFY(!lathe_name("model.layers.0.mlp.gate_proj.bias", m));
        QVERIFY(!hf_name("blocks.0.attention.w_q.bias", m));
        // A pre-norm block's norms have Llama's names; biases exist only with qkv_bias; a tied
        // model has no LM head of its own.
        m.block_name = lathe::config::BlockName::default_;
        m.qkv_bias = true;
        m.tie_word_embeddings = true;
        QCOMPARE(*hf_name("blocks.0.attention_norm.weight", m),
                 std::string("model.layers.0.input_layernorm.weight"));
        QCOMPARE(*hf_name("blocks.2.feed_forward_norm.weight", m),
                 std::string("model.layers.2.post_attention_layernorm.weight"));
        QCOMPARE(lathe_name("model.layers.1.self_attn.k_proj.bias", m).value_or(""),
                 std::string("blocks.1.attention.w_k.bias"));
        QVERIFY(!hf_name("lm_head.weight", m));
        QVERIFY(!lathe_name("model.layers.0.post_feedforward_layernorm.weight", m));
    }

    void configBothWays_data() {
        QTest::addColumn<QString>("family");
        QTest::newRow("olmo2") << "Olmo2ForCausalLM";
        QTest::newRow("olmo3") << "Olmo3ForCausalLM";
        QTest::newRow("llama") << "LlamaForCausalLM";
        QTest::newRow("qwen2") << "Qwen2ForCausalLM";
        QTest::newRow("qwen3") << "Qwen3ForCausalLM";
    }
    void configBothWays() {
        QFETCH(QString, family);
        using namespace lathe::config;
        ModelConfig m;
        m.d_model = 96;
        m.n_layers = 6;
        m.n_heads = 6;
        m.n_kv_heads = 2;
        m.vocab_size = 300;
        m.rope_theta = 10000;
        m.layer_norm_eps = 1e-5;
        const auto f = family.toStdString();
        if (f == "Olmo3ForCausalLM") m.sliding_window.pattern = {32, 32, 32, -1};
        if (f != "Olmo2ForCausalLM" && f != "Olmo3ForCausalLM") {
            m.block_name = BlockName::default_;
            m.qk_norm = f == "Qwen3ForCausalLM";
            m.use_head_qk_norm = m.qk_norm;
            m.qkv_bias = f == "Qwen2ForCausalLM";
            m.tie_word_embeddings = true;
        }
        if (f == "LlamaForCausalLM") {
            m.rope_scaling.name = RoPEScalingName::stepwise;
            m.rope_scaling.factor = 32;
            m.rope_scaling.old_context_len = 64;
        }
        if (f == "Qwen3ForCausalLM") {
            m.rope_scaling.name = RoPEScalingName::yarn;
            m.rope_scaling.factor = 4;
            m.rope_scaling.old_context_len = 32;
        }
        const auto j = hf_config_json(m, "float32", 128, {});
        QCOMPARE(QString::fromStdString(j["architectures"][0].get<std::string>()), family);
        QCOMPARE(j["intermediate_size"].get<int64_t>(), m.hidden_size());
        const auto back = model_config_from_hf(j, "config.json");
        const auto diffs = model_differences(back, m);
        QVERIFY2(diffs.empty(), diffs.empty() ? "" : diffs[0].c_str());
        // An intermediate size the default rule does not give is kept exactly.
        for (int64_t size : {200, 1000, 300, 17}) {
            auto k = j;
            k["intermediate_size"] = size;
            QCOMPARE(model_config_from_hf(k, "config.json").hidden_size(), size);
        }
    }

    void modelsWithoutAFamily() {
        lathe::config::ModelConfig m;
        m.qk_norm = false;  // reordered norm without QK-norm: no transformers class has it
        const auto err = error_of([&] { hf_config_json(m, "float32", 128, {}); });
        QVERIFY2(err.find("Olmo2ForCausalLM") != std::string::npos &&
                     err.find("qk_norm") != std::string::npos,
                 err.c_str());
        m.qk_norm = true;
        m.sliding_window.pattern = {16, 32, -1};  // two window sizes
        m.n_layers = 5;
        QVERIFY(error_of([&] {
                    hf_config_json(m, "float32", 128, {});
                }).find("one sliding_window") != std::string::npos);
    }

    void configsLatheCannotBe_data() {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::newRow("arch") << "architectures"
                              << R"(["MistralForCausalLM"])";
        QTest::newRow("bias") << "attention_bias"
                              << "true";
        QTest::newRow("tied") << "tie_word_embeddings"
                              << "\"yes\"";
        QTest::newRow("act") << "hidden_act"
                             << "\"gelu\"";
        QTest::newRow("scaling") << "rope_parameters"
                                 << R"({"rope_type":"dynamic","factor":2})";
        QTest::newRow("llama3") << "rope_parameters"
                                << R"({"rope_type":"llama3","factor":8})";
        QTest::newRow("layers") << "num_hidden_layers"
                                << "0";
        QTest::newRow("kv") << "num_key_value_heads"
                            << "3";
    }
    void configsLatheCannotBe() {
        QFETCH(QString, field);
        QFETCH(QString, value);
        lathe::config::ModelConfig m;
        auto j = hf_config_json(m, "float32", 64, {});
        j[field.toStdString()] = nlohmann::json::parse(value.toStdString());
        const std::string err = error_of([&] { model_config_from_hf(j, "x/config.json"); });
        QVERIFY2(err.find("x/config.json: " + field.toStdString()) == 0, err.c_str());
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
