// libFuzzer target: chat template detection and rendering (io/chat_template).
// The template text comes from the model file (tokenizer.chat_template) and the
// messages from API clients. specdec does not interpret Jinja: it detects the
// template family from the text and renders it in C++, so what is checked here
// is that detection never fails on any text, that rendering either succeeds or
// throws specdec::Error (gemma's role alternation), and that the output is
// bounded by the input (no blow-up) and contains what it must.
//
// Input layout (seeds stay readable): byte 0 holds flags (bit 0: add the
// generation prompt; bits 1-2: the architecture name), then the template text
// up to the first NUL, then one message per NUL-terminated part: the part's
// first byte names the role ('s' system, 'u' user, 'a' assistant, 't' tool,
// '?' a role spelled out up to the first \x01; any other byte picks one of the
// four by its value) and the rest is the content.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "io/chat_template.h"

using namespace specdec::io;

namespace {

ChatMessage parse_message(std::string_view part) {
    static const char* const roles[] = {"system", "user", "assistant", "tool"};
    if (part.empty()) return {"user", ""};
    const std::string_view rest = part.substr(1);
    switch (part[0]) {
        case 's': return {"system", std::string(rest)};
        case 'u': return {"user", std::string(rest)};
        case 'a': return {"assistant", std::string(rest)};
        case 't': return {"tool", std::string(rest)};
        case '?': {
            const size_t e = rest.find('\x01');
            if (e == std::string_view::npos) return {std::string(rest), ""};
            return {std::string(rest.substr(0, e)), std::string(rest.substr(e + 1))};
        }
        default: return {roles[uint8_t(part[0]) % 4], std::string(rest)};
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    static const char* const archs[] = {"", "gemma3", "qwen2", "llama"};
    const bool gen = data[0] & 1;
    const std::string arch = archs[(data[0] >> 1) & 3];
    const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);

    size_t cut = in.find('\0');
    const std::string tmpl_text(in.substr(0, cut));
    std::vector<ChatMessage> msgs;
    while (cut != std::string_view::npos) {
        const size_t start = cut + 1;
        cut = in.find('\0', start);
        msgs.push_back(parse_message(in.substr(start, cut == std::string_view::npos ? cut : cut - start)));
    }

    ChatTemplate t;
    try {
        t = detect_chat_template(tmpl_text, arch);
    } catch (const std::exception& e) {
        specdec::fuzz::unexpected_exception(e, "detect_chat_template");
    }
    if (tmpl_text.find("<start_of_turn>") != std::string::npos) FUZZ_CHECK(t.family == ChatFamily::Gemma);
    // A default system prompt is literal text copied out of the template.
    FUZZ_CHECK(t.default_system.size() <= tmpl_text.size());
    FUZZ_CHECK(t.default_system.find_first_of("'\"{}") == std::string::npos, t.default_system);
    FUZZ_CHECK(t.default_system.find("<|im_end|>") == std::string::npos, t.default_system);
    FUZZ_CHECK(t.family == ChatFamily::ChatMl || t.default_system.empty());

    // Everything a message can add: its role, content and a fixed markup.
    size_t bound = t.default_system.size() + 64;
    for (const auto& m : msgs) bound += m.role.size() + m.content.size() + 64;

    std::string out;
    try {
        out = render_chat(t, msgs, gen);
    } catch (const specdec::Error& e) {
        // Only gemma's template raises, and only about role order.
        FUZZ_CHECK(t.family == ChatFamily::Gemma, e.what());
        FUZZ_CHECK(std::string(e.what()).find("alternate") != std::string::npos, e.what());
        return 0;
    } catch (const std::exception& e) {
        specdec::fuzz::unexpected_exception(e, "render_chat");
    }
    FUZZ_CHECK(out.size() <= bound, std::to_string(out.size()) + " > " + std::to_string(bound));
    if (t.family == ChatFamily::ChatMl) {
        const std::string tail = "<|im_start|>assistant\n";
        if (gen) FUZZ_CHECK(out.size() >= tail.size() && out.compare(out.size() - tail.size(), tail.size(), tail) == 0);
        // ChatML prints every content verbatim.
        for (const auto& m : msgs) FUZZ_CHECK(out.find(m.content) != std::string::npos);
    } else {
        const std::string tail = "<start_of_turn>model\n";
        if (gen) FUZZ_CHECK(out.size() >= tail.size() && out.compare(out.size() - tail.size(), tail.size(), tail) == 0);
    }
    return 0;
}
