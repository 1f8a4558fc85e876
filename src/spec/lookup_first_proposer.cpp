#include "spec/lookup_first_proposer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace specdec::spec {

LookupFirstProposer::LookupFirstProposer(std::unique_ptr<Proposer> draft, const LookupFirstOptions& opts)
    : draft_(std::move(draft)), opts_(opts) {
    SPECDEC_CHECK(draft_ != nullptr, "lookup-first proposer: no draft proposer");
    SPECDEC_CHECK(opts.min_n >= 1 && opts.max_n >= opts.min_n, "lookup-first: need 1 <= min_n <= max_n");
    SPECDEC_CHECK(opts.max_draft >= 1, "lookup-first: max_draft must be >= 1");
}

void LookupFirstProposer::propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) {
    rest_in_.clear();
    rest_of_.clear();
    followed_seqs_.clear();
    for (size_t i = 0; i < in.size(); ++i) {
        const int room = std::min(opts_.max_draft, in[i].max_nodes - 1);
        std::vector<int32_t> cont;
        if (room > 0) cont = NgramProposer::lookup(in[i].history, opts_.min_n, opts_.max_n, room);
        if (cont.empty()) {
            rest_in_.push_back(in[i]);
            rest_of_.push_back(i);
            continue;
        }
        out[i].assign_chain(in[i].history.back(), cont);
        out[i].from_lookup = true;
        ++lookup_rounds_;
        if (draft_->drafted_elsewhere(in[i], out[i])) followed_seqs_.push_back(in[i].seq);
    }
    drafted_ = !rest_in_.empty();
    for (const ProposeInput& x : rest_in_) followed_seqs_.push_back(x.seq);
    if (!drafted_ && followed_seqs_.empty()) return;
    rest_out_.resize(rest_in_.size());
    draft_->propose(rest_in_, rest_out_, rng);
    for (size_t j = 0; j < rest_of_.size(); ++j) out[rest_of_[j]] = std::move(rest_out_[j]);
    draft_rounds_ += (int64_t)rest_in_.size();
}

void LookupFirstProposer::observe(const RoundFeedback& fb) {
    drafted_outcomes_.clear();
    for (const RoundOutcome& o : fb.seqs)
        if (std::find(followed_seqs_.begin(), followed_seqs_.end(), o.seq) != followed_seqs_.end())
            drafted_outcomes_.push_back(o);
    RoundFeedback mine = fb;
    mine.seqs = drafted_outcomes_;
    draft_->observe(mine);
}

std::unique_ptr<Proposer> with_lookup_first(std::unique_ptr<Proposer> draft, const LookupFirstOptions& opts) {
    if (opts.min_n <= 0) return draft;
    return std::make_unique<LookupFirstProposer>(std::move(draft), opts);
}

}  // namespace specdec::spec
