// Chat prompts from the model's own Jinja chat template (tokenizer.chat_template),
// run by the project's Jinja interpreter (io/jinja_*) with the variables and
// settings Hugging Face's apply_chat_template uses: trim_blocks,
// lstrip_blocks, a sandbox, messages / add_generation_prompt / bos_token /
// eos_token / tools=None / documents=None, and the globals raise_exception and
// strftime_now. The output is byte-identical to Python's jinja2 on the
// templates llama.cpp keeps (tests/python/test_chat_templates.py).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/jinja_ast.h"
#include "io/jinja_evaluator.h"
#include "specdec/chat.h"

namespace specdec::io {

class GgufFile;
class Tokenizer;

// The public message type (specdec/chat.h) is the template's input.
using ChatMessage = specdec::ChatMessage;

struct ChatRenderInputs {
    jinja::Value messages;  // a list of dicts (role, content, and whatever else the caller has)
    bool add_generation_prompt = true;
    std::string bos_token, eos_token;
    jinja::Value tools = jinja::Value::none();
    std::optional<std::time_t> now;  // strftime_now's clock; unset: the current time
};

class ChatTemplate {
public:
    // Parses the template; a syntax error or a construct the interpreter does
    // not support throws specdec::Error naming it and its line.
    explicit ChatTemplate(const std::string& source, const jinja::Limits& limits = {});

    // The rendered text, as jinja2 renders it. Throws specdec::Error when the
    // template raises (raise_exception, an undefined value used, ...) or
    // exceeds a limit.
    std::string render(const ChatRenderInputs& in) const;

private:
    std::shared_ptr<const jinja::Body> body_;
    jinja::Limits limits_;
};

jinja::Value messages_value(const std::vector<ChatMessage>& messages);

// The model's template: tokenizer.chat_template, or, for a file without one,
// a default as llama.cpp has one: ChatML, or Gemma's turns for the gemma
// architectures (whose GGUFs often ship without a template).
std::string model_chat_template(const GgufFile& file);

// The prompt the engine reads: `tmpl` rendered with the tokenizer's BOS and EOS
// text and add_generation_prompt. When the tokenizer adds BOS itself
// (tokenizer.ggml.add_bos_token), a BOS text the template printed first is
// removed, as llama.cpp's chat code does, so the prompt has one BOS. (SmolLM2's
// BOS is <|im_start|>, which it does not add: its prompt keeps it.)
std::string apply_chat_template(const ChatTemplate& tmpl, const Tokenizer& tok,
                                const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace specdec::io
