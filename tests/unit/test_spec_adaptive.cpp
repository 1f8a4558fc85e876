// The adaptive proposer (--method auto) and its parts: the acceptance
// estimator, the row cost curve, the shape choice on synthetic cost models
// (AR when drafts cannot pay, the longest chain when they always pay, lookup
// over a dear draft, shapes per sequence in a batch), the proposer's own
// bookkeeping (draft catch-up, revisits), and greedy identity with AR on
// synthetic models under cost models that make it mix every shape.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "sched/sync_scheduler.h"
#include "spec/adaptive_proposer.h"
#include "spec/cost_model.h"
#include "spec/draft_model_proposer.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

using test::linear_curve;

spec::AcceptanceEstimator estimator_at(double p) {
    // A heavy prior at p: the estimate is p at every depth.
    return spec::AcceptanceEstimator(spec::AcceptanceOptions{p, 1e6, 1.0, 16});
}

}  // namespace

TEST(Acceptance, DepthsTestedUpToTheFirstRejection) {
    spec::AcceptanceEstimator e(spec::AcceptanceOptions{0.5, 2.0, 1.0, 8});
    EXPECT_DOUBLE_EQ(e.p(1), 0.5);
    e.observe(2, 4);  // depths 1, 2 accepted, 3 rejected, 4 untested
    EXPECT_DOUBLE_EQ(e.p(1), 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(e.p(2), 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(e.p(3), 1.0 / 3.0);
    EXPECT_DOUBLE_EQ(e.p(4), 0.5);
    e.observe(3, 3);  // all accepted: nothing rejected
    EXPECT_DOUBLE_EQ(e.p(3), 2.0 / 4.0);
    // Expected tokens of a chain: 1 + p1 + p1 p2 + ...
    EXPECT_DOUBLE_EQ(e.expected_tokens(0), 1.0);
    EXPECT_NEAR(e.expected_tokens(2), 1 + e.p(1) + e.p(1) * e.p(2), 1e-12);
    EXPECT_THROW(e.observe(3, 2), std::exception);
    // Depths past max_depth share the last one's counts.
    EXPECT_DOUBLE_EQ(e.p(20), e.p(8));
}

TEST(Acceptance, DecayFollowsAChangeAndPooledMatchesTheFanoutRate) {
    spec::AcceptanceEstimator e(spec::AcceptanceOptions{0.7, 2.0, 0.8, 16});
    for (int i = 0; i < 40; ++i) e.observe(4, 4);
    EXPECT_GT(e.p(1), 0.95);
    for (int i = 0; i < 15; ++i) e.observe(0, 4);  // the text turned: nothing accepted
    EXPECT_LT(e.p(1), 0.1);
    // Pooled over depths, nothing forgotten: the SSD fan-out's old formula.
    spec::AcceptanceEstimator f(spec::AcceptanceOptions{0.7, 10.0, 1.0, 16});
    f.observe(3, 5);
    f.observe(5, 5);
    f.observe(0, 2);
    EXPECT_DOUBLE_EQ(f.pooled(), (7.0 + 8.0) / (10.0 + 8.0 + 2.0));
    // A revisit puts an optimistic belief back.
    e.revisit(0.9, 1.0);
    EXPECT_DOUBLE_EQ(e.p(1), 0.9);
}

TEST(RowCost, InterpolatesBetweenAndExtrapolatesPastMeasuredCounts) {
    spec::RowCostCurve c(16);
    EXPECT_TRUE(c.empty());
    EXPECT_EQ(c.seconds(3), 0.0);
    c.set(1, 1.0);
    EXPECT_DOUBLE_EQ(c.seconds(4), 1.0);  // one point: flat, never below it
    c.set(4, 2.5);
    EXPECT_DOUBLE_EQ(c.seconds(2), 1.5);
    EXPECT_DOUBLE_EQ(c.seconds(3), 2.0);
    EXPECT_DOUBLE_EQ(c.seconds(6), 3.5);   // slope 0.5 from the last two
    EXPECT_DOUBLE_EQ(c.seconds(40), 20.5);  // past max_rows too
    EXPECT_DOUBLE_EQ(c.ratio(4), 2.5);
    c.observe(4, 3.5, 0.5);
    EXPECT_DOUBLE_EQ(c.seconds(4), 3.0);
    EXPECT_TRUE(c.measured(4));
    EXPECT_FALSE(c.measured(5));
}

TEST(ChooseShapes, NoDraftWhenVerificationCostsAsMuchAsTheRowsItChecks) {
    // t(n) = n: a row of verification costs a whole step; even drafts that
    // are always accepted cannot beat AR once the draft costs anything.
    const auto tgt = linear_curve(1.0, 1.0);
    const auto drf = linear_curve(0.1, 0.1);
    const spec::AcceptanceEstimator sure = estimator_at(0.999);
    spec::ShapeCandidates c;
    c.draft = &sure;
    c.draft_max = 8;
    c.max_drafts = 8;
    const spec::ShapePlan plan = spec::choose_shapes(std::span(&c, 1), {tgt.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::None);
    EXPECT_DOUBLE_EQ(plan.predicted_s, 1.0);
    EXPECT_DOUBLE_EQ(plan.expected_tokens, 1.0);
}

TEST(ChooseShapes, LongestChainWhenDraftsAlwaysPay) {
    // Verification nearly free per row, a cheap draft, high acceptance.
    const auto tgt = linear_curve(1.0, 0.02);
    const auto drf = linear_curve(0.02, 0.001);
    const spec::AcceptanceEstimator good = estimator_at(0.95);
    spec::ShapeCandidates c;
    c.draft = &good;
    c.draft_max = 6;
    c.max_drafts = 10;
    spec::ShapePlan plan = spec::choose_shapes(std::span(&c, 1), {tgt.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::Draft);
    EXPECT_EQ(plan.shapes[0].k, 6);
    // The room left caps it.
    c.max_drafts = 3;
    plan = spec::choose_shapes(std::span(&c, 1), {tgt.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].k, 3);
    // A long catch-up (the draft missed many tokens) is part of the cost.
    c.max_drafts = 10;
    c.draft_catchup = 1000;
    const auto steep = linear_curve(0.02, 0.02);
    plan = spec::choose_shapes(std::span(&c, 1), {tgt.get(), steep.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::None);
}

TEST(ChooseShapes, SiblingsWhereRowsAreCheapAndTheFirstChoiceIsOftenWrong) {
    // The expected tokens of a chain with sibling leaves: 1 + sum_i P_i +
    // sum_{i <= s} P_{i-1} (1 - p_i) q_i, here p = 0.5, q = 0.6.
    const auto flat = linear_curve(1.0, 0.001);
    const auto drf = linear_curve(0.02, 0.001);
    const spec::AcceptanceEstimator half = estimator_at(0.5), q = estimator_at(0.6);
    spec::ShapeCandidates c;
    c.draft = &half;
    c.draft_max = 3;
    c.max_drafts = 10;
    c.sibling = &q;
    c.sibling_max = 3;
    spec::ShapePlan plan;
    plan.shapes = {{spec::ShapeKind::Draft, 2, 1}};
    spec::evaluate_plan(std::span(&c, 1), {flat.get(), drf.get(), 1.0}, plan);
    EXPECT_NEAR(plan.expected_tokens, 1 + 0.5 + 0.25 + 0.5 * 0.6, 1e-9);
    EXPECT_NEAR(plan.predicted_s, flat->seconds(4) + drf->seconds(1) + drf->seconds(1), 1e-12);
    plan.shapes = {{spec::ShapeKind::Draft, 3, 3}};
    spec::evaluate_plan(std::span(&c, 1), {flat.get(), drf.get(), 1.0}, plan);
    EXPECT_NEAR(plan.expected_tokens, 1 + (0.5 + 0.25 + 0.125) + 0.3 * (1 + 0.5 + 0.25), 1e-9);
    // Rows nearly free: a sibling at every depth of the longest chain.
    plan = spec::choose_shapes(std::span(&c, 1), {flat.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0], (spec::Shape{spec::ShapeKind::Draft, 3, 3}));
    // Room for 4 drafts: the best shape within it still carries a sibling.
    c.max_drafts = 4;
    plan = spec::choose_shapes(std::span(&c, 1), {flat.get(), drf.get(), 1.0});
    EXPECT_LE(plan.shapes[0].rows(), 5);
    EXPECT_GT(plan.shapes[0].siblings, 0);
    // A row that costs 0.35 of a step: a chain of one still pays (1.5 tokens
    // for 1.37 s), a sibling beside it (0.3 tokens more for 0.35 s) does not.
    c.max_drafts = 10;
    const auto dear = linear_curve(1.0, 0.35);
    plan = spec::choose_shapes(std::span(&c, 1), {dear.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0], (spec::Shape{spec::ShapeKind::Draft, 1, 0}));
    // A second choice that is never right: none either; and none without a sibling estimator.
    const spec::AcceptanceEstimator never = estimator_at(0.001);
    c.sibling = &never;
    plan = spec::choose_shapes(std::span(&c, 1), {flat.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::Draft);
    EXPECT_EQ(plan.shapes[0].siblings, 0);
    c.sibling = nullptr;
    plan = spec::choose_shapes(std::span(&c, 1), {flat.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].siblings, 0);
}

TEST(ChooseShapes, FreeLookupBeatsADearDraftAndAcceptanceSetsTheLength) {
    const auto tgt = linear_curve(1.0, 0.15);
    const auto drf = linear_curve(0.5, 0.05);  // the draft costs half a step
    const spec::AcceptanceEstimator draft_est = estimator_at(0.8);
    const spec::AcceptanceEstimator lookup_est = estimator_at(0.9);
    spec::ShapeCandidates c;
    c.draft = &draft_est;
    c.draft_max = 6;
    c.lookup = &lookup_est;
    c.lookup_len = 8;
    c.max_drafts = 8;
    const spec::ShapePlan plan = spec::choose_shapes(std::span(&c, 1), {tgt.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::Lookup);
    // Rate E(k) / (1 + 0.15 k) with p = 0.9 peaks inside (1, 8).
    double best = 0;
    int best_k = 0;
    for (int k = 0; k <= 8; ++k) {
        const double r = lookup_est.expected_tokens(k) / (1 + 0.15 * k);
        if (r > best) best = r, best_k = k;
    }
    EXPECT_EQ(plan.shapes[0].k, best_k);
    EXPECT_NEAR(plan.expected_tokens / plan.predicted_s, best, 1e-9);
    // A lookup that is never accepted is not worth a row.
    const spec::AcceptanceEstimator bad = estimator_at(0.01);
    c.lookup = &bad;
    c.draft = nullptr;
    EXPECT_EQ(spec::choose_shapes(std::span(&c, 1), {tgt.get(), drf.get(), 1.0}).shapes[0].kind,
              spec::ShapeKind::None);
}

TEST(ChooseShapes, BatchGivesDraftsToTheSequencesThatAcceptThem) {
    // A flat-ish verification curve: extra rows are cheap for the batch.
    const auto tgt = linear_curve(1.0, 0.05);
    const auto drf = linear_curve(0.05, 0.01);
    const spec::AcceptanceEstimator good = estimator_at(0.9), poor = estimator_at(0.02);
    std::vector<spec::ShapeCandidates> cs(3);
    cs[0].draft = &good;
    cs[1].draft = &poor;
    cs[2].draft = &good;
    for (auto& c : cs) c.draft_max = 5, c.max_drafts = 5;
    const spec::ShapePlan plan = spec::choose_shapes(cs, {tgt.get(), drf.get(), 1.0});
    EXPECT_EQ(plan.shapes[0].kind, spec::ShapeKind::Draft);
    EXPECT_EQ(plan.shapes[1].kind, spec::ShapeKind::None);
    EXPECT_EQ(plan.shapes[2].kind, spec::ShapeKind::Draft);
    EXPECT_GT(plan.expected_tokens / plan.predicted_s, 3.0 / plan.ar_s);
    // The draft's forwards are batched by depth: depth 1 reads both
    // sequences' catch-up rows in one forward, later depths one row each.
    spec::ShapePlan p2;
    p2.shapes = {{spec::ShapeKind::Draft, 2}, {spec::ShapeKind::None, 0}, {spec::ShapeKind::Draft, 1}};
    spec::evaluate_plan(cs, {tgt.get(), drf.get(), 1.0}, p2);
    EXPECT_NEAR(p2.predicted_s, tgt->seconds(3 + 3) + drf->seconds(2) + drf->seconds(1), 1e-12);
}

namespace {

// Records what it is asked; drafts the chain root+1, root+2, ... (mod 64).
class CountingChain final : public spec::Proposer {
public:
    std::vector<int> asked_nodes;  // max_nodes per proposed sequence
    double forward_s = 0.01;
    void propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng&) override {
        for (size_t i = 0; i < in.size(); ++i) {
            asked_nodes.push_back(in[i].max_nodes);
            out[i].reset(in[i].history.back());
            for (int j = 1; j < in[i].max_nodes; ++j) out[i].add((in[i].history.back() + j) % 64, j - 1, 0.0f);
        }
    }
    double last_forward_s() const override { return forward_s; }
};

}  // namespace

TEST(AdaptiveProposer, ArWhenNothingPaysThenRevisitsTheDraft) {
    auto chain = std::make_unique<CountingChain>();
    CountingChain* rec = chain.get();
    spec::AdaptiveOptions o;
    o.draft_max = 4;
    o.explore_share = 0.2;  // probes every couple of idle rounds (a probe costs about 0.2 s here)
    o.learn_costs = false;
    o.draft_acceptance = {0.5, 2.0, 0.9, 16};
    // t(n) = 1 + 0.1 (n - 1): a draft chain pays at p = 0.9 but not at p = 0.
    spec::AdaptiveProposer p(std::move(chain), linear_curve(1.0, 0.1), linear_curve(0.1, 0.01), o);
    p.begin(0);
    const std::vector<int32_t> hist{1, 2, 3, 4, 5};  // no repeated n-gram: no lookup
    std::vector<spec::ProposeInput> in{{0, hist, 16}};
    std::vector<spec::DraftTree> out(1);
    Rng rng(1);
    // Nothing accepted for a while: the draft stops being used.
    int none_rounds = 0;
    for (int r = 0; r < 8; ++r) {
        p.propose(in, out, rng);
        const int drafted = out[0].size() - 1;
        if (drafted == 0) ++none_rounds;
        const spec::RoundOutcome oc{0, drafted, 0};
        p.observe({std::span(&oc, 1), 1 + drafted, 1.0});
    }
    EXPECT_GT(none_rounds, 0);
    EXPECT_GT(p.stats().rounds_none, 0);
    // Once its exploration credit covers a probe it is tried again (one token, from the prior).
    const size_t asked_before = rec->asked_nodes.size();
    for (int r = 0; r < 12; ++r) {
        p.propose(in, out, rng);
        const int drafted = out[0].size() - 1;
        const spec::RoundOutcome oc{0, drafted, drafted};  // now everything is accepted
        p.observe({std::span(&oc, 1), 1 + drafted, 1.0});
    }
    EXPECT_GT(rec->asked_nodes.size(), asked_before);
    // Once accepted, the draft is back in use with chains that grow as their
    // depths prove themselves (a depth never drafted keeps its 0.5 prior, at
    // which the fourth draft does not quite pay here).
    p.propose(in, out, rng);
    EXPECT_GE(rec->asked_nodes.back(), 4);
    EXPECT_EQ(p.last_plan().shapes[0].kind, spec::ShapeKind::Draft);
}

// Where no draft can pay and every draft is rejected, auto runs as AR but
// for its probes, and what those cost stays within the exploration budget:
// explore_share of the AR time, per drafter (here the draft model only).
TEST(AdaptiveProposer, ProbesOfAnIdleDrafterStayWithinTheExplorationBudget) {
    auto chain = std::make_unique<CountingChain>();
    spec::AdaptiveOptions o;
    o.draft_max = 4;
    o.learn_costs = false;
    o.explore_share = 0.01;
    o.ar_probe_every = 0;
    // r(2) = 1.5 and a draft step at 0.3 of a target row: one draft pays
    // only above 80 % acceptance, so from the 0.5 prior nothing is drafted.
    spec::AdaptiveProposer p(std::move(chain), linear_curve(1.0, 0.5), linear_curve(0.3, 0.01), o);
    p.begin(0);
    const std::vector<int32_t> hist{1, 2, 3, 4, 5};  // no lookup match
    std::vector<spec::ProposeInput> in{{0, hist, 16}};
    std::vector<spec::DraftTree> out(1);
    Rng rng(1);
    const int rounds = 2000;
    double extra_s = 0;  // predicted seconds beyond plain AR's, summed over the rounds
    for (int r = 0; r < rounds; ++r) {
        p.propose(in, out, rng);
        const int drafted = out[0].size() - 1;
        extra_s += p.last_plan().predicted_s - p.last_plan().ar_s;
        const spec::RoundOutcome oc{0, drafted, 0};
        p.observe({std::span(&oc, 1), 1 + drafted, 1.0});
    }
    const auto& st = p.stats();
    EXPECT_EQ(st.rounds_draft, st.drafter_probes);  // it drafted only to probe
    EXPECT_GE(st.drafter_probes, 5);                // and it did probe: 2000 rounds earn 20 s
    // A probe costs 0.5 (the extra row) + 0.3 (the draft's forward) + its catch-up rows' share.
    EXPECT_LE(extra_s, o.explore_share * rounds * 1.0 + 1.0);
    EXPECT_GE(extra_s, 0.5 * o.explore_share * rounds * 1.0);
}

TEST(AdaptiveProposer, LookupChainsWhenTheHistoryRepeats) {
    spec::AdaptiveOptions o;
    o.lookup_max = 6;
    o.lookup_min_n = 2;
    o.learn_costs = false;
    o.lookup_acceptance = {0.9, 2.0, 0.9, 16};
    spec::AdaptiveProposer p(nullptr, linear_curve(1.0, 0.05), nullptr, o);
    p.begin(0);
    // "7 8" occurred before, followed by 9 10 11 12 13 5.
    const std::vector<int32_t> hist{7, 8, 9, 10, 11, 12, 13, 5, 7, 8};
    std::vector<spec::ProposeInput> in{{0, hist, 16}};
    std::vector<spec::DraftTree> out(1);
    Rng rng(1);
    p.propose(in, out, rng);
    EXPECT_TRUE(out[0].from_lookup);
    EXPECT_EQ(out[0].tokens, (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 5}));
    EXPECT_EQ(p.stats().rounds_lookup, 1);
    EXPECT_EQ(p.last_forward_s(), 0.0);
    // Without a match: a plain AR root.
    const std::vector<int32_t> fresh{1, 2, 3};
    std::vector<spec::ProposeInput> in2{{0, fresh, 16}};
    p.propose(in2, out, rng);
    EXPECT_EQ(out[0].size(), 1);
    EXPECT_THROW(spec::AdaptiveProposer(nullptr, std::make_shared<spec::RowCostCurve>(4), nullptr, o),
                 std::exception);
}

TEST(DraftModelProposer, SiblingsAreLeavesBesideTheChain) {
    // ProposeInput::siblings: the same chain as without, and at its first
    // `siblings` depths the draft's second choice as a leaf after the chain's
    // node; the room (max_nodes) goes to the chain first.
    ThreadPool pool(1);
    test::GreedyModels gm;
    spec::DraftModelOptions o;
    o.shape = spec::DraftShape::Chain;
    o.chain_k = 4;
    o.target_n_vocab = gm.target.n_vocab();
    spec::DraftModelProposer prop(*gm.other.model, *gm.other.cache, pool, o);
    const std::vector<int32_t> hist{1, 2, 3, 4, 5};
    Rng rng(1);
    std::vector<spec::DraftTree> out(1);
    const auto propose = [&](int siblings, int max_nodes) {
        prop.begin(0);
        std::vector<spec::ProposeInput> in{{0, hist, max_nodes, siblings}};
        prop.propose(in, out, rng);
        return out[0];
    };
    const spec::DraftTree chain = propose(0, 16);
    ASSERT_EQ(chain.size(), 5);
    const spec::DraftTree t = propose(2, 16);
    ASSERT_EQ(t.size(), 7);
    std::vector<int> depth(t.size(), 0), kids(t.size(), 0);
    std::vector<int32_t> chain_tok;
    for (int v = 1; v < t.size(); ++v) {
        const int par = t.parents[v];
        depth[v] = depth[par] + 1;
        if (kids[par]++ == 0) {
            chain_tok.push_back(t.tokens[v]);  // the first child continues the chain
        } else {
            EXPECT_LE(depth[v], 2) << "a sibling below depth 2";
            EXPECT_NE(t.tokens[v], t.tokens[v - 1]) << "a sibling repeats the chain's token";
        }
    }
    EXPECT_EQ(chain_tok, std::vector<int32_t>(chain.tokens.begin() + 1, chain.tokens.end()));
    // Siblings are leaves: every node with a child is a chain node.
    int leaves = 0;
    for (int v = 1; v < t.size(); ++v) leaves += kids[v] == 0;
    EXPECT_EQ(leaves, 3);  // the chain's tip and two siblings
    // Room for 5 drafts: the chain of 4 and one sibling.
    EXPECT_EQ(propose(3, 6).size(), 6);
    // Room for 3: the chain only, cut to 3.
    EXPECT_EQ(propose(3, 4).size(), 4);
}

namespace {

std::vector<std::vector<int32_t>> run_auto(test::TinyModel& target, test::TinyModel& draft, ThreadPool& pool,
                                           const std::shared_ptr<spec::RowCostCurve>& tcurve,
                                           const std::shared_ptr<spec::RowCostCurve>& dcurve,
                                           const std::vector<std::vector<int32_t>>& prompts, int n,
                                           sched::SpecStats& st, spec::ExecMode mode) {
    sample::SamplingParams params;  // greedy
    spec::DraftModelOptions o;
    o.shape = spec::DraftShape::Chain;
    o.chain_k = 5;
    o.sampled = true;
    o.target_n_vocab = target.n_vocab();
    o.params = params;
    auto chain = std::make_unique<spec::DraftModelProposer>(*draft.model, *draft.cache, pool, o);
    spec::AdaptiveOptions ao;
    ao.draft_max = 5;
    ao.lookup_max = 6;
    ao.lookup_min_n = 1;
    ao.sibling_max = 5;       // greedy: chains may carry sibling leaves
    ao.explore_share = 0.25;  // frequent probes: the runs below go through them often
    ao.learn_costs = false;  // the synthetic costs stay what the case says
    spec::AdaptiveProposer prop(std::move(chain), tcurve, dcurve, ao);
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    sched::SchedulerOptions so;
    so.mode = mode;
    so.tree_budget = 11;
    so.tree_depth = 6;
    so.distinct_siblings = true;
    sched::SyncScheduler s(tc, prop, params, so);
    std::vector<std::vector<int32_t>> out = test::run_collecting(s, prompts, n, st);
    return out;
}

}  // namespace

TEST(AdaptiveProposer, GreedyOutputIsArsUnderEveryCostModel) {
    ThreadPool pool(2);
    test::GreedyModels gm;  // an unrelated draft (low acceptance) and the target's twin (every draft accepted)
    test::TinyModel &target = gm.target, &other = gm.other, &self = gm.self;
    const auto& prompts = gm.prompts;
    const int n = 40;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));
    const auto& costs = test::auto_cost_cases();
    for (const auto& c : costs)
        for (test::TinyModel* d : {&other, &self})
            for (spec::ExecMode mode : {spec::ExecMode::Reference, spec::ExecMode::Performance})
                for (size_t bs : {1u, 3u}) {
                    std::vector<std::vector<int32_t>> ps(prompts.begin(), prompts.begin() + bs);
                    sched::SpecStats st;
                    const auto out = run_auto(target, *d, pool, linear_curve(c.ta, c.tb), linear_curve(c.da, c.db),
                                              ps, n, st, mode);
                    const std::string label = std::string(c.name) + (d == &self ? " self" : " other") +
                                              " batch=" + std::to_string(bs) + " " + sched::mode_name(mode);
                    for (size_t i = 0; i < bs; ++i) ASSERT_EQ(out[i], ref[i]) << label << " seq " << i;
                    EXPECT_EQ(st.auto_none + st.auto_lookup + st.auto_draft, st.seq_rounds) << label;
                    if (c.tb == 1.0) {
                        // AR but for probes of the idle drafters, each costing at
                        // least a whole row (1.0 s) against an explore_share of 0.25
                        // of every round's AR time per drafter.
                        EXPECT_LE(st.auto_draft + st.auto_lookup, 2 * (0.25 * (double)st.seq_rounds + (double)bs))
                            << label;
                    }
                    if (c.tb < 0.05 && d == &self) {
                        EXPECT_GT(st.mean_accept_len(), 2.0) << label;
                    }
                    // Rows nearly free and an unrelated draft's first choice
                    // often wrong: its second choices stand beside the chain.
                    if (c.tb < 0.05 && d == &other) {
                        EXPECT_GT(st.auto_sibling_drafts, 0) << label;
                    }
                    if (c.tb == 1.0) {
                        EXPECT_EQ(st.auto_sibling_drafts, 0) << label;
                    }
                }
}

TEST(ChooseShapes, AMarginalGainIsNotWorthTheGamble) {
    // A one-token lookup at p = 0.1 on a curve with t(2) = 1.07: predicted
    // rate 1.1 / 1.07 = 1.028x AR, which clears no bar above 2.8 %.
    const auto tgt = linear_curve(1.0, 0.07);
    const spec::AcceptanceEstimator weak = estimator_at(0.1);
    spec::ShapeCandidates c;
    c.lookup = &weak;
    c.lookup_len = 1;
    c.max_drafts = 4;
    EXPECT_EQ(spec::choose_shapes(std::span(&c, 1), {tgt.get(), nullptr, 1.0}, 0.0).shapes[0].kind,
              spec::ShapeKind::Lookup);
    EXPECT_EQ(spec::choose_shapes(std::span(&c, 1), {tgt.get(), nullptr, 1.0}, 0.05).shapes[0].kind,
              spec::ShapeKind::None);
}

TEST(AdaptiveProposer, TimesAPlainArRoundNowAndThenWhenDraftsAlwaysWin) {
    auto chain = std::make_unique<CountingChain>();
    spec::AdaptiveOptions o;
    o.draft_max = 3;
    o.ar_probe_every = 8;
    o.draft_acceptance = {0.95, 2.0, 0.9, 16};
    auto tcurve = linear_curve(1.0, 0.01);
    spec::AdaptiveProposer p(std::move(chain), tcurve, linear_curve(0.01, 0.001), o);
    p.begin(0);
    const std::vector<int32_t> hist{1, 2, 3, 4, 5};
    std::vector<spec::ProposeInput> in{{0, hist, 16}};
    std::vector<spec::DraftTree> out(1);
    Rng rng(1);
    std::vector<int> drafted;
    for (int r = 0; r < 27; ++r) {
        p.propose(in, out, rng);
        drafted.push_back(out[0].size() - 1);
        const spec::RoundOutcome oc{0, drafted.back(), drafted.back()};
        // The rounds time a 1-row forward at 2.0 s: AR got slower than calibrated.
        p.observe({std::span(&oc, 1), 1 + drafted.back(), drafted.back() == 0 ? 2.0 : 1.0});
    }
    // Rounds 8, 17 and 26 are the probes; all others draft the longest chain.
    for (int r = 0; r < 27; ++r) EXPECT_EQ(drafted[r], r % 9 == 8 ? 0 : 3) << "round " << r;
    EXPECT_EQ(p.stats().ar_probes, 3);
    // Each probe blends its 2.0 s into t(1) with weight 0.2: 2 - 0.8^3 after three.
    EXPECT_NEAR(tcurve->seconds(1), 2.0 - 0.8 * 0.8 * 0.8, 1e-9);
}
