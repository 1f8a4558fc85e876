// Splits a request's streamed text by the tokens it came from, for the
// `specdec.provenance` extension (openai_protocol.h: Provenance). The
// scheduler reports each completion token as the StopChecker takes it, with
// the verifier's verdict (spec::TokenSource: accepted draft or the target's
// own); the text pieces the StopChecker releases (take_stable_text,
// take_remaining) are then cut at those tokens' byte offsets.
#pragma once

#include <cstddef>
#include <deque>
#include <string_view>

#include "server/openai_protocol.h"
#include "spec/verifier.h"

namespace specdec::server {

class TokenProvenance {
public:
    // A completion token entered the text, which now ends at byte `text_end`
    // (StopChecker::text().size() after the push; a stop string may have cut
    // the text back, so ends are not always increasing).
    void add(size_t text_end, spec::TokenSource source);
    // `piece`: the next bytes released for streaming, right after the previous
    // piece. Returns its parts by token (never splitting a UTF-8 character:
    // a boundary inside one moves to its end) and the tokens added since the
    // previous call.
    Provenance take(std::string_view piece);

private:
    struct Token {
        size_t end;
        bool draft;
    };
    std::deque<Token> tokens_;  // tokens whose text is not all released yet
    size_t released_ = 0;       // bytes released so far
    int new_draft_ = 0, new_target_ = 0;
};

}  // namespace specdec::server
