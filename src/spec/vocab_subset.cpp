#include "spec/vocab_subset.h"

#include <algorithm>
#include <fstream>
#include <numeric>

#include "core/error.h"

namespace specdec::spec {

VocabSubset VocabSubset::from_corpus(std::span<const std::vector<int32_t>> corpus, int n_target_vocab, int n) {
    SPECDEC_CHECK(n >= 1 && n <= n_target_vocab, "vocab subset size ", n, " outside [1, ", n_target_vocab, "]");
    std::vector<int64_t> count(n_target_vocab, 0);
    for (const auto& doc : corpus)
        for (int32_t t : doc)
            if (t >= 0 && t < n_target_vocab) count[t]++;
    std::vector<int32_t> order(n_target_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return count[a] > count[b]; });
    VocabSubset s;
    s.d2t_.assign(order.begin(), order.begin() + n);
    std::sort(s.d2t_.begin(), s.d2t_.end());  // ascending ids: d2t is monotone
    s.build_inverse(n_target_vocab);
    return s;
}

void VocabSubset::build_inverse(int n_target_vocab) {
    t2d_.assign(n_target_vocab, (int32_t)d2t_.size());
    for (size_t d = 0; d < d2t_.size(); ++d) {
        SPECDEC_CHECK(d2t_[d] >= 0 && d2t_[d] < n_target_vocab, "vocab subset id ", d2t_[d], " out of range");
        SPECDEC_CHECK(t2d_[d2t_[d]] == (int32_t)d2t_.size(), "vocab subset id ", d2t_[d], " repeated");
        t2d_[d2t_[d]] = (int32_t)d;
    }
}

void VocabSubset::save(const std::string& path) const {
    std::ofstream f(path);
    SPECDEC_CHECK(f.good(), "cannot write vocab subset ", path);
    f << "specdec-vocab-subset v1 " << n_target_vocab() << " " << size() << "\n";
    for (int32_t t : d2t_) f << t << "\n";
    SPECDEC_CHECK(f.good(), "error writing vocab subset ", path);
}

VocabSubset VocabSubset::load(const std::string& path, int n_target_vocab) {
    std::ifstream f(path);
    SPECDEC_CHECK(f.good(), "cannot read vocab subset ", path);
    std::string magic, ver;
    int nv = 0, n = 0;
    f >> magic >> ver >> nv >> n;
    SPECDEC_CHECK(magic == "specdec-vocab-subset" && ver == "v1", path, ": not a vocab subset file");
    SPECDEC_CHECK(nv == n_target_vocab, path, ": made for a vocabulary of ", nv, " tokens, target has ",
                  n_target_vocab);
    SPECDEC_CHECK(n >= 1 && n <= nv, path, ": bad subset size ", n);
    VocabSubset s;
    s.d2t_.resize(n);
    for (auto& t : s.d2t_) {
        f >> t;
        SPECDEC_CHECK(!f.fail(), path, ": truncated");
    }
    s.build_inverse(n_target_vocab);
    return s;
}

}  // namespace specdec::spec
