#include "io/chat_template.h"

#include <cstdint>
#include <iostream>
#include <string_view>

#include "core/error.h"
#include "io/unicode_tables.h"

namespace specdec::io {
namespace {

// Finds a literal default system prompt: "<|im_start|>system" + newline (real
// or the two characters \n inside a Jinja string) + text + "<|im_end|>", where
// the text is plain (no quote, so not an expression like messages[0]).
std::string find_default_system(const std::string& t) {
    const std::string head = "<|im_start|>system";
    for (size_t p = t.find(head); p != std::string::npos; p = t.find(head, p + 1)) {
        size_t q = p + head.size();
        if (t.compare(q, 2, "\\n") == 0) {
            q += 2;
        } else if (q < t.size() && t[q] == '\n') {
            q += 1;
        } else {
            continue;
        }
        const size_t e = t.find("<|im_end|>", q);
        if (e == std::string::npos) continue;
        const std::string body = t.substr(q, e - q);
        if (body.empty() || body.find_first_of("'\"{}") != std::string::npos) continue;
        return body;
    }
    return "";
}

// Jinja's trim filter is Python's str.strip(): Unicode whitespace both ends.
bool py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

// Byte length of the canonical UTF-8 of a Python whitespace character that
// `s` starts with (at_end: ends with), 0 if none.
size_t py_space_len(std::string_view s, bool at_end) {
    for (size_t n = 1; n <= 3 && n <= s.size(); ++n) {
        const std::string_view b = at_end ? s.substr(s.size() - n) : s.substr(0, n);
        const std::vector<uint32_t> c = unicode::decode_utf8(b);
        if (c.size() != 1 || !py_space(c[0])) continue;
        std::string canon;
        unicode::append_utf8(canon, c[0]);
        if (canon == b) return n;
    }
    return 0;
}

// Strips whitespace by byte offsets and returns the bytes in between as they
// are. Decoding the whole content and re-encoding it turned every invalid
// byte inside it into U+FFFD (3 bytes), so stripping changed text it should
// not touch and could triple its size (found by tests/fuzz/fuzz_chat_template).
// UTF-8 lead bytes are never continuation bytes, so a whitespace encoding at
// either end is one character whatever precedes it.
std::string py_strip(const std::string& s) {
    std::string_view v(s);
    while (size_t n = py_space_len(v, false)) v.remove_prefix(n);
    while (size_t n = py_space_len(v, true)) v.remove_suffix(n);
    return std::string(v);
}

std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    const bool has_default = !t.default_system.empty();
    auto turn = [&](const std::string& role, const std::string& content) {
        out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
    };
    const bool first_is_system = !msgs.empty() && msgs[0].role == "system";
    // Qwen2.5 prints the system turn even for an empty conversation; the
    // SmolLM-style template only inserts it before a first message.
    if (has_default && !first_is_system && (t.qwen_tools || !msgs.empty())) turn("system", t.default_system);
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (t.qwen_tools && m.role == "tool") {
            if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
            if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
            continue;
        }
        turn(m.role, m.content);
    }
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

std::string render_gemma(const std::vector<ChatMessage>& msgs, bool gen) {
    std::string out;
    std::string prefix;
    size_t first = 0;
    if (!msgs.empty() && msgs[0].role == "system") {
        prefix = msgs[0].content + "\n\n";
        first = 1;
    }
    for (size_t i = first; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        const bool even = (i - first) % 2 == 0;
        if ((m.role == "user") != even) {
            throw Error("chat template: Conversation roles must alternate user/assistant/user/assistant/...");
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n" + (i == first ? prefix : std::string()) + py_strip(m.content) +
               "<end_of_turn>\n";
    }
    if (gen) out += "<start_of_turn>model\n";
    return out;
}

}  // namespace

ChatTemplate detect_chat_template(const std::string& text, const std::string& arch) {
    ChatTemplate t;
    if (text.find("<start_of_turn>") != std::string::npos) {
        t.family = ChatFamily::Gemma;
    } else if (text.find("<|im_start|>") != std::string::npos) {
        t.family = ChatFamily::ChatMl;
        t.default_system = find_default_system(text);
        t.qwen_tools = text.find("<tool_response>") != std::string::npos;
    } else if (text.empty() && arch.rfind("gemma", 0) == 0) {
        t.family = ChatFamily::Gemma;
    } else {
        t.known = false;
    }
    return t;
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
    if (tmpl.family == ChatFamily::Gemma) return render_gemma(messages, add_generation_prompt);
    return render_chatml(tmpl, messages, add_generation_prompt);
}

std::string apply_chat_template(const GgufFile& file, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) {
    const std::string text = file.get_string("tokenizer.chat_template", "");
    const ChatTemplate t = detect_chat_template(text, file.get_string("general.architecture", ""));
    if (!t.known) {
        std::cerr << "warning: unrecognised chat template in " << file.path() << "; using ChatML\n";
    }
    return render_chat(t, messages, add_generation_prompt);
}

}  // namespace specdec::io
