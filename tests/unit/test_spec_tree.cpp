// Tree tensors, the invariant checker (fuzzed with random and corrupted trees:
// each corruption must be caught under its own rule name), the greedy verifier,
// the n-gram lookup and the vocabulary subset.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "core/error.h"
#include "spec/ngram_proposer.h"
#include "spec/tree_invariants.h"
#include "spec/tree_tensors.h"
#include "spec/verifier.h"
#include "spec/vocab_subset.h"

using namespace specdec;
using namespace specdec::spec;

namespace {

DraftTree random_tree(std::mt19937& rng, int n, int n_vocab) {
    DraftTree t;
    t.reset((int32_t)(rng() % n_vocab));
    for (int i = 1; i < n; ++i) {
        const int parent = (int)(rng() % i);
        // Distinct siblings: retry tokens already used under this parent.
        int32_t tok;
        bool dup;
        do {
            tok = (int32_t)(rng() % n_vocab);
            dup = false;
            for (int j = 1; j < t.size(); ++j) dup |= t.parents[j] == parent && t.tokens[j] == tok;
        } while (dup);
        t.add(tok, parent, 0.0f);
    }
    return t;
}

TreeLimits limits(int n_vocab) {
    TreeLimits l;
    l.n_vocab = n_vocab;
    l.budget = 64;
    l.max_depth = 64;
    l.distinct_siblings = true;
    return l;
}

}  // namespace

TEST(SpecTreeTensors, HandBuiltTree) {
    // 0 -> {1, 2}; 1 -> {3, 4}; 3 -> {5}
    DraftTree t;
    t.reset(10);
    t.add(11, 0, 0);
    t.add(12, 0, 0);
    t.add(13, 1, 0);
    t.add(14, 1, 0);
    t.add(15, 3, 0);
    TreeTensors tt;
    build_tree_tensors(t, 7, ExecMode::Reference, tt);
    EXPECT_EQ(tt.parent, (std::vector<int32_t>{0, 0, 0, 1, 1, 3}));
    EXPECT_EQ(tt.depth, (std::vector<int32_t>{0, 1, 1, 2, 2, 3}));
    EXPECT_EQ(tt.position, (std::vector<int32_t>{7, 8, 8, 9, 9, 10}));
    EXPECT_EQ(tt.max_depth, 3);
    // Ancestor rows padded with the root (0), never -1.
    EXPECT_EQ(tt.anc, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 3, 0, 0, 1, 4, 0, 0, 1, 3, 5}));
    EXPECT_EQ(tt.leaves, (std::vector<int32_t>{2, 4, 5}));
    // Paths padded with the dummy index T = 6.
    EXPECT_EQ(tt.paths, (std::vector<int32_t>{0, 2, 6, 6, 0, 1, 4, 6, 0, 1, 3, 5}));
    EXPECT_EQ(tt.mask[5 * 6 + 1], 1);
    EXPECT_EQ(tt.mask[5 * 6 + 4], 0);
    EXPECT_EQ(tt.mask[2 * 6 + 1], 0);
    for (int32_t v : tt.anc) EXPECT_GE(v, 0);
    for (int32_t v : tt.paths) EXPECT_GE(v, 0);
    EXPECT_TRUE(check_tree(tt, limits(100), ExecMode::Reference).ok());
    model::ForwardBatch b;
    b.add(1, 0, 0, -1, true);  // another sequence's row first: parents are offset
    EXPECT_EQ(append_tree_rows(tt, 1, b), 1);
    EXPECT_EQ(b.parents, (std::vector<int32_t>{0, 1, 1, 1, 2, 2, 4}));
    EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 7, 8, 8, 9, 9, 10}));
}

TEST(SpecTreeInvariants, RandomTreesAreValidInBothModes) {
    std::mt19937 rng(1);
    for (int iter = 0; iter < 500; ++iter) {
        const int n = 1 + (int)(rng() % 40);
        const DraftTree t = random_tree(rng, n, 50);
        for (ExecMode m : {ExecMode::Reference, ExecMode::Performance}) {
            TreeTensors tt;
            build_tree_tensors(t, (int)(rng() % 100), m, tt);
            const TreeViolation v = check_tree(tt, limits(50), m);
            ASSERT_TRUE(v.ok()) << v.message();
        }
    }
}

// Each corruption is applied to a valid random tree; the checker must name the
// rule it breaks (the first rule in checking order that can fail).
TEST(SpecTreeInvariants, EveryCorruptionIsCaughtByName) {
    struct Corruption {
        const char* rule;
        std::function<bool(TreeTensors&, std::mt19937&)> apply;  // false: not applicable to this tree
    };
    auto node = [](const TreeTensors& t, std::mt19937& r) { return 1 + (int)(r() % (t.n - 1)); };
    const std::vector<Corruption> cs = {
        {"empty", [](TreeTensors& t, std::mt19937&) { t = TreeTensors{}; return true; }},
        {"array_size", [](TreeTensors& t, std::mt19937&) { t.depth.pop_back(); return true; }},
        {"root_parent", [](TreeTensors& t, std::mt19937&) { t.parent[0] = -1; return true; }},
        {"parent_range", [&](TreeTensors& t, std::mt19937& r) { t.parent[node(t, r)] = -1; return true; }},
        {"parent_range", [&](TreeTensors& t, std::mt19937& r) { t.parent[node(t, r)] = t.n + 3; return true; }},
        {"parent_order", [&](TreeTensors& t, std::mt19937& r) { const int i = node(t, r); t.parent[i] = i; return true; }},
        {"root_depth", [](TreeTensors& t, std::mt19937&) { t.depth[0] = 1; return true; }},
        {"depth", [&](TreeTensors& t, std::mt19937& r) { t.depth[node(t, r)] += 1; return true; }},
        {"position", [&](TreeTensors& t, std::mt19937& r) { t.position[(int)(r() % t.n)] += 1; return true; }},
        {"max_depth", [](TreeTensors& t, std::mt19937&) { t.max_depth += 1; return true; }},
        {"token_range", [&](TreeTensors& t, std::mt19937& r) { t.tokens[(int)(r() % t.n)] = 50; return true; }},
        {"token_range", [&](TreeTensors& t, std::mt19937& r) { t.tokens[(int)(r() % t.n)] = -2; return true; }},
        {"duplicate_sibling",
         [](TreeTensors& t, std::mt19937&) {
             for (int i = 1; i < t.n; ++i)
                 for (int j = i + 1; j < t.n; ++j)
                     if (t.parent[i] == t.parent[j]) {
                         t.tokens[j] = t.tokens[i];
                         return true;
                     }
             return false;
         }},
        {"ancestor_table",
         [](TreeTensors& t, std::mt19937&) {
             for (int i = 0; i < t.n; ++i)
                 if (t.depth[i] < t.max_depth) {  // corrupt a padding cell
                     t.anc[(size_t)i * (t.max_depth + 1) + t.max_depth] = t.n;
                     return true;
                 }
             return false;
         }},
        {"ancestor_table",
         [&](TreeTensors& t, std::mt19937& r) {
             const int i = node(t, r);
             t.anc[(size_t)i * (t.max_depth + 1) + t.depth[i]] = 0;  // self entry wrong
             return true;
         }},
        {"path_table", [](TreeTensors& t, std::mt19937&) { t.leaves.pop_back(); return true; }},
        {"path_table",
         [](TreeTensors& t, std::mt19937&) {
             // Replace the dummy padding with -1, the EAGLE reference layout.
             for (auto& v : t.paths)
                 if (v == t.n) {
                     v = -1;
                     return true;
                 }
             return false;
         }},
        {"mask", [&](TreeTensors& t, std::mt19937& r) { const int i = node(t, r); t.mask[(size_t)i * t.n + i] = 0; return true; }},
        {"mask",
         [](TreeTensors& t, std::mt19937&) {
             for (int i = 1; i < t.n; ++i)
                 for (int j = 1; j < t.n; ++j)
                     if (!t.mask[(size_t)i * t.n + j]) {
                         t.mask[(size_t)i * t.n + j] = 1;  // a sibling branch made visible
                         return true;
                     }
             return false;
         }},
    };
    std::mt19937 rng(2);
    std::map<std::string, int> caught;
    for (int iter = 0; iter < 2000; ++iter) {
        const auto& c = cs[iter % cs.size()];
        const DraftTree t = random_tree(rng, 3 + (int)(rng() % 20), 50);
        TreeTensors tt;
        build_tree_tensors(t, 5, ExecMode::Reference, tt);
        if (!c.apply(tt, rng)) continue;
        const TreeViolation v = check_tree(tt, limits(50), ExecMode::Reference);
        ASSERT_EQ(v.rule, c.rule) << "corruption " << iter % cs.size() << ": " << v.message();
        EXPECT_FALSE(v.message().empty());
        caught[c.rule]++;
    }
    EXPECT_EQ(caught.size(), 14u);  // every table and cheap rule exercised (budget: below)
}

TEST(SpecTreeInvariants, LimitsAndAcceptedPath) {
    std::mt19937 rng(3);
    const DraftTree t = random_tree(rng, 12, 50);
    TreeTensors tt;
    build_tree_tensors(t, 0, ExecMode::Performance, tt);
    TreeLimits l = limits(50);
    l.budget = 11;
    EXPECT_EQ(check_tree(tt, l, ExecMode::Performance).rule, "budget");
    l = limits(50);
    l.max_depth = tt.max_depth - 1;
    if (tt.max_depth > 1) {
        EXPECT_EQ(check_tree(tt, l, ExecMode::Performance).rule, "max_depth");
    }
    EXPECT_THROW(require_valid_tree(tt, limits(10), ExecMode::Performance), Error);
    // Accepted paths: parent chains from the root only.
    std::vector<int> path{0};
    for (int i = 1; i < tt.n; ++i)
        if (tt.parent[i] == path.back()) path.push_back(i);
    EXPECT_TRUE(check_accepted_path(tt, path).ok());
    EXPECT_EQ(check_accepted_path(tt, {1}).rule, "accepted_path");
    if (path.size() >= 2) {
        std::vector<int> bad = path;
        bad.erase(bad.begin() + 1);
        if (bad.size() >= 2) {
            EXPECT_EQ(check_accepted_path(tt, bad).rule, "accepted_path");
        }
    }
}

TEST(SpecTreeInvariants, CorruptedParentsNeverCrashTheBuilder) {
    std::mt19937 rng(4);
    for (int iter = 0; iter < 1000; ++iter) {
        DraftTree t = random_tree(rng, 2 + (int)(rng() % 10), 20);
        for (auto& p : t.parents)
            if (rng() % 3 == 0) p = (int32_t)(rng() % 40) - 20;
        TreeTensors tt;
        build_tree_tensors(t, 0, ExecMode::Reference, tt);
        for (int32_t v : tt.anc) ASSERT_TRUE(v >= 0 && v < tt.n);
        for (int32_t v : tt.paths) ASSERT_TRUE(v >= 0 && v <= tt.n);
        (void)check_tree(tt, limits(20), ExecMode::Reference);
    }
}

TEST(SpecVerifier, GreedyWalksTheArgmaxPath) {
    // Tree: root(0) -> 1:a=5, 2:b=6 ; 1 -> 3:c=7 ; 3 -> 4:d=8
    DraftTree t;
    t.reset(1);
    t.add(5, 0, 0);
    t.add(6, 0, 0);
    t.add(7, 1, 0);
    t.add(8, 3, 0);
    const int V = 10;
    std::vector<float> logits(5 * V, 0.0f);
    auto set_best = [&](int node, int tok) { logits[node * V + tok] = 3.0f; };
    set_best(0, 5);  // accept node 1
    set_best(1, 7);  // accept node 3
    set_best(3, 2);  // reject node 4; bonus 2
    set_best(2, 9);
    set_best(4, 9);
    Verifier v;
    VerifyResult r;
    Rng rng(0);
    sample::SamplingParams p;
    v.verify(t, logits.data(), V, {}, p, rng, r);
    EXPECT_EQ(r.path, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(r.emitted, (std::vector<int32_t>{5, 7, 2}));
    // Ties go to the lowest id, as in plain greedy decoding.
    logits[0 * V + 6] = 3.0f;
    v.verify(t, logits.data(), V, {}, p, rng, r);
    EXPECT_EQ(r.emitted.front(), 5);
    logits[0 * V + 4] = 3.0f;  // lower id ties: no child matches
    v.verify(t, logits.data(), V, {}, p, rng, r);
    EXPECT_EQ(r.path, (std::vector<int>{0}));
    EXPECT_EQ(r.emitted, (std::vector<int32_t>{4}));
}

TEST(SpecNgram, LookupFindsMostRecentLongestMatch) {
    const std::vector<int32_t> h{1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 2, 3};
    // Suffix [2,3] last occurred before 5,6,7.
    EXPECT_EQ(NgramProposer::lookup(h, 1, 3, 3), (std::vector<int32_t>{5, 6, 7}));
    EXPECT_EQ(NgramProposer::lookup(h, 1, 3, 10), (std::vector<int32_t>{5, 6, 7, 2, 3}));
    EXPECT_TRUE(NgramProposer::lookup(std::vector<int32_t>{1, 2, 3}, 1, 3, 4).empty());
    NgramProposer p({1, 3, 4});
    std::vector<DraftTree> out(1);
    ProposeInput in{0, h, 3};
    Rng rng(0);
    p.propose({&in, 1}, out, rng);
    EXPECT_EQ(out[0].tokens, (std::vector<int32_t>{3, 5, 6}));  // capped by max_nodes
    EXPECT_EQ(out[0].parents, (std::vector<int32_t>{0, 0, 1}));
}

TEST(SpecVocabSubset, TopNByFrequencyAndFileRoundTrip) {
    const std::vector<std::vector<int32_t>> corpus{{5, 5, 5, 2, 2, 9}, {9, 9, 9, 9, 1}};
    const VocabSubset s = VocabSubset::from_corpus(corpus, 12, 3);
    EXPECT_EQ(s.ids(), (std::vector<int32_t>{2, 5, 9}));
    EXPECT_EQ(s.d2t(1), 5);
    EXPECT_EQ(s.t2d(9), 2);
    EXPECT_EQ(s.t2d(3), 3);  // outside: the dummy id N, not -1
    EXPECT_TRUE(s.contains(5));
    EXPECT_FALSE(s.contains(1));
    const std::string path = (std::filesystem::temp_directory_path() / "specdec_vocab_subset_test.txt").string();
    s.save(path);
    const VocabSubset l = VocabSubset::load(path, 12);
    EXPECT_EQ(l.ids(), s.ids());
    EXPECT_THROW(VocabSubset::load(path, 13), Error);
    std::filesystem::remove(path);
}
