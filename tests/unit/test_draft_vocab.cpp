// A draft is refused unless each of the target's token ids means the same text
// in the draft (runtime/draft_vocab.h); the error names both models.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "runtime/draft_vocab.h"
#include "unit/gguf_writer.h"

using namespace specdec;

namespace {

// A BPE vocabulary of the given texts (tokenizer metadata only: all the check reads).
struct Vocab {
    std::vector<uint8_t> bytes;
    std::unique_ptr<io::GgufFile> file;
    std::unique_ptr<io::Tokenizer> tok;
};

std::unique_ptr<Vocab> vocab(const std::vector<std::string>& tokens) {
    auto v = std::make_unique<Vocab>();
    test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2");
    w.kv_str("tokenizer.ggml.pre", "qwen2");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_str_array("tokenizer.ggml.merges", {"a b"});
    v->bytes = w.bytes();
    v->file = io::GgufFile::parse(v->bytes.data(), v->bytes.size(), "vocab");
    v->tok = io::Tokenizer::from_gguf(*v->file);
    return v;
}

std::vector<std::string> texts(int n) {
    std::vector<std::string> t{"a", "b", "ab"};
    for (int i = 3; i < n; ++i) t.push_back("tok" + std::to_string(i));
    return t;
}

// The check's message, or "" when the pair is accepted.
std::string refusal(const Vocab& t, int t_rows, const Vocab& d, int d_rows) {
    try {
        runtime::check_draft_vocabulary({"target.gguf", *t.tok, t_rows}, {"draft.gguf", *d.tok, d_rows});
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(DraftVocab, SameVocabularyIsAccepted) {
    auto t = vocab(texts(40)), d = vocab(texts(40));
    EXPECT_EQ(refusal(*t, 40, *d, 40), "");
    // Padding rows past both token lists (output tables rounded up) are no text on either side.
    EXPECT_EQ(refusal(*t, 48, *d, 48), "");
}

TEST(DraftVocab, DraftExtendingTheTargetIsAccepted) {
    // Its extra ids are never proposed (drafts are cut to the target's width).
    auto t = vocab(texts(40)), d = vocab(texts(45));
    EXPECT_EQ(refusal(*t, 40, *d, 45), "");
}

TEST(DraftVocab, OneDifferentTokenIsRefusedNamingBothModels) {
    auto tt = texts(40), dt = texts(40);
    dt[17] = std::string("other");  // (assigning a literal trips a GCC 12 -Wrestrict false positive)
    auto t = vocab(tt), d = vocab(dt);
    const std::string msg = refusal(*t, 40, *d, 40);
    EXPECT_NE(msg.find("draft model 'draft.gguf'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("target model 'target.gguf'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("token id 17 ('tok17' in the target, 'other' in the draft)"), std::string::npos) << msg;
}

TEST(DraftVocab, DraftSmallerThanTheTargetIsRefused) {
    // A strict prefix: the target's ids past the draft's table cannot be fed to the draft.
    auto t = vocab(texts(40)), d = vocab(texts(30));
    const std::string msg = refusal(*t, 40, *d, 30);
    EXPECT_NE(msg.find("has 30 tokens, fewer than the target's 40"), std::string::npos) << msg;
    // The same with the draft's table padded to the target's size: ids 30-39
    // are texts in the target and none in the draft.
    const std::string padded = refusal(*t, 40, *d, 40);
    EXPECT_NE(padded.find("token id 30 ('tok30' in the target, no token in the draft)"), std::string::npos) << padded;
}

TEST(DraftVocab, ControlBytesAreEscapedInTheMessage) {
    auto tt = texts(8), dt = texts(8);
    tt[5] = std::string("\n");
    auto t = vocab(tt), d = vocab(dt);
    const std::string msg = refusal(*t, 8, *d, 8);
    EXPECT_NE(msg.find("('\\x0a' in the target"), std::string::npos) << msg;
}
