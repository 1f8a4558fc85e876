// The Jinja interpreter behind chat templates (io/jinja_*, io/chat_template):
// a few outputs taken from Python's jinja2 (the full comparison on llama.cpp's
// real templates is tests/python/test_chat_templates.py), errors that name
// the construct and its line, and hostile templates that must end in an error,
// never a crash or a hang.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/chat_template.h"

using namespace specdec::io;

namespace {

std::string render(const std::string& tmpl, const std::vector<ChatMessage>& msgs = {{"user", "x"}, {"assistant", "y"}},
                   const jinja::Limits& limits = {}) {
    ChatRenderInputs in;
    in.messages = messages_value(msgs);
    in.add_generation_prompt = false;
    in.now = 0;
    return ChatTemplate(tmpl, limits).render(in);
}

// The error message of rendering (or parsing) `tmpl`, "" when it succeeds.
std::string error_of(const std::string& tmpl, const jinja::Limits& limits = {}) {
    try {
        render(tmpl, {{"user", "x"}}, limits);
    } catch (const specdec::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

// Expected strings are jinja2 3.1.6's output (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks) for the same template.
TEST(ChatTemplate, MatchesJinja2) {
    EXPECT_EQ(render("  {% if true %}\n    a\n  {% endif %}\nb\n"), "    a\nb");
    EXPECT_EQ(render("x {%- if true -%} y {%+ if true %} z{% endif +%}\n w{% endif %}{# c #}\n  {#- c -#}  v"),
              "xy  z\n wv");
    EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}:{{ m.role|upper }}{{ ',' if not loop.last }}{% endfor %}"),
              "1:USER,2:ASSISTANT");
    EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}"
                     "{% endfor %}{{ ns.n }}|{{ [3,1,2]|sort|join('-') }}|{{ 'a,b,,c'.split(',') }}|"
                     "{{ '  x '.strip() ~ 'y'.startswith('y') }}"),
              "4|1-2-3|['a', 'b', '', 'c']|xTrue");
    // tojson is Hugging Face's (json.dumps, ensure_ascii=False).
    EXPECT_EQ(render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}|"
                     "{{ {'k': [1, 2.5, none, true, '\xC3\xA9\"']}|tojson }}|{{ 'h\xC3\xA9llo'[1:3] }}|{{ 'abc'[::-1] }}"),
              "[1B][23]|{\"k\": [1, 2.5, null, true, \"\xC3\xA9\\\"\"]}|\xC3\xA9l|cba");
}

TEST(ChatTemplate, RaiseExceptionAndUndefined) {
    EXPECT_NE(error_of("{{ raise_exception('roles must alternate') }}").find("roles must alternate"), std::string::npos);
    // Printing an undefined value is "", using it raises (jinja2's Undefined).
    EXPECT_EQ(render("[{{ nothing }}][{{ messages[0].missing }}]"), "[][]");
    EXPECT_NE(error_of("{{ nothing.attr }}").find("'nothing' is undefined"), std::string::npos);
    // The sandbox refuses mutating methods.
    EXPECT_NE(error_of("{% set l = [] %}{{ l.append(1) }}").find("unsafe"), std::string::npos);
}

TEST(ChatTemplate, ErrorsNameTheConstructAndLine) {
    EXPECT_NE(error_of("a\nb\n{% include 'other.jinja' %}").find("line 3: unsupported statement '{% include %}'"),
              std::string::npos)
        << error_of("a\nb\n{% include 'other.jinja' %}");
    EXPECT_NE(error_of("{{ x | from_json }}").find("no filter named 'from_json'"), std::string::npos);
    EXPECT_NE(error_of("\n{% for x in y %}").find("line 2"), std::string::npos);
    EXPECT_NE(error_of("{% for x in y %}").find("endfor"), std::string::npos);
    EXPECT_NE(error_of("{{ 'abc }}").find("unterminated string"), std::string::npos);
    EXPECT_NE(error_of("{{ x | groupby('a') }}").find("'groupby' filter is not supported"), std::string::npos);
}

TEST(ChatTemplate, HostileTemplatesEndInErrors) {
    // Parser depth: deep nesting is refused before the stack runs out.
    EXPECT_NE(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nested deeper"),
              std::string::npos);
    EXPECT_NE(error_of("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}").find("nested deeper"),
              std::string::npos);
    std::string ifs;
    for (int k = 0; k < 1000; ++k) ifs += "{% if true %}";
    EXPECT_NE(error_of(ifs).find("nested deeper"), std::string::npos);
    // Call depth: unbounded recursion.
    EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("macro calls nested deeper"),
              std::string::npos);
    // Steps: 10^10 iterations.
    jinja::Limits small;
    small.max_steps = 1'000'000;
    EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small)
                  .find("steps"),
              std::string::npos);
    // Size: values and output.
    EXPECT_NE(error_of("{{ 'x' * 1000000000 }}").find("exceeds the limit"), std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                       "{% endfor %}")
                  .find("exceeds the limit"),
              std::string::npos);
    EXPECT_NE(error_of("{{ range(1000000) }}").find("Range too big"), std::string::npos);
    EXPECT_NE(error_of("{{ 999999999999999999 * 99 }}").find("overflow"), std::string::npos);
}

TEST(ChatTemplate, DefaultTemplates) {
    // A model without a template gets ChatML (llama.cpp's fallback).
    EXPECT_EQ(render("{%- for message in messages -%}\n"
                     "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
                     "{%- endfor -%}\n"),
              "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\ny<|im_end|>\n");
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d') }}").size(), 10u);
}
