// One turn of a conversation, rendered into a prompt with the model's own chat
// template (read from the GGUF file).
#pragma once

#include <string>

namespace specdec {

struct ChatMessage {
    std::string role, content;  // role: system, user or assistant
};

}  // namespace specdec
