#include "server/token_provenance.h"

#include <algorithm>

namespace specdec::server {

void TokenProvenance::add(size_t text_end, spec::TokenSource source) {
    const bool draft = source == spec::TokenSource::Draft;
    tokens_.push_back({text_end, draft});
    ++(draft ? new_draft_ : new_target_);
}

Provenance TokenProvenance::take(std::string_view piece) {
    Provenance p;
    p.draft_tokens = new_draft_;
    p.target_tokens = new_target_;
    new_draft_ = new_target_ = 0;
    const size_t begin = released_, end = released_ + piece.size();
    size_t at = begin;  // next byte to assign
    while (at < end) {
        // Text past the last known token (cannot happen: every byte is some
        // token's) goes to the target rather than being dropped.
        const bool have = !tokens_.empty();
        size_t cut = have ? std::clamp(tokens_.front().end, at, end) : end;
        // A continuation byte belongs to the character begun before it.
        while (cut < end && cut > at && ((unsigned char)piece[cut - begin] & 0xC0) == 0x80) ++cut;
        if (cut > at) {
            p.spans.push_back({std::string(piece.substr(at - begin, cut - at)), have && tokens_.front().draft});
            at = cut;
        }
        // Tokens that end here are fully released; one that goes on past the
        // piece stays for the next.
        while (!tokens_.empty() && tokens_.front().end <= at) tokens_.pop_front();
        if (!have) break;
    }
    released_ = end;
    return p;
}

}  // namespace specdec::server
