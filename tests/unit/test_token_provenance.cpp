// server::TokenProvenance: the streamed text cut at token boundaries, each part
// with its token's source, the parts concatenating to the piece, and every
// token counted once; on pieces as runtime::StopChecker releases them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "server/token_provenance.h"

using namespace specdec;
using server::Provenance;
using server::TokenProvenance;
using spec::TokenSource;

namespace {

constexpr TokenSource D = TokenSource::Draft, T = TokenSource::Target;

std::string joined(const Provenance& p) {
    std::string s;
    for (const auto& x : p.spans) s += x.text;
    return s;
}

// "text:d" or "text:t" per span.
std::vector<std::string> parts(const Provenance& p) {
    std::vector<std::string> v;
    for (const auto& x : p.spans) v.push_back(x.text + (x.draft ? ":d" : ":t"));
    return v;
}

}  // namespace

TEST(TokenProvenance, OneSpanPerTokenAndCounts) {
    TokenProvenance tp;
    std::string text;
    // Tokens "The", " cat", " sat": target, draft, draft.
    for (auto [piece, src] : std::vector<std::pair<std::string, TokenSource>>{{"The", T}, {" cat", D}, {" sat", D}}) {
        text += piece;
        tp.add(text.size(), src);
    }
    const Provenance p = tp.take(text);
    EXPECT_EQ(parts(p), (std::vector<std::string>{"The:t", " cat:d", " sat:d"}));
    EXPECT_EQ(p.draft_tokens, 2);
    EXPECT_EQ(p.target_tokens, 1);
    // Nothing new: nothing counted twice.
    const Provenance q = tp.take("");
    EXPECT_TRUE(q.empty());
}

TEST(TokenProvenance, TokenSpanningTwoPiecesHasAPartInEach) {
    TokenProvenance tp;
    tp.add(5, T);   // "Hello"
    tp.add(11, D);  // " world"
    // A stop string of 4 bytes held back the last 4 bytes.
    const Provenance a = tp.take("Hello w");
    EXPECT_EQ(parts(a), (std::vector<std::string>{"Hello:t", " w:d"}));
    EXPECT_EQ(a.draft_tokens + a.target_tokens, 2);
    tp.add(12, T);  // "!"
    const Provenance b = tp.take("orld!");
    EXPECT_EQ(parts(b), (std::vector<std::string>{"orld:d", "!:t"}));
    EXPECT_EQ(b.draft_tokens, 0);
    EXPECT_EQ(b.target_tokens, 1);
}

TEST(TokenProvenance, NeverSplitsAUtf8Character) {
    // "é" is C3 A9; a byte-level token may end between the two bytes.
    const std::string text = "a\xC3\xA9z";
    TokenProvenance tp;
    tp.add(2, D);  // "a\xC3"
    tp.add(3, T);  // "\xA9"
    tp.add(4, T);  // "z"
    const Provenance p = tp.take(text);
    EXPECT_EQ(joined(p), text);
    ASSERT_EQ(p.spans.size(), 2u);
    EXPECT_EQ(p.spans[0].text, "a\xC3\xA9");  // the character goes to the token that began it
    EXPECT_TRUE(p.spans[0].draft);
    EXPECT_EQ(p.spans[1].text, "z");
    EXPECT_EQ(p.draft_tokens + p.target_tokens, 3);  // still counted, though one has no part
}

TEST(TokenProvenance, StopStringCutAndEmptyTokens) {
    TokenProvenance tp;
    tp.add(3, T);  // "abc"
    tp.add(3, D);  // a token with no text
    // A stop string cut the text back to 2 bytes ("ab") after the third token.
    tp.add(2, D);
    const Provenance p = tp.take("ab");
    EXPECT_EQ(parts(p), (std::vector<std::string>{"ab:t"}));
    EXPECT_EQ(p.draft_tokens, 2);
    EXPECT_EQ(p.target_tokens, 1);
}

// Random texts of 1-4 byte characters, cut into tokens at random bytes (as
// byte-level BPE may cut a character) and released at random character
// boundaries (as StopChecker::take_stable_text does): every piece's parts
// concatenate to it, no part starts inside a character, and each token is
// counted exactly once.
TEST(TokenProvenance, RandomCutsAndReleases) {
    const std::vector<std::string> chars{"a", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x8C\x8A"};
    uint32_t state = 12345;
    const auto next = [&](uint32_t n) {
        state = state * 1664525u + 1013904223u;
        return (state >> 8) % n;
    };
    for (int trial = 0; trial < 300; ++trial) {
        std::string text;
        const int n_chars = 1 + (int)next(40);
        for (int i = 0; i < n_chars; ++i) text += chars[next((uint32_t)chars.size())];
        TokenProvenance tp;
        int n_tokens = 0, counted = 0;
        size_t added = 0, released = 0;
        while (released < text.size()) {
            // Add a token or two...
            for (int k = (int)next(3); k >= 0 && added < text.size(); --k) {
                added = std::min(text.size(), added + 1 + next(6));
                tp.add(added, next(2) ? TokenSource::Draft : TokenSource::Target);
                ++n_tokens;
            }
            // ...then release up to a character boundary at or before the text so far.
            size_t upto = released + next((uint32_t)(added - released + 1));
            if (added == text.size() && next(2)) upto = added;
            while (upto > released && upto < text.size() && ((unsigned char)text[upto] & 0xC0) == 0x80) --upto;
            const std::string piece = text.substr(released, upto - released);
            const Provenance p = tp.take(piece);
            ASSERT_EQ(joined(p), piece) << "trial " << trial;
            for (const auto& s : p.spans) {
                ASSERT_FALSE(s.text.empty());
                EXPECT_NE((unsigned char)s.text[0] & 0xC0, 0x80) << "a part starts inside a character";
            }
            counted += p.draft_tokens + p.target_tokens;
            released = upto;
        }
        counted += tp.take("").draft_tokens;  // none left: every token was counted with a piece
        EXPECT_EQ(counted, n_tokens) << "trial " << trial;
    }
}
