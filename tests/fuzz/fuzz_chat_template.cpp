// libFuzzer target: the Jinja interpreter behind chat templates
// (io/jinja_*, io/chat_template). The template text comes from the model file
// (tokenizer.chat_template, or a --chat-template file) and the messages from
// API clients, so both are hostile. What is checked: parsing and rendering
// either succeed or throw specdec::Error (a syntax error, an unsupported
// construct, raise_exception, a limit), never crash, hang or throw anything
// else, and the output stays within the output limit.
//
// Input layout (seeds stay readable): byte 0 holds flags (bit 0: add the
// generation prompt; bits 1-2: which bos/eos token texts are passed), then the
// template text up to the first NUL, then one message per NUL-terminated part:
// the part's first byte names the role ('s' system, 'u' user, 'a' assistant,
// 't' tool, '?' a role spelled out up to the first \x01; any other byte picks
// one of the four by its value) and the rest is the content.
#include <cstdint>
#include <memory>
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
    static const char* const bos[] = {"", "<bos>", "<s>", "<|begin_of_text|>"};
    static const char* const eos[] = {"", "<eos>", "</s>", "<|eot_id|>"};
    const bool gen = data[0] & 1;
    const int tokens = (data[0] >> 1) & 3;
    const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);

    size_t cut = in.find('\0');
    const std::string tmpl_text(in.substr(0, cut));
    std::vector<ChatMessage> msgs;
    while (cut != std::string_view::npos) {
        const size_t start = cut + 1;
        cut = in.find('\0', start);
        msgs.push_back(parse_message(in.substr(start, cut == std::string_view::npos ? cut : cut - start)));
    }

    // Smaller limits than the engine's, so that each input runs in well under
    // a second; the mechanism is the same.
    jinja::Limits limits;
    limits.max_output = 1 << 20;
    limits.max_steps = 200000;
    std::unique_ptr<ChatTemplate> t;
    try {
        t = std::make_unique<ChatTemplate>(tmpl_text, limits);
    } catch (const specdec::Error&) {
        return 0;
    } catch (const std::exception& e) {
        specdec::fuzz::unexpected_exception(e, "ChatTemplate (parse)");
    }
    ChatRenderInputs inputs;
    inputs.messages = messages_value(msgs);
    inputs.add_generation_prompt = gen;
    inputs.bos_token = bos[tokens];
    inputs.eos_token = eos[tokens];
    inputs.now = 0;
    std::string out;
    try {
        out = t->render(inputs);
    } catch (const specdec::Error&) {
        return 0;
    } catch (const std::exception& e) {
        specdec::fuzz::unexpected_exception(e, "ChatTemplate::render");
    }
    FUZZ_CHECK(out.size() <= limits.max_output, std::to_string(out.size()));
    // Text outside tags is printed as it is: a template without any tag
    // renders to itself (less one trailing newline, \r\n read as \n).
    if (tmpl_text.find('{') == std::string::npos && tmpl_text.find('\r') == std::string::npos) {
        std::string want = tmpl_text;
        if (!want.empty() && want.back() == '\n') want.pop_back();
        FUZZ_CHECK(out == want, out);
    }
    return 0;
}
