#include "spec/tree_tensors.h"

#include <algorithm>

namespace specdec::spec {

namespace {
// A parent index that is safe to follow even for a corrupted tree: anything
// out of [0, i) is treated as the root so construction never loops or reads
// out of bounds; the invariant checker reports the real problem.
int32_t safe_parent(const std::vector<int32_t>& parent, int i) {
    const int32_t p = parent[i];
    return (i == 0 || p < 0 || p >= i) ? 0 : p;
}
}  // namespace

void build_tree_tensors(const DraftTree& tree, int prefix_len, ExecMode mode, TreeTensors& out) {
    const int T = tree.size();
    out.n = T;
    out.prefix_len = prefix_len;
    out.tokens = tree.tokens;
    out.parent.assign(tree.parents.begin(), tree.parents.begin() + std::min<size_t>(T, tree.parents.size()));
    out.parent.resize(T, 0);
    if (T > 0) out.parent[0] = tree.parents.empty() ? 0 : tree.parents[0];
    out.depth.assign(T, 0);
    out.max_depth = 0;
    for (int i = 1; i < T; ++i) {
        out.depth[i] = out.depth[safe_parent(out.parent, i)] + 1;
        out.max_depth = std::max(out.max_depth, out.depth[i]);
    }
    out.position.resize(T);
    for (int i = 0; i < T; ++i) out.position[i] = prefix_len + out.depth[i];

    out.anc.clear();
    out.leaves.clear();
    out.paths.clear();
    out.mask.clear();
    if (mode == ExecMode::Performance || T == 0) return;

    const int W = out.max_depth + 1;
    out.anc.assign((size_t)T * W, 0);  // padding = root
    for (int i = 0; i < T; ++i) {
        int a = i;
        for (int d = out.depth[i]; d >= 0; --d) {
            out.anc[(size_t)i * W + d] = a;
            a = safe_parent(out.parent, a);
        }
    }
    std::vector<uint8_t> has_child(T, 0);
    for (int i = 1; i < T; ++i) has_child[safe_parent(out.parent, i)] = 1;
    for (int i = 0; i < T; ++i)
        if (!has_child[i]) out.leaves.push_back(i);
    out.paths.assign(out.leaves.size() * W, T);  // padding = dummy row T
    for (size_t l = 0; l < out.leaves.size(); ++l) {
        const int leaf = out.leaves[l];
        for (int d = 0; d <= out.depth[leaf]; ++d) out.paths[l * W + d] = out.anc[(size_t)leaf * W + d];
    }
    out.mask.assign((size_t)T * T, 0);
    for (int i = 0; i < T; ++i)
        for (int d = 0; d <= out.depth[i]; ++d) out.mask[(size_t)i * T + out.anc[(size_t)i * W + d]] = 1;
}

int append_tree_rows(const TreeTensors& t, int seq, model::ForwardBatch& batch) {
    const int base = batch.size();
    for (int i = 0; i < t.n; ++i) batch.add(t.tokens[i], t.position[i], seq, i == 0 ? -1 : base + t.parent[i], true);
    return base;
}

void build_children(const std::vector<int32_t>& parent, TreeChildren& out) {
    const int T = (int)parent.size();
    out.first.assign(T + 1, 0);
    for (int i = 1; i < T; ++i) out.first[parent[i] + 1]++;
    for (int i = 0; i < T; ++i) out.first[i + 1] += out.first[i];
    out.child.assign(T > 0 ? T - 1 : 0, 0);
    std::vector<int32_t> fill(out.first.begin(), out.first.end() - 1);
    for (int i = 1; i < T; ++i) out.child[fill[parent[i]]++] = i;  // ascending i keeps index order
}

}  // namespace specdec::spec
