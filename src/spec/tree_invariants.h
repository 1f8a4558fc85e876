// Invariants of flattened draft trees, checked before a tree reaches the
// forward pass. A violation is reported as the first broken rule (in the order
// listed below) and the node where it broke, never as a crash.
#pragma once

#include <string>
#include <vector>

#include "spec/tree_tensors.h"

namespace specdec::spec {

struct TreeLimits {
    int n_vocab = 0;            // token ids must be < n_vocab
    int budget = 0;             // max nodes including the root (0: unlimited)
    int max_depth = 0;          // max depth (0: unlimited)
    bool distinct_siblings = false;  // deterministic drafts: no two children share a token
};

// Rule names, in checking order. Cheap rules (O(T)) run in both modes; table
// rules (ancestor, path, mask) run in reference mode only.
//   "empty"            tree has no root
//   "array_size"       tokens/parent/depth/position lengths differ from n
//   "root_parent"      parent[0] != 0
//   "parent_range"     parent[i] outside [0, n)
//   "parent_order"     parent[i] >= i (not topological: could hide a cycle)
//   "root_depth"       depth[0] != 0
//   "depth"            depth[i] != depth[parent[i]] + 1
//   "position"         position[i] != prefix_len + depth[i]
//   "max_depth"        depth[i] > limit, or max_depth field wrong
//   "budget"           n > budget
//   "token_range"      token outside [0, n_vocab)
//   "duplicate_sibling" two children of one node carry the same token
//   "ancestor_table"   anc row wrong or padding not the root
//   "path_table"       leaves/paths not the root-to-leaf chains padded with n
//   "mask"             mask differs from the ancestor closure
struct TreeViolation {
    std::string rule;  // empty: the tree is valid
    int node = -1;     // first offending node (or leaf row for path_table)
    std::string detail;
    bool ok() const { return rule.empty(); }
    std::string message() const;
};

TreeViolation check_tree(const TreeTensors& t, const TreeLimits& lim, ExecMode mode);

// The verifier's accepted path: starts at the root, each node the child of the
// previous one (so indices increase). Rule "accepted_path".
TreeViolation check_accepted_path(const TreeTensors& t, const std::vector<int>& path);

// Throws specdec::Error with violation.message() when the tree is invalid.
void require_valid_tree(const TreeTensors& t, const TreeLimits& lim, ExecMode mode);

}  // namespace specdec::spec
