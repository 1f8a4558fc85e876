// Accelerator-safe flattening of a draft tree into plain integer arrays.
//
// Nothing here needs a negative index or a sentinel a device gather could read
// out of bounds: the root is its own parent, the ancestor table is padded with
// the root (everyone's ancestor, so harmless), and root-to-leaf paths are
// padded with a dummy index T that addresses one extra dummy row appended to
// any gathered tensor. (EAGLE's reference code pads with -1 and relies on
// negative-index wrap-around; that is what this layout removes.)
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"
#include "spec/draft_tree.h"
#include "specdec/decoding.h"

namespace specdec::spec {

// Which arrays to build: performance mode needs only what the forward pass and
// the verifier read; reference mode adds the tables the invariants check.
// (specdec/decoding.h: the public option is this enum.)
using ExecMode = specdec::ExecMode;

struct TreeTensors {
    int n = 0;           // T: nodes including the root
    int max_depth = 0;   // deepest node's depth
    int prefix_len = 0;  // committed tokens before the root
    std::vector<int32_t> tokens;    // (T)
    std::vector<int32_t> parent;    // (T) parent[0] = 0, 0 <= parent[i] < i
    std::vector<int32_t> depth;     // (T) depth[0] = 0
    std::vector<int32_t> position;  // (T) prefix_len + depth
    // Reference mode only (empty in performance mode):
    std::vector<int32_t> anc;       // (T, max_depth + 1) ancestor of i at depth d, 0 past depth[i]
    std::vector<int32_t> leaves;    // (L) nodes without children, ascending
    std::vector<int32_t> paths;     // (L, max_depth + 1) root-to-leaf node ids, padded with T
    std::vector<uint8_t> mask;      // (T, T) 1 iff column j is row i or an ancestor of i

    int anc_at(int i, int d) const { return anc[(size_t)i * (max_depth + 1) + d]; }
    int path_at(int l, int d) const { return paths[(size_t)l * (max_depth + 1) + d]; }
};

// Flattens a tree whose root sits at position prefix_len. Does not validate
// (check_tree does): a malformed parent array yields whatever it yields, but
// never reads out of bounds.
void build_tree_tensors(const DraftTree& tree, int prefix_len, ExecMode mode, TreeTensors& out);

// Appends the tree's rows for sequence `seq` to a forward batch, root first,
// logits for every row. Returns the batch row of the root.
int append_tree_rows(const TreeTensors& t, int seq, model::ForwardBatch& batch);

// Children of every node in index order, as CSR: children of i are
// child[first[i] .. first[i + 1]).
struct TreeChildren {
    std::vector<int32_t> first;  // (T + 1)
    std::vector<int32_t> child;  // (T - 1)
};
void build_children(const std::vector<int32_t>& parent, TreeChildren& out);

}  // namespace specdec::spec
