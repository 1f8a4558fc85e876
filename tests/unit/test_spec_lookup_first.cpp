// LookupFirstProposer: which sequences get a lookup chain and which are
// handed to the draft proposer, with what; the wrapped proposer sees only the
// sequences without a match, in one call, and its trees land in their slots.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "spec/lookup_first_proposer.h"
#include "spec/trace.h"

using namespace specdec;

namespace {

// Records its calls; proposes a one-node chain "root + 1000 + seq".
class RecordingProposer final : public spec::Proposer {
public:
    std::vector<std::vector<int>> calls;  // seq ids per propose call
    std::vector<int> begun, prefilled;
    void begin(int seq) override { begun.push_back(seq); }
    void prefill(int seq, std::span<const int32_t>) override { prefilled.push_back(seq); }
    void propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng&) override {
        calls.emplace_back();
        for (size_t i = 0; i < in.size(); ++i) {
            calls.back().push_back(in[i].seq);
            out[i].reset(in[i].history.back());
            out[i].add(1000 + in[i].seq, 0, -0.5f);
        }
    }
};

}  // namespace

TEST(LookupFirst, MatchesGetLookupChainsOthersOneDraftCall) {
    auto inner = std::make_unique<RecordingProposer>();
    RecordingProposer* rec = inner.get();
    spec::LookupFirstProposer p(std::move(inner), spec::LookupFirstOptions{2, 3, 4});
    // seq 0: ends with "7 8", seen before and followed by 9 10 11 12 13.
    const std::vector<int32_t> h0{7, 8, 9, 10, 11, 12, 13, 5, 7, 8};
    // seq 1: its last token recurs but no 2-gram does: below min_n, drafted.
    const std::vector<int32_t> h1{1, 2, 3, 4, 2};
    // seq 2: nothing recurs: drafted.
    const std::vector<int32_t> h2{20, 21, 22};
    // seq 3: a match, but only 2 tokens follow it before the end of history.
    const std::vector<int32_t> h3{4, 5, 6, 4, 5};
    std::vector<spec::ProposeInput> in{{0, h0, 16}, {1, h1, 16}, {2, h2, 16}, {3, h3, 16}};
    std::vector<spec::DraftTree> out(in.size());
    Rng rng(1);
    p.propose(in, out, rng);

    ASSERT_EQ(rec->calls.size(), 1u);
    EXPECT_EQ(rec->calls[0], (std::vector<int>{1, 2}));
    EXPECT_EQ(out[0].tokens, (std::vector<int32_t>{8, 9, 10, 11, 12}));  // root + max_draft 4
    EXPECT_EQ(out[0].parents, (std::vector<int32_t>{0, 0, 1, 2, 3}));
    EXPECT_EQ(out[0].kind, spec::DraftKind::Deterministic);
    EXPECT_EQ(out[1].tokens, (std::vector<int32_t>{2, 1001}));
    EXPECT_EQ(out[2].tokens, (std::vector<int32_t>{22, 1002}));
    EXPECT_EQ(out[3].tokens, (std::vector<int32_t>{5, 6, 4, 5}));
    // Traces and metrics tell lookup chains from the draft's trees.
    EXPECT_TRUE(out[0].from_lookup);
    EXPECT_FALSE(out[1].from_lookup);
    EXPECT_FALSE(out[2].from_lookup);
    EXPECT_TRUE(out[3].from_lookup);
    EXPECT_STREQ(spec::draft_source(out[0]), "lookup");
    EXPECT_STREQ(spec::draft_source(out[1]), "draft");
    EXPECT_EQ(p.lookup_rounds(), 2);
    EXPECT_EQ(p.draft_rounds(), 2);
}

TEST(LookupFirst, RespectsMaxNodesAndSkipsDraftWhenAllMatch) {
    auto inner = std::make_unique<RecordingProposer>();
    RecordingProposer* rec = inner.get();
    spec::LookupFirstProposer p(std::move(inner), spec::LookupFirstOptions{1, 3, 8});
    const std::vector<int32_t> h{1, 2, 3, 4, 5, 6, 1};
    std::vector<spec::ProposeInput> in{{0, h, 3}};  // room for the root + 2
    std::vector<spec::DraftTree> out(1);
    Rng rng(1);
    p.propose(in, out, rng);
    EXPECT_TRUE(rec->calls.empty());
    EXPECT_EQ(out[0].tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(p.last_forward_s(), 0.0);
    // max_nodes 1: no room for drafts at all; the draft proposer decides (as
    // it would without the wrapper).
    std::vector<spec::ProposeInput> none{{0, h, 1}};
    p.propose(none, out, rng);
    ASSERT_EQ(rec->calls.size(), 1u);
}

TEST(LookupFirst, ForwardsLifecycleToTheDraftProposer) {
    auto inner = std::make_unique<RecordingProposer>();
    RecordingProposer* rec = inner.get();
    spec::LookupFirstProposer p(std::move(inner), spec::LookupFirstOptions{});
    const std::vector<int32_t> h{1, 2, 3};
    p.begin(4);
    p.prefill(4, h);
    EXPECT_EQ(rec->begun, (std::vector<int>{4}));
    EXPECT_EQ(rec->prefilled, (std::vector<int>{4}));
    EXPECT_THROW(spec::LookupFirstProposer(nullptr, spec::LookupFirstOptions{}), std::exception);
    EXPECT_THROW(spec::LookupFirstProposer(std::make_unique<RecordingProposer>(), spec::LookupFirstOptions{3, 2, 4}),
                 std::exception);
}
