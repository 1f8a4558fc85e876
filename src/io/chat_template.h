// Chat prompt rendering without a Jinja engine: the template family is
// detected from tokenizer.chat_template and rendered in C++ exactly as the
// model's Jinja template renders it (HF settings: trim_blocks, lstrip_blocks).
#pragma once

#include <string>
#include <vector>

#include "io/gguf.h"
#include "specdec/chat.h"

namespace specdec::io {

// The public message type (specdec/chat.h) is the template's input.
using ChatMessage = specdec::ChatMessage;

enum class ChatFamily {
    ChatMl,  // <|im_start|>role\n...<|im_end|>\n, optional default system prompt
    Gemma,   // <start_of_turn>user\n...<end_of_turn>\n, system folded into first user turn
};

struct ChatTemplate {
    ChatFamily family = ChatFamily::ChatMl;
    std::string default_system;  // ChatML: inserted when messages[0] is not system
    bool qwen_tools = false;     // ChatML: Qwen2.5's grouping of "tool" messages
    bool known = true;           // false: unrecognised template, rendered as plain ChatML
};

// Detects the family from the template text; an empty template falls back on
// the architecture (gemma GGUFs often ship without one).
ChatTemplate detect_chat_template(const std::string& template_text, const std::string& architecture);

// The rendered prompt never starts with the BOS text: templates that print
// bos_token (gemma) rely on the tokenizer adding BOS (add_special=true), as
// llama.cpp's chat code strips it too. Throws specdec::Error when the template
// would raise (gemma: roles must alternate user/assistant).
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt);

// Detects from the GGUF and renders; warns on stderr for unknown templates.
std::string apply_chat_template(const GgufFile& file, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt);

}  // namespace specdec::io
