// Prompt lookup first, the draft model otherwise. Each round, a sequence whose
// history ends with an n-gram that occurred earlier (at least `min_n` tokens)
// gets the continuation of that occurrence as its chain, at no draft cost;
// only the others are drafted by the wrapped proposer (one batch for all of
// them). Code answers repeat the prompt's signatures and identifiers, where a
// lookup chain is often accepted whole; on chat text matches are rare and the
// draft model does the work.
//
// Lossless like every proposer: the verifier checks each tree by its own kind
// (lookup chains are deterministic, q a point mass). The wrapped proposer's
// cache simply catches up on what was accepted from a lookup chain the next
// time it drafts for that sequence (DraftModelProposer rolls back to the
// longest prefix it holds and reads the rest in one forward; SSD's draft
// side is begun again from the sequence's history, keeping the prefix it holds).
#pragma once

#include <memory>
#include <vector>

#include "spec/ngram_proposer.h"
#include "spec/proposer.h"

namespace specdec::spec {

struct LookupFirstOptions {
    int min_n = 3;      // shortest suffix that counts as a match (shorter ones are left to the draft)
    int max_n = 3;      // longest suffix tried (first)
    int max_draft = 5;  // lookup chain length
};

class LookupFirstProposer final : public Proposer {
public:
    LookupFirstProposer(std::unique_ptr<Proposer> draft, const LookupFirstOptions& opts);
    void begin(int seq) override { draft_->begin(seq); }
    void begin_with_prefix(int seq, std::span<const int32_t> prefix) override { draft_->begin_with_prefix(seq, prefix); }
    void begin_with_prompt(int seq, std::span<const int32_t> prompt) override { draft_->begin_with_prompt(seq, prompt); }
    void prefill(int seq, std::span<const int32_t> history) override { draft_->prefill(seq, history); }
    void end(int seq) override { draft_->end(seq); }
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) override;
    // The wrapped proposer learns from the rounds it drafted or followed, not
    // from the other lookup chains.
    void observe(const RoundFeedback& fb) override;
    double last_forward_s() const override { return drafted_ ? draft_->last_forward_s() : 0.0; }
    // A head that reads target features gets every committed token's, lookup rounds included.
    std::span<const int> feature_layers() const override { return draft_->feature_layers(); }
    void observe_features(const TargetFeatures& f) override { draft_->observe_features(f); }

    // Rounds so far whose tree came from a lookup / from the draft proposer.
    int64_t lookup_rounds() const { return lookup_rounds_; }
    int64_t draft_rounds() const { return draft_rounds_; }

private:
    std::unique_ptr<Proposer> draft_;
    LookupFirstOptions opts_;
    bool drafted_ = false;  // the last propose called the draft proposer
    int64_t lookup_rounds_ = 0, draft_rounds_ = 0;
    std::vector<ProposeInput> rest_in_;
    std::vector<DraftTree> rest_out_;
    std::vector<size_t> rest_of_;
    // The sequences of the last propose that the draft proposer drafted or
    // followed (drafted_elsewhere): their outcomes go to it.
    std::vector<int> followed_seqs_;
    std::vector<RoundOutcome> drafted_outcomes_;
};

// `draft` behind prompt lookup first when opts.min_n > 0; `draft` itself
// when it is 0 (lookup first off). The one place the methods' configurations
// (chain, tree, ssd) turn their lookup option into the wrapper.
std::unique_ptr<Proposer> with_lookup_first(std::unique_ptr<Proposer> draft, const LookupFirstOptions& opts);

}  // namespace specdec::spec
