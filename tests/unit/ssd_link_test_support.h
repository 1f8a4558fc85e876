// A draft side that behaves like a remote one without a socket: every
// message goes through the wire format (transport/ssd_wire.h) both ways, to
// an in-process DraftWorker that is recreated on restart (as draft-serve
// recreates its worker on a Hello), and faults are injected by reply number.
// The SSD link tests (greedy and sampled) drive SsdScheduler with it, so the
// proposer's fallback and resync paths run deterministically.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "sched/ssd_draft_side.h"
#include "sched/ssd_draft_worker.h"
#include "sched/ssd_scheduler.h"
#include "transport/ssd_wire.h"

namespace specdec::test {

class WireLoopbackSide final : public sched::DraftSide {
public:
    // faults: reply number (0-based, over the whole run) -> "timeout",
    // "disconnected", "error" or "garbage" (a reply with a token outside the
    // vocabulary, which the wire decoder rejects). restarts counts Hellos.
    WireLoopbackSide(const sched::DraftContext& ctx, const sched::DraftSideSpec& spec,
                     std::map<int, std::string> faults, int* restarts = nullptr)
        : ctx_(ctx), spec_(spec), faults_(std::move(faults)), restarts_(restarts) {
        make_worker();
    }

    void send(sched::ToDraft m) override {
        if (dropped_) return;
        const auto frame = transport::encode_to_draft(++id_, m);
        const transport::WireFrame f = transport::parse_frame(frame);
        transport::WireLimits lim{spec_.target_n_vocab, spec_.n_batch};
        worker_->send(transport::decode_to_draft(f.payload, lim));
        const bool reply = sched::wants_reply(m);
        if (!reply) return;
        // The fault of this reply decides whether the server ever saw it.
        const auto it = faults_.find(n_replies_);
        if (it != faults_.end() && it->second == "disconnected") dropped_ = true;  // later sends are lost too
    }

    std::optional<sched::FromDraft> receive(double) override {
        const int n = n_replies_++;
        const auto it = faults_.find(n);
        const std::string fault = it == faults_.end() ? "" : it->second;
        if (fault == "disconnected") {
            fault_ = fault;
            return std::nullopt;
        }
        sched::FromDraft r = *worker_->receive(0);  // the worker always answers
        if (fault == "timeout") {
            fault_ = fault;  // the reply arrives too late and is dropped
            return std::nullopt;
        }
        if (fault == "error") r.error = "injected";
        if (fault == "garbage" && !r.specs.empty()) r.specs[0].root = spec_.target_n_vocab;
        const auto frame = transport::encode_from_draft(id_, r);
        try {
            transport::WireLimits lim{spec_.target_n_vocab, spec_.n_batch};
            return transport::decode_from_draft(transport::parse_frame(frame).payload, lim);
        } catch (const transport::WireError&) {
            fault_ = "invalid";
            return std::nullopt;
        }
    }
    std::string fault() const override { return fault_; }
    bool can_fail() const override { return true; }
    void restart() override {
        worker_.reset();  // joins; the new worker rebuilds every sequence from its Begin
        make_worker();
        dropped_ = false;
        if (restarts_) ++*restarts_;
    }

private:
    void make_worker() {
        sched::DraftWorkerOptions wo;
        wo.cfg = spec_.cfg;
        wo.params = spec_.params;
        wo.target_n_vocab = spec_.target_n_vocab;
        worker_ = std::make_unique<sched::DraftWorker>(ctx_, wo);
    }
    sched::DraftContext ctx_;
    sched::DraftSideSpec spec_;
    std::map<int, std::string> faults_;
    int* restarts_;
    std::unique_ptr<sched::DraftWorker> worker_;
    uint64_t id_ = 0;
    int n_replies_ = 0;
    bool dropped_ = false;
    std::string fault_;
};

}  // namespace specdec::test
