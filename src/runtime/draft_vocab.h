// Whether a draft model's token ids mean what the target's mean. Speculation
// passes token ids between the two without translation: the target's history
// is fed to the draft as is, and the draft's proposals are verified as target
// ids. A draft with another vocabulary would load, run and propose ids that
// stand for other strings: never a wrong answer (the target verifies them),
// but rejected proposals with no word said, or generation stopped by an
// out-of-vocabulary error at the first target id the draft's table lacks.
#pragma once

#include <cstdint>
#include <string>

namespace specdec::io {
class Tokenizer;
}

namespace specdec::runtime {

struct VocabView {
    std::string model;           // path or name, for the error message
    const io::Tokenizer& tokens;  // token texts (ids at or past its size have none)
    int n_vocab = 0;             // rows of the model's embedding and output tables
};

// Throws specdec::Error naming both models unless every target id is a draft
// id for the same token text: the draft's table must cover the target's
// (n_vocab at least the target's) and agree on every id below the target's
// n_vocab (texts equal, or neither side has a text, as for padding rows).
//
// A draft whose vocabulary extends the target's is accepted: its extra ids are
// never proposed (a draft row is cut to the target's width before drafting)
// and the target never emits them. The reverse, a draft vocabulary that is a
// strict prefix of the target's, is refused: the chain and tree proposers feed
// the target's history to the draft unchanged, so the first target token past
// the draft's table would stop generation with an out-of-vocabulary error.
void check_draft_vocabulary(const VocabView& target, const VocabView& draft);

// A 64-bit fingerprint (FNV-1a) of the token texts of ids 0..n-1 (an id past
// the tokenizer's table counts as "no text"): what a remote draft server and
// its target compare when only a number can cross the link, so that a draft
// with as many tokens but other texts is refused as check_draft_vocabulary
// refuses it in process.
uint64_t vocabulary_fingerprint(const io::Tokenizer& tokens, int n);

}  // namespace specdec::runtime
