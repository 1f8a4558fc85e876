#include "io/chat_template.h"

#include <ctime>

#include "io/gguf.h"
#include "io/jinja_builtins.h"
#include "io/jinja_parser.h"
#include "io/tokenizer.h"

namespace specdec::io {
namespace {

// llama.cpp's fallback for a model without a template (its "chatml").
const char* kChatMlTemplate =
    "{%- for message in messages -%}\n"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{ '<|im_start|>assistant\\n' }}\n"
    "{%- endif -%}\n";

// The template of Google's Gemma 2 and 3 instruct models (text part).
const char* kGemmaTemplate =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n";

// jinja2 refuses a filter or test it does not know when it compiles the
// template, except inside an if statement or a conditional expression (its
// "soft" frames: there the error waits until the filter runs); so does this.
// A loop, macro or block body starts a frame that is not soft again.
void check_names(const jinja::Expr* e, bool soft) {
    if (!e) return;
    if (!soft && e->kind == jinja::ExprKind::Filter && !jinja::is_jinja_filter(e->name))
        throw jinja::TemplateError("chat template line " + std::to_string(e->line) + ": no filter named '" + e->name + "'");
    if (!soft && e->kind == jinja::ExprKind::Test && !jinja::is_jinja_test(e->name))
        throw jinja::TemplateError("chat template line " + std::to_string(e->line) + ": no test named '" + e->name + "'");
    soft = soft || e->kind == jinja::ExprKind::CondExpr;
    for (const auto& x : e->items) check_names(x.get(), soft);
    for (const auto& [k, x] : e->kwargs) check_names(x.get(), soft);
}

void check_names(const jinja::Body& body, bool soft) {
    using jinja::StmtKind;
    for (const auto& s : body) {
        const bool inner_soft = s->kind == StmtKind::If ? true : s->kind == StmtKind::For ? false : soft;
        check_names(s->expr.get(), s->kind == StmtKind::If || soft);
        check_names(s->cond.get(), s->kind == StmtKind::For ? false : soft);
        for (const auto& p : s->params) check_names(p.default_value.get(), false);
        const bool new_frame = s->kind == StmtKind::For || s->kind == StmtKind::Macro ||
                               s->kind == StmtKind::CallBlock || s->kind == StmtKind::SetBlock ||
                               s->kind == StmtKind::FilterBlock || s->kind == StmtKind::Generation;
        check_names(s->body, new_frame ? false : inner_soft);
        check_names(s->orelse, s->kind == StmtKind::If ? true : soft);
    }
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, const jinja::Limits& limits) : limits_(limits) {
    auto body = std::make_shared<jinja::Body>(jinja::parse(source));
    check_names(*body, false);
    body_ = std::move(body);
}

std::string ChatTemplate::render(const ChatRenderInputs& in) const {
    std::unordered_map<std::string, jinja::Value> g;
    g["raise_exception"] = jinja::Value::function("raise_exception", [](jinja::CallArgs& a) -> jinja::Value {
        throw jinja::TemplateError("raise_exception: " + (a.pos.empty() ? std::string() : jinja::to_str(a.pos[0])));
    });
    const std::optional<std::time_t> now = in.now;
    g["strftime_now"] = jinja::Value::function("strftime_now", [now](jinja::CallArgs& a) {
        const jinja::Value* f = a.get(0, "format");
        if (!f || !f->is_string()) throw jinja::TemplateError("strftime_now needs a format string");
        const std::time_t t = now ? *now : std::time(nullptr);
        std::tm tm{};
        localtime_r(&t, &tm);
        char buf[512];
        const size_t n = f->s.size() < 200 ? std::strftime(buf, sizeof buf, f->s.c_str(), &tm) : 0;
        if (n == 0 && !f->s.empty()) throw jinja::TemplateError("strftime_now: format too long or empty result");
        return jinja::Value::string(std::string(buf, n));
    });
    g["messages"] = in.messages;
    g["add_generation_prompt"] = jinja::Value::boolean(in.add_generation_prompt);
    g["bos_token"] = jinja::Value::string(in.bos_token);
    g["eos_token"] = jinja::Value::string(in.eos_token);
    g["tools"] = in.tools;
    g["documents"] = jinja::Value::none();
    jinja::Evaluator ev(limits_, std::move(g));
    return ev.render(*body_);
}

jinja::Value messages_value(const std::vector<ChatMessage>& messages) {
    std::vector<jinja::Value> items;
    for (const ChatMessage& m : messages) {
        jinja::Value o = jinja::Value::object();
        o.obj->set("role", jinja::Value::string(m.role));
        o.obj->set("content", jinja::Value::string(m.content));
        items.push_back(std::move(o));
    }
    return jinja::Value::array(std::move(items));
}

std::string model_chat_template(const GgufFile& file) {
    const std::string text = file.get_string("tokenizer.chat_template", "");
    if (!text.empty()) return text;
    return file.get_string("general.architecture", "").rfind("gemma", 0) == 0 ? kGemmaTemplate : kChatMlTemplate;
}

std::string apply_chat_template(const ChatTemplate& tmpl, const Tokenizer& tok,
                                const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    ChatRenderInputs in;
    in.messages = messages_value(messages);
    in.add_generation_prompt = add_generation_prompt;
    if (tok.bos_id() >= 0) in.bos_token = tok.token_to_piece(tok.bos_id());
    if (tok.eos_id() >= 0) in.eos_token = tok.token_to_piece(tok.eos_id());
    std::string text = tmpl.render(in);
    if (tok.add_bos() && !in.bos_token.empty() && text.rfind(in.bos_token, 0) == 0) text.erase(0, in.bos_token.size());
    return text;
}

}  // namespace specdec::io
