// SSD over a real ZeroMQ socket, both ends in this process (so that
// ThreadSanitizer sees the link, the server loop and the draft worker
// together): a DraftServer thread serving a synthetic draft on an ipc://
// address, the target's ZmqDraftLink made by the scheduler's factory. Greedy
// output equals AR with the server healthy and with the server stopped in the
// middle of the run (the target then drafts locally, without waiting past its
// timeout). The fault suite over separate processes is
// tests/python/test_ssd_remote.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/draft_vocab.h"
#include "runtime/engine.h"
#include "transport/ssd_draft_server.h"
#include "transport/zmq_draft_link.h"
#include "unit/ssd_test_support.h"

using namespace specdec;

#if defined(__SANITIZE_THREAD__)
// libzmq is not built with ThreadSanitizer: its lock-free pipes hand each
// message from the caller's thread to its I/O thread with atomics TSan cannot
// see, which it reports as races inside libzmq (memcpy of the message). Each
// socket here is used by one thread only; races in our code still report.
extern "C" const char* __tsan_default_suppressions() {
    return "called_from_lib:libzmq.so\nrace:libzmq.so\n";
}
#endif

namespace {

// The draft as a file (draft-serve loads an Engine from a path).
std::string write_model(test::SyntheticModelSpec spec, const std::string& name) {
    spec.with_merges = true;
    const auto bytes = test::synthetic_model_gguf(spec);
    const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                    ("specdec-" + name + "-" + std::to_string(getpid()) + ".gguf");
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    return p.string();
}

struct Server {
    std::unique_ptr<runtime::Engine> draft;
    std::unique_ptr<transport::DraftServer> server;
    std::atomic<bool> stop{false};
    std::thread thread;
    Server(const std::string& model, const std::string& addr) {
        runtime::EngineOptions eo;
        eo.model_path = model;
        eo.n_ctx = 8;
        eo.n_threads = 1;
        draft = runtime::Engine::load(eo);
        transport::DraftServerOptions so;
        so.listen = addr;
        server = std::make_unique<transport::DraftServer>(*draft, so);
        thread = std::thread([this] { server->serve(stop); });
    }
    void shut() {
        if (!thread.joinable()) return;
        stop = true;
        thread.join();
        server.reset();  // closes the socket: the target sees the server gone
    }
    ~Server() { shut(); }
};

struct RemoteRun {
    std::vector<int32_t> out;
    sched::SsdStats st;
};

// fingerprint: the target's vocabulary fingerprint the link checks the
// server's against (0: none; the synthetic target has no tokenizer).
RemoteRun run_remote(test::TinyModel& target, ThreadPool& pool, const std::string& addr, const sched::SsdConfig& cfg,
               int n, const std::function<void(int)>& after_token, uint64_t fingerprint = 0) {
    RemoteRun r;
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    const sched::DraftSideFactory link = [&](sched::DraftSideSpec spec) {
        transport::ZmqDraftLinkOptions lo;
        lo.addr = addr;
        lo.log = false;
        spec.target_vocab_fingerprint = fingerprint;
        return std::make_unique<transport::ZmqDraftLink>(lo, spec);
    };
    sched::SsdScheduler sch(tc, link, sample::SamplingParams{}, cfg);
    sch.run({test::kSsdPrompts[1]}, {n},
            [&](int, int32_t t, sched::TokenSource) {
                r.out.push_back(t);
                after_token((int)r.out.size());
                return false;
            },
            r.st);
    return r;
}

sched::SsdConfig remote_cfg() {
    sched::SsdConfig cfg;
    cfg.k = 3;
    cfg.fanout_budget = 4;
    cfg.link_timeout_ms = 200;
    return cfg;
}

// A draft server (the seed-7 synthetic draft, as a file) on an ipc://
// address of its own, and the seed-7 synthetic target; the draft's file is
// removed at the end.
struct Remote {
    std::string model, addr;
    Server server;
    ThreadPool pool{1};
    test::TinyModel target{test::ssd_model_spec(7), 256, 1};
    explicit Remote(const std::string& tag)
        : model(write_model(test::ssd_model_spec(7), "draft")),
          addr("ipc://" + (std::filesystem::temp_directory_path() /
                           ("specdec-ssd-" + std::to_string(getpid()) + "-" + tag + ".sock"))
                              .string()),
          server(model, addr) {}
    ~Remote() {
        server.shut();
        std::filesystem::remove(model);
    }
    std::vector<int32_t> ar(int n) { return test::greedy_ar(target, pool, test::kSsdPrompts[1], n); }
    RemoteRun run(int n, const std::function<void(int)>& after_token = [](int) {}, uint64_t fingerprint = 0) {
        return run_remote(target, pool, addr, remote_cfg(), n, after_token, fingerprint);
    }
};

}  // namespace

TEST(SsdRemote, HealthyServerMatchesAr) {
    Remote m("a");
    const int n = 40;
    const auto ref = m.ar(n);
    const RemoteRun r = m.run(n);
    EXPECT_EQ(r.out, ref);
    EXPECT_EQ(r.st.fallback.rounds, 0);
    EXPECT_GT(r.st.draft.lookups, 0);
}

// The HelloAck's fingerprint of the draft's token texts: the same texts
// serve, other texts with as many tokens are a clear error (not a fault to
// fall back from: no retry makes them agree).
TEST(SsdRemote, VocabularyFingerprintIsChecked) {
    Remote m("v");
    const int n = 12;
    const auto ref = m.ar(n);
    const int n_vocab = m.target.model->config().n_vocab;
    const uint64_t same = runtime::vocabulary_fingerprint(m.server.draft->tokenizer(), n_vocab);
    const RemoteRun r = m.run(n, [](int) {}, same);
    EXPECT_EQ(r.out, ref);
    EXPECT_EQ(r.st.fallback.rounds, 0);
    try {
        m.run(n, [](int) {}, same ^ 1);
        ADD_FAILURE() << "a draft with other token texts was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("other token texts"), std::string::npos) << e.what();
    }
}

TEST(SsdRemote, ServerGoneMidRunFallsBackToLocalDrafts) {
    Remote m("b");
    const int n = 60;
    const auto ref = m.ar(n);
    const RemoteRun r = m.run(n, [&](int emitted) {
        if (emitted == 12) m.server.shut();
    });
    EXPECT_EQ(r.out, ref);
    EXPECT_GT(r.st.fallback.rounds, 0);
    // One bounded wait at most for the reply in flight, then no-connection rounds.
    EXPECT_LE(r.st.fallback.timeout, 1);
    EXPECT_LT(r.st.stall_s, 5.0);
}
