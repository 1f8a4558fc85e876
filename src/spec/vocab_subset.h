// Draft vocabulary subset: the draft only proposes the N target tokens most
// frequent in a corpus. d2t maps a subset (draft) id to its target id; t2d maps
// back, with N (a dummy id one past the subset, never negative) for tokens
// outside it. Verification always works in target ids.
//
// File format (cached so a corpus is counted once): text, first line
// "specdec-vocab-subset v1 <n_target_vocab> <N>", then the N target ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace specdec::spec {

class VocabSubset {
public:
    // The n most frequent ids of `corpus` (ties: lower id first); ids never
    // seen fill the rest in id order so the subset always has n entries.
    static VocabSubset from_corpus(std::span<const std::vector<int32_t>> corpus, int n_target_vocab, int n);
    static VocabSubset load(const std::string& path, int n_target_vocab);
    void save(const std::string& path) const;

    int size() const { return (int)d2t_.size(); }
    int n_target_vocab() const { return (int)t2d_.size(); }
    int32_t d2t(int32_t d) const { return d2t_[d]; }
    int32_t t2d(int32_t t) const { return t2d_[t]; }  // size() when outside
    bool contains(int32_t t) const { return t >= 0 && t < n_target_vocab() && t2d_[t] < size(); }
    const std::vector<int32_t>& ids() const { return d2t_; }

private:
    void build_inverse(int n_target_vocab);
    std::vector<int32_t> d2t_;  // (N)
    std::vector<int32_t> t2d_;  // (n_target_vocab)
};

}  // namespace specdec::spec
