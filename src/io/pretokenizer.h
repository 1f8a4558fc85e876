// Regex pre-tokenizers of llama.cpp's byte-level BPE vocabularies, written as
// hand-made matchers over code-point categories instead of std::regex (which
// is slow and has no \p{L}). Each matcher reproduces the regex semantics
// llama.cpp ends up with, including its quirks: a pattern is applied inside
// each piece left by the previous pattern (so look-ahead stops at a piece
// end), and text between matches becomes one piece.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specdec::io {

enum class PreTokenizer {
    Default,  // llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT for BPE
    Gpt2,     // also mpt, olmo, ...
    Smollm,   // also starcoder, refact, command-r, codeshell, ...
    Qwen2,    // also stablelm2, megrez
    Llama3,   // llama-bpe (Llama 3.x), also dbrx, smaug-bpe, falcon3, pixtral, ...
    Qwen35,   // Qwen3.5: Qwen2's split with \p{M} counted as part of words
    Falcon,
    DeepseekLlm,
    DeepseekCoder,
    // Gemma 4 (tokenizer.ggml.model "gemma4"): SentencePiece-style BPE, whose
    // only split is into runs of newlines and runs of anything else; spaces are
    // escaped to U+2581 and the merges run on raw UTF-8 (see BpeTokenizer).
    Gemma4,
};

// Maps tokenizer.ggml.pre to a pre-tokenizer; throws specdec::Error on names
// this engine does not implement (as llama.cpp throws on unknown names).
PreTokenizer pretokenizer_from_name(const std::string& pre);

// llama.cpp's ignore_merges for a tokenizer.ggml.pre name: a pre-tokenized
// word that is itself a token becomes that token without running the merges
// (set for the Llama 3 names, not for dbrx or smaug-bpe, which share the split).
bool pretokenizer_ignores_merges(const std::string& pre);

// llama.cpp's add_bos default for a tokenizer.ggml.pre name, used when the file
// has no tokenizer.ggml.add_bos_token: on for the Llama 3 names (a Llama 3
// file without the key still starts every prompt with <|begin_of_text|>).
bool pretokenizer_adds_bos(const std::string& pre);

// Splits UTF-8 text into words (still UTF-8, not byte-encoded). Invalid UTF-8
// becomes U+FFFD, as in llama.cpp.
std::vector<std::string> pretokenize(PreTokenizer type, std::string_view text);

}  // namespace specdec::io
