#include "runtime/draft_vocab.h"

#include <algorithm>

#include "core/error.h"
#include "io/tokenizer.h"

namespace specdec::runtime {
namespace {

// A token text for the message: quoted, cut, control bytes escaped.
std::string shown(const io::Tokenizer& tok, int id) {
    if (id >= tok.n_vocab()) return "no token";
    std::string out = "'";
    const std::string_view t = tok.token_text(id);
    for (size_t i = 0; i < t.size() && i < 40; ++i) {
        const unsigned char c = (unsigned char)t[i];
        if (c < 0x20 || c == 0x7f) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += (char)c;
        }
    }
    if (t.size() > 40) out += "...";
    return out + "'";
}

}  // namespace

void check_draft_vocabulary(const VocabView& target, const VocabView& draft) {
    const std::string pair = "draft model '" + draft.model + "' cannot draft for target model '" + target.model + "'";
    if (draft.n_vocab < target.n_vocab)
        throw Error(detail::concat(pair, ": the draft's vocabulary has ", draft.n_vocab,
                                   " tokens, fewer than the target's ", target.n_vocab,
                                   " (the draft must know every token the target can produce)"));
    const int n_text = std::max(target.tokens.n_vocab(), draft.tokens.n_vocab());
    for (int id = 0; id < std::min(target.n_vocab, n_text); ++id) {
        const bool in_t = id < target.tokens.n_vocab(), in_d = id < draft.tokens.n_vocab();
        if (in_t == in_d && (!in_t || target.tokens.token_text(id) == draft.tokens.token_text(id))) continue;
        throw Error(detail::concat(pair, ": their vocabularies differ at token id ", id, " (", shown(target.tokens, id),
                                   " in the target, ", shown(draft.tokens, id),
                                   " in the draft); speculative decoding needs the same token ids for the same "
                                   "texts (use a draft of the same model family, or --draft-layers)"));
    }
}

uint64_t vocabulary_fingerprint(const io::Tokenizer& tokens, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&h](unsigned char c) {
        h ^= c;
        h *= 0x100000001b3ull;
    };
    for (int id = 0; id < n; ++id) {
        if (id >= tokens.n_vocab()) {
            mix(0xff);  // no text (0xff never starts a UTF-8 sequence, nor a length byte below)
            continue;
        }
        const std::string_view t = tokens.token_text(id);
        // The length first, so that ("ab", "c") and ("a", "bc") differ.
        for (int b = 0; b < 4; ++b) mix((unsigned char)(t.size() >> (8 * b)));
        for (char c : t) mix((unsigned char)c);
    }
    return h;
}

}  // namespace specdec::runtime
