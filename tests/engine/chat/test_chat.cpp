// engine/chat in-process: a chat template rendered with and without the generation prompt and the
// special tokens as variables, its errors naming where they come from, a conversation's checks,
// and its label mask (the assistant's content and end tokens trained, its header and every other
// turn not). Parity with transformers on real released templates: tests/peer/check_chat.py.
#include "engine/chat/conversation.h"
#include "engine/chat/template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"
#include "tests/error_of.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace lathe;
using lathe::testing::error_of;
using Messages = nlohmann::ordered_json;

namespace {

// A ChatML-like template over the tiny tokenizer's special tokens (<s> 261, <eos> 260).
const char* kTemplate =
    "{% for m in messages %}{{ bos_token }}{{ m.role }}\n{{ m.content }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}{{ bos_token }}assistant\n{% endif %}";

chat::ChatTemplate tiny_template() {
    return chat::ChatTemplate(kTemplate, "tiny/tokenizer_config.json",
                              {{"bos_token", "<s>"}, {"eos_token", "<eos>"}});
}

Messages turn(const char* role, const char* content) {
    return Messages{{"role", role}, {"content", content}};
}

}  // namespace

class TestChat : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::unique_ptr<tokenizer::Tokenizer> tok_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        const std::string path = dir_.path().toStdString() + "/tokenizer.json";
        std::ofstream(path) << lathe::testing::tiny_tokenizer_json();
        tok_ = tokenizer::load_tokenizer(path);
    }

    void rendersWithTheSpecialTokens() {
        const auto t = tiny_template();
        const Messages m = Messages::array({turn("user", "ab"), turn("assistant", "bc")});
        QCOMPARE(t.render(m, false), std::string("<s>user\nab<eos><s>assistant\nbc<eos>"));
        const Messages prompt = Messages::array({turn("user", "ab")});
        QCOMPARE(t.render(prompt, true), std::string("<s>user\nab<eos><s>assistant\n"));
        // The id names the template and its special tokens: another eos_token, another id.
        const chat::ChatTemplate other(kTemplate, "x",
                                       {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
        QVERIFY(other.id() != t.id());
        QCOMPARE(tiny_template().id(), t.id());
    }

    void errorsNameTheTemplate() {
        const std::string syntax =
            error_of([] { chat::ChatTemplate("{% for m in messages %}", "bad.jinja", {}); });
        QVERIFY2(syntax.find("bad.jinja") != std::string::npos, syntax.c_str());
        const chat::ChatTemplate raising("{{ raise_exception('only user turns') }}", "raise.jinja",
                                         {});
        const std::string raised =
            error_of([&] { raising.render(Messages::array({turn("user", "a")}), false); });
        QVERIFY2(raised.find("raise.jinja") != std::string::npos &&
                     raised.find("only user turns") != std::string::npos,
                 raised.c_str());

        // Raised in a macro called from a loop (issue 45 item 15): one message, with the place it
        // was raised, not the template once per frame.
        const chat::ChatTemplate nested(
            "{%- macro check(m) -%}{%- if m.role != 'user' -%}\n"
            "{{ raise_exception('Unsupported role: ' + m.role) }}{%- endif -%}{%- endmacro -%}\n"
            "{%- for m in messages -%}{{ check(m) }}{{ m.content }}{%- endfor -%}",
            "nested.jinja", {});
        const std::string once = error_of([&] {
            nested.render(Messages::array({turn("user", "a"), turn("assistant", "b")}), false);
        });
        auto count = [&](const std::string& needle) {
            std::size_t n = 0;
            for (auto at = once.find(needle); at != std::string::npos;
                 at = once.find(needle, at + 1))
                ++n;
            return n;
        };
        QVERIFY2(once.find("nested.jinja: chat template: Unsupported role: assistant at row 2, ") !=
                     std::string::npos,
                 once.c_str());
        QVERIFY2(count(" at row ") == 1 && count("raise_exception") == 1, once.c_str());
    }

    void conversationsAreChecked() {
        QVERIFY(chat::known_role("assistant") && chat::known_role("tool") &&
                chat::known_role("developer"));
        QVERIFY(!chat::known_role("narrator"));
        const std::string role = error_of([] {
            chat::check_conversation(Messages::array({turn("narrator", "x")}), "d.jsonl:3");
        });
        QVERIFY2(role.rfind("d.jsonl:3: message 1", 0) == 0, role.c_str());
        const std::string none = error_of(
            [] { chat::check_conversation(Messages::array({turn("user", "x")}), "d.jsonl:4"); });
        QVERIFY2(none.find("no assistant turn") != std::string::npos, none.c_str());
        // A prompt needs no assistant turn.
        chat::check_conversation(Messages::array({turn("user", "x")}), "prompt", false);
        const std::string empty =
            error_of([] { chat::check_conversation(Messages::array(), "d.jsonl:5"); });
        QVERIFY2(empty.rfind("d.jsonl:5:", 0) == 0, empty.c_str());
    }

    // Templates are untrusted input (issue 44 item 4): each limit stops a render with an error
    // naming it, never a crash (a recursive macro overflowed the stack) or a hang; real
    // templates' recursion stays well inside it.
    void hostileTemplatesHitTheirLimits() {
        const auto user = Messages::array({turn("user", "a")});
        auto fails = [&](const char* source, const chat::RenderLimits& limits = {}) {
            chat::ChatTemplate t(source, "hostile.jinja", {});
            t.set_limits(limits);
            return error_of([&] { t.render(user, false); });
        };
        QVERIFY(fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
                    .find("deeper than the recursion limit of 200") != std::string::npos);
        QVERIFY(fails("{{ 'x' * 4000000000 }}").find("more than the output limit of 67108864") !=
                std::string::npos);
        QVERIFY(fails("{% set ns = namespace(s='xy') %}{% for i in range(40) %}"
                      "{% set ns.s = ns.s + ns.s %}{% endfor %}")
                    .find("more than the output limit") != std::string::npos);
        QVERIFY(fails("{% for i in range(1000000000) %}{% endfor %}")
                    .find("ranges larger than MAX_RANGE (100000)") != std::string::npos);
        chat::RenderLimits quick;
        quick.max_seconds = 0.2;
        const std::string slow = fails(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            quick);
        QVERIFY2(slow.find("time limit of 0.2 s") != std::string::npos, slow.c_str());
        QVERIFY2(slow.rfind("hostile.jinja: chat template: ", 0) == 0, slow.c_str());
        chat::ChatTemplate deep(
            "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}ok{% endif %}{% endmacro %}"
            "{{ f(150) }}",
            "deep.jinja", {});
        QCOMPARE(deep.render(user, false), std::string("ok"));
    }

    // What jinja2's sandbox does under transformers, where minja did otherwise (issue 44 item 3).
    void rendersAsJinja2Does() {
        const auto user = Messages::array({turn("user", "a")});
        auto render = [&](const char* source) {
            return chat::ChatTemplate(source, "t.jinja", {}).render(user, false);
        };
        QCOMPARE(render("{{ 1 / 4 }} {{ 7 // 2 }} {{ -7 // 2 }}"), std::string("0.25 3 -4"));
        QCOMPARE(render("{{ '\\u00e9\\x41\\q' }}"), std::string("\u00e9A\\q"));
        QCOMPARE(render("{{ '\u00e9t\u00e9'|length }} {{ '\u00e9a'|upper }}"),
                 std::string("3 \u00c9A"));
        QCOMPARE(render("{{ messages[0].content.upper().endswith('A') }}"), std::string("True"));
        QCOMPARE(
            render("{{ [3, 1, 2]|max }} {{ [3, 1, 2]|first }} {{ [1, 2]|sum }} {{ 'ab'|reverse }}"),
            std::string("3 3 3 ba"));
        QCOMPARE(render("{{ {'b': 1, 'a': [1, 'x']}|tojson }}|{{ {'b': 1}|tojson(indent=2) }}"),
                 std::string("{\"b\": 1, \"a\": [1, \"x\"]}|{\n  \"b\": 1\n}"));
        QCOMPARE(render("{{ '\u00e9'|tojson(ensure_ascii=True) }}"), std::string("\"\\u00e9\""));
        // None and undefined are two values, as in jinja2.
        QCOMPARE(render("{{ none }}|{{ nope }}|{{ [none] }}|{{ nope is defined }}|"
                        "{{ none is none }}|{{ nope is none }}|{{ none|default('d') }}|"
                        "{{ nope|default('d') }}|{{ messages[5] }}|{{ nope ~ 'x' }}|"
                        "{{ messages[0].nope|trim }}|{{ none|trim }}|{{ nope is undefined }}|"
                        "{{ 1 is true }}|{{ 3 is odd }}"),
                 std::string("None||[None]|False|True|False|None|d||x||None|True|False|True"));
        const std::string undefined = error_of([&] { render("{{ nope|tojson }}"); });
        QVERIFY2(undefined.find("Object of type Undefined is not JSON serializable") !=
                     std::string::npos,
                 undefined.c_str());
        const std::string concat = error_of([&] { render("{{ 'a' + [1] }}"); });
        QVERIFY2(concat.find("can only concatenate str (not \"list\") to str") != std::string::npos,
                 concat.c_str());
        const std::string unknown = error_of([&] { render("{{ 'a'|striptags }}"); });
        QVERIFY2(unknown.find("unknown filter 'striptags'") != std::string::npos, unknown.c_str());
        // The messages as transformers hands them over: null keys dropped, reasoning aliased.
        chat::ChatTemplate t(
            "{% for m in messages %}{{ m.keys()|list }}{{ m.content is defined }}"
            "{% endfor %}",
            "t.jinja", {});
        const auto m = Messages::array(
            {Messages{{"role", "assistant"}, {"content", nullptr}, {"reasoning", "r"}}});
        QCOMPARE(t.render(m, false),
                 std::string("['thinking', 'role', 'reasoning', 'reasoning_content']False"));
    }

    // Lathe's own templates for a model without one, by name (load("builtin:NAME") too).
    void builtinTemplates() {
        const auto m = Messages::array({turn("user", "hi"), turn("assistant", " yo ")});
        QCOMPARE(chat::ChatTemplate::load("builtin:chatml").render(m, true),
                 std::string("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n yo "
                             "<|im_end|>\n<|im_start|>assistant\n"));
        const auto llama = chat::ChatTemplate::builtin("llama3");
        QCOMPARE(llama.special_tokens()["eos_token"].get<std::string>(), std::string("<|eot_id|>"));
        QVERIFY(llama.render(m, false).rfind("<|begin_of_text|><|start_header_id|>user", 0) == 0);
        const std::string unknown = error_of([] { chat::ChatTemplate::load("builtin:nope"); });
        QVERIFY2(unknown.find("known: chatml, llama3") != std::string::npos, unknown.c_str());
    }

    void masksTrainTheAssistantsTurns() {
        const auto t = tiny_template();
        const Messages m = Messages::array({turn("user", "ab"), turn("assistant", "bc"),
                                            turn("user", "abc"), turn("assistant", "ab")});
        const auto e = chat::encode_conversation(t, *tok_, m, chat::TrainOn::assistant, "c:1");
        QCOMPARE(e.text, t.render(m, false));
        QCOMPARE(e.ids, tok_->encode(e.text));
        QCOMPARE(e.mask.size(), e.ids.size());
        // The trained tokens, in order, are exactly each assistant turn's content and end token.
        std::vector<int64_t> trained;
        for (std::size_t i = 0; i < e.ids.size(); ++i)
            if (e.mask[i]) trained.push_back(e.ids[i]);
        std::vector<int64_t> want = tok_->encode("bc<eos>");
        const auto second = tok_->encode("ab<eos>");
        want.insert(want.end(), second.begin(), second.end());
        QCOMPARE(trained, want);
        QCOMPARE(tok_->decode(trained), std::string("bc<eos>ab<eos>"));
        // Everything, prompts included, with TrainOn::all.
        const auto all = chat::encode_conversation(t, *tok_, m, chat::TrainOn::all, "c:1");
        QCOMPARE(all.ids, e.ids);
        QVERIFY(std::all_of(all.mask.begin(), all.mask.end(), [](uint8_t v) { return v == 1; }));
    }
};

QTEST_GUILESS_MAIN(TestChat)
#include "test_chat.moc"
