#include "spec/tree_invariants.h"

#include <unordered_set>

#include "core/error.h"

namespace specdec::spec {

namespace {
TreeViolation fail(const char* rule, int node, std::string detail) { return {rule, node, std::move(detail)}; }
std::string s(long v) { return std::to_string(v); }
}  // namespace

std::string TreeViolation::message() const {
    if (ok()) return "tree ok";
    return "draft tree invariant '" + rule + "' violated at node " + std::to_string(node) + ": " + detail;
}

TreeViolation check_tree(const TreeTensors& t, const TreeLimits& lim, ExecMode mode) {
    const int T = t.n;
    if (T < 1) return fail("empty", 0, "n = " + s(T));
    if ((int)t.tokens.size() != T || (int)t.parent.size() != T || (int)t.depth.size() != T ||
        (int)t.position.size() != T)
        return fail("array_size", 0,
                    "n = " + s(T) + ", tokens " + s((long)t.tokens.size()) + ", parent " + s((long)t.parent.size()) +
                        ", depth " + s((long)t.depth.size()) + ", position " + s((long)t.position.size()));
    if (t.parent[0] != 0) return fail("root_parent", 0, "parent[0] = " + s(t.parent[0]) + ", must be 0");
    for (int i = 1; i < T; ++i)
        if (t.parent[i] < 0 || t.parent[i] >= T) return fail("parent_range", i, "parent = " + s(t.parent[i]));
    for (int i = 1; i < T; ++i)
        if (t.parent[i] >= i) return fail("parent_order", i, "parent = " + s(t.parent[i]) + " is not before the node");
    if (t.depth[0] != 0) return fail("root_depth", 0, "depth[0] = " + s(t.depth[0]));
    int deepest = 0;
    for (int i = 1; i < T; ++i) {
        if (t.depth[i] != t.depth[t.parent[i]] + 1)
            return fail("depth", i, "depth = " + s(t.depth[i]) + ", parent depth = " + s(t.depth[t.parent[i]]));
        deepest = std::max(deepest, t.depth[i]);
    }
    for (int i = 0; i < T; ++i)
        if (t.position[i] != t.prefix_len + t.depth[i])
            return fail("position", i, "position = " + s(t.position[i]) + ", expected " + s(t.prefix_len + t.depth[i]));
    for (int i = 0; i < T; ++i)
        if (lim.max_depth > 0 && t.depth[i] > lim.max_depth)
            return fail("max_depth", i, "depth " + s(t.depth[i]) + " > limit " + s(lim.max_depth));
    if (t.max_depth != deepest) return fail("max_depth", 0, "max_depth field " + s(t.max_depth) + " != " + s(deepest));
    if (lim.budget > 0 && T > lim.budget) return fail("budget", T - 1, s(T) + " nodes > budget " + s(lim.budget));
    for (int i = 0; i < T; ++i)
        if (t.tokens[i] < 0 || t.tokens[i] >= lim.n_vocab)
            return fail("token_range", i, "token " + s(t.tokens[i]) + " outside [0, " + s(lim.n_vocab) + ")");
    if (lim.distinct_siblings) {
        std::unordered_set<int64_t> seen;
        for (int i = 1; i < T; ++i)
            if (!seen.insert(((int64_t)t.parent[i] << 32) | (uint32_t)t.tokens[i]).second)
                return fail("duplicate_sibling", i, "token " + s(t.tokens[i]) + " repeats a sibling");
    }
    if (mode == ExecMode::Performance) return {};

    // Table rules: recomputed here from parent alone, independently of the builder.
    const int W = t.max_depth + 1;
    if (t.anc.size() != (size_t)T * W) return fail("ancestor_table", 0, "size " + s((long)t.anc.size()));
    for (int i = 0; i < T; ++i) {
        int a = i;
        for (int d = t.depth[i]; d >= 0; --d) {
            if (t.anc_at(i, d) != a)
                return fail("ancestor_table", i, "anc[" + s(d) + "] = " + s(t.anc_at(i, d)) + ", expected " + s(a));
            a = t.parent[a];
        }
        for (int d = t.depth[i] + 1; d < W; ++d)
            if (t.anc_at(i, d) != 0) return fail("ancestor_table", i, "padding at depth " + s(d) + " is not the root");
    }
    std::vector<uint8_t> has_child(T, 0);
    for (int i = 1; i < T; ++i) has_child[t.parent[i]] = 1;
    std::vector<int32_t> leaves;
    for (int i = 0; i < T; ++i)
        if (!has_child[i]) leaves.push_back(i);
    if (t.leaves != leaves) return fail("path_table", 0, "leaf list differs from the nodes without children");
    if (t.paths.size() != leaves.size() * W) return fail("path_table", 0, "size " + s((long)t.paths.size()));
    for (size_t l = 0; l < leaves.size(); ++l) {
        const int leaf = leaves[l];
        for (int d = 0; d < W; ++d) {
            const int want = d <= t.depth[leaf] ? t.anc_at(leaf, d) : T;
            if (t.path_at((int)l, d) != want)
                return fail("path_table", (int)l,
                            "path of leaf " + s(leaf) + " at depth " + s(d) + " = " + s(t.path_at((int)l, d)) +
                                ", expected " + s(want));
        }
    }
    if (t.mask.size() != (size_t)T * T) return fail("mask", 0, "size " + s((long)t.mask.size()));
    for (int i = 0; i < T; ++i) {
        std::vector<uint8_t> row(T, 0);
        for (int a = i;; a = t.parent[a]) {
            row[a] = 1;
            if (a == 0) break;
        }
        for (int j = 0; j < T; ++j)
            if (t.mask[(size_t)i * T + j] != row[j])
                return fail("mask", i, "column " + s(j) + " is " + s(t.mask[(size_t)i * T + j]) + ", expected " + s(row[j]));
    }
    return {};
}

TreeViolation check_accepted_path(const TreeTensors& t, const std::vector<int>& path) {
    if (path.empty() || path[0] != 0) return fail("accepted_path", path.empty() ? -1 : path[0], "does not start at the root");
    for (size_t k = 1; k < path.size(); ++k) {
        const int v = path[k];
        if (v <= 0 || v >= t.n) return fail("accepted_path", v, "node out of range");
        if (t.parent[v] != path[k - 1])
            return fail("accepted_path", v, "parent " + s(t.parent[v]) + " is not the previous node " + s(path[k - 1]));
    }
    return {};
}

void require_valid_tree(const TreeTensors& t, const TreeLimits& lim, ExecMode mode) {
    const TreeViolation v = check_tree(t, lim, mode);
    SPECDEC_CHECK(v.ok(), v.message());
}

}  // namespace specdec::spec
