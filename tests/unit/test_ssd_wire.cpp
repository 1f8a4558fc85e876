// The SSD draft link's wire format (transport/ssd_wire.h): every record
// survives a round trip exactly (q bit for bit, b* infinite included), and
// the decoder rejects, with a WireError and never a crash, truncated,
// bit-flipped, wrong-magic, wrong-version, oversized and inconsistent
// messages (tokens outside the vocabulary, q rows of the wrong width or not
// finite, sequences out of range, trailing bytes). Also the loopback rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/crc32.h"
#include "transport/ssd_wire.h"
#include "transport/zmq_address.h"

using namespace specdec;
using namespace specdec::transport;

namespace {

constexpr int kV = 50;

sched::DraftSideSpec a_spec() {
    sched::DraftSideSpec s;
    s.target_n_vocab = kV;
    s.target_n_ctx = 512;
    s.n_batch = 3;
    s.branch_slots = 6;
    s.cfg.k = 5;
    s.cfg.fanout = sched::FanoutKind::Uniform;
    s.cfg.fanout_budget = 6;
    s.cfg.saguaro_c = 0.37f;
    s.cfg.backup = sched::BackupKind::Random;
    s.cfg.ngram_min = 2;
    s.cfg.ngram_max = 4;
    s.cfg.interrupt = false;
    s.cfg.force_miss = true;
    s.cfg.draft_seed = 0x123456789abcdefULL;
    s.params.temperature = 0.7f;
    s.params.top_k = 40;
    s.params.top_p = 0.95f;
    s.params.min_p = 0.05f;
    s.params.repeat_penalty = 1.1f;
    s.params.repeat_last_n = 32;
    s.params.seed = 0xfeedfacecafebeefULL;
    return s;
}

sched::ToDraft a_to_draft() {
    sched::ToDraft m;
    m.kind = sched::ToDraft::Kind::Outcomes;
    m.begins.push_back({2, {1, 2, 3, 49}, true});
    m.outcomes.push_back({0, 3, 17, 5, false, {}});
    m.outcomes.push_back({2, 1, 9, 4, false, {4, 5, 6}});  // an adopted chain
    m.outcomes.push_back({1, 0, 0, 0, true, {}});
    m.batch_size = 2;
    m.verify_s = 0.0123;
    return m;
}

sched::FromDraft a_from_draft() {
    sched::FromDraft r;
    sched::Speculation a;
    a.seq = 1;
    a.root = 7;
    a.tokens = {3, 4};
    a.kind = spec::DraftKind::Sampled;
    a.n_vocab = kV;
    a.q.resize(2 * kV);
    for (size_t i = 0; i < a.q.size(); ++i) a.q[i] = std::nextafter((float)i / 997.0f, 1.0f);  // odd bit patterns
    a.q[5] = std::numeric_limits<float>::denorm_min();
    a.hit = true;
    a.backup = sched::BackupKind::Ngram;
    sched::Speculation b;
    b.seq = 0;
    b.root = 49;
    b.backup = sched::BackupKind::Jit;
    r.specs = {a, b};
    r.stats.lookups = 11;
    r.stats.hits = 7;
    r.stats.lookups_k = {1, 2, 3};
    r.stats.hits_k = {1, 0, 3};
    r.stats.jit = 2;
    r.stats.ngram = 1;
    r.stats.random = 0;
    r.stats.trees = 9;
    r.stats.interrupted = 4;
    r.stats.branches = 30;
    r.stats.glue_reused = 3;
    r.stats.tree_s = 0.5;
    r.stats.backup_s = 0.25;
    r.stats.acceptance = 0.61;
    r.stats.miss_exponent = 1.7;
    r.stats.b_star = INFINITY;
    r.stats.fanout = {3, 2, 1};
    r.build_s = 0.031;
    r.build_interrupted = true;
    r.backup_s = 0.002;
    r.error = "";
    return r;
}

WireLimits limits() { return WireLimits{kV, 3}; }

// Re-frames a payload with a correct header (to test payload checks past the CRC).
std::vector<uint8_t> reframe(std::vector<uint8_t> frame, std::span<const uint8_t> payload) {
    frame.resize(kWireHeaderBytes);
    frame.insert(frame.end(), payload.begin(), payload.end());
    const uint32_t n = (uint32_t)payload.size();
    std::memcpy(frame.data() + 16, &n, 4);  // little-endian host (x86-64)
    std::vector<uint8_t> covered(frame.begin(), frame.begin() + 20);
    covered.insert(covered.end(), payload.begin(), payload.end());
    const uint32_t crc = crc32(covered);
    std::memcpy(frame.data() + 20, &crc, 4);
    return frame;
}

}  // namespace

TEST(SsdWire, Crc32CheckValue) {
    const char* s = "123456789";
    EXPECT_EQ(crc32(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s), 9)), 0xCBF43926u);
}

TEST(SsdWire, HelloRoundTrip) {
    const auto frame = encode_hello(42, a_spec());
    const WireFrame f = parse_frame(frame);
    EXPECT_EQ(f.kind, WireKind::Hello);
    EXPECT_EQ(f.id, 42u);
    const sched::DraftSideSpec s = decode_hello(f.payload), e = a_spec();
    EXPECT_EQ(s.target_n_vocab, e.target_n_vocab);
    EXPECT_EQ(s.target_n_ctx, e.target_n_ctx);
    EXPECT_EQ(s.n_batch, e.n_batch);
    EXPECT_EQ(s.branch_slots, e.branch_slots);
    EXPECT_EQ(s.cfg.k, e.cfg.k);
    EXPECT_EQ(s.cfg.fanout, e.cfg.fanout);
    EXPECT_EQ(s.cfg.fanout_budget, e.cfg.fanout_budget);
    EXPECT_EQ(s.cfg.saguaro_c, e.cfg.saguaro_c);
    EXPECT_EQ(s.cfg.backup, e.cfg.backup);
    EXPECT_EQ(s.cfg.ngram_min, e.cfg.ngram_min);
    EXPECT_EQ(s.cfg.ngram_max, e.cfg.ngram_max);
    EXPECT_EQ(s.cfg.interrupt, e.cfg.interrupt);
    EXPECT_EQ(s.cfg.force_miss, e.cfg.force_miss);
    EXPECT_EQ(s.cfg.draft_seed, e.cfg.draft_seed);
    EXPECT_EQ(s.params.temperature, e.params.temperature);
    EXPECT_EQ(s.params.top_k, e.params.top_k);
    EXPECT_EQ(s.params.top_p, e.params.top_p);
    EXPECT_EQ(s.params.min_p, e.params.min_p);
    EXPECT_EQ(s.params.repeat_penalty, e.params.repeat_penalty);
    EXPECT_EQ(s.params.repeat_last_n, e.params.repeat_last_n);
    EXPECT_EQ(s.params.seed, e.params.seed);
}

TEST(SsdWire, HelloAckAndErrorRoundTrip) {
    HelloAck a{151936, 32768, "qwen.gguf", 0x9e3779b97f4a7c15ull};
    const auto f1 = encode_hello_ack(9, a);
    const HelloAck b = decode_hello_ack(parse_frame(f1).payload);
    EXPECT_EQ(b.vocab_fingerprint, a.vocab_fingerprint);
    EXPECT_EQ(b.n_vocab, a.n_vocab);
    EXPECT_EQ(b.n_ctx_train, a.n_ctx_train);
    EXPECT_EQ(b.model, a.model);
    const auto f2 = encode_error(10, "no session");
    EXPECT_EQ(parse_frame(f2).kind, WireKind::Error);
    EXPECT_EQ(decode_error(parse_frame(f2).payload), "no session");
}

TEST(SsdWire, ToDraftRoundTrip) {
    for (auto kind : {sched::ToDraft::Kind::Begin, sched::ToDraft::Kind::Outcomes, sched::ToDraft::Kind::Stop}) {
        sched::ToDraft m = a_to_draft();
        m.kind = kind;
        const auto frame = encode_to_draft(7, m);
        const sched::ToDraft d = decode_to_draft(parse_frame(frame).payload, limits());
        EXPECT_EQ(d.kind, m.kind);
        ASSERT_EQ(d.begins.size(), 1u);
        EXPECT_EQ(d.begins[0].seq, 2);
        EXPECT_EQ(d.begins[0].prompt, m.begins[0].prompt);
        EXPECT_TRUE(d.begins[0].in_cache);
        ASSERT_EQ(d.outcomes.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(d.outcomes[i].adopt, m.outcomes[i].adopt);
            EXPECT_EQ(d.outcomes[i].seq, m.outcomes[i].seq);
            EXPECT_EQ(d.outcomes[i].accepted, m.outcomes[i].accepted);
            EXPECT_EQ(d.outcomes[i].bonus, m.outcomes[i].bonus);
            EXPECT_EQ(d.outcomes[i].max_drafts, m.outcomes[i].max_drafts);
            EXPECT_EQ(d.outcomes[i].done, m.outcomes[i].done);
        }
        EXPECT_EQ(d.batch_size, 2);
        EXPECT_EQ(d.verify_s, m.verify_s);
    }
}

TEST(SsdWire, FromDraftRoundTripIsExact) {
    const sched::FromDraft r = a_from_draft();
    const auto frame = encode_from_draft(99, r);
    const WireFrame f = parse_frame(frame);
    EXPECT_EQ(f.kind, WireKind::FromDraft);
    EXPECT_EQ(f.id, 99u);
    const sched::FromDraft d = decode_from_draft(f.payload, limits());
    ASSERT_EQ(d.specs.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const sched::Speculation &a = r.specs[i], &b = d.specs[i];
        EXPECT_EQ(b.seq, a.seq);
        EXPECT_EQ(b.root, a.root);
        EXPECT_EQ(b.tokens, a.tokens);
        EXPECT_EQ(b.kind, a.kind);
        EXPECT_EQ(b.n_vocab, a.n_vocab);
        ASSERT_EQ(b.q.size(), a.q.size());
        if (!a.q.empty()) {  // memcmp of empty vectors' null data is undefined
            EXPECT_EQ(std::memcmp(b.q.data(), a.q.data(), a.q.size() * sizeof(float)), 0) << "q must be bit-exact";
        }
        EXPECT_EQ(b.hit, a.hit);
        EXPECT_EQ(b.backup, a.backup);
    }
    EXPECT_EQ(d.stats.lookups, 11);
    EXPECT_EQ(d.stats.hits, 7);
    EXPECT_EQ(d.stats.lookups_k, r.stats.lookups_k);
    EXPECT_EQ(d.stats.hits_k, r.stats.hits_k);
    EXPECT_EQ(d.stats.jit, 2);
    EXPECT_EQ(d.stats.ngram, 1);
    EXPECT_EQ(d.stats.trees, 9);
    EXPECT_EQ(d.stats.interrupted, 4);
    EXPECT_EQ(d.stats.branches, 30);
    EXPECT_EQ(d.stats.glue_reused, 3);
    EXPECT_EQ(d.stats.tree_s, 0.5);
    EXPECT_EQ(d.stats.backup_s, 0.25);
    EXPECT_EQ(d.stats.acceptance, 0.61);
    EXPECT_EQ(d.stats.miss_exponent, 1.7);
    EXPECT_TRUE(std::isinf(d.stats.b_star));
    EXPECT_EQ(d.stats.fanout, r.stats.fanout);
    EXPECT_EQ(d.build_s, r.build_s);
    EXPECT_TRUE(d.build_interrupted);
    EXPECT_EQ(d.backup_s, r.backup_s);
    EXPECT_EQ(d.error, "");
    sched::FromDraft e;
    e.error = "SSD draft worker: boom";
    EXPECT_EQ(decode_from_draft(parse_frame(encode_from_draft(1, e)).payload, limits()).error, e.error);
}

TEST(SsdWire, EveryTruncationIsRejected) {
    const std::vector<std::vector<uint8_t>> frames{encode_hello(1, a_spec()), encode_to_draft(2, a_to_draft()),
                                                   encode_from_draft(3, a_from_draft()),
                                                   encode_hello_ack(4, HelloAck{kV, 512, "m"})};
    for (const auto& frame : frames)
        for (size_t n = 0; n < frame.size(); ++n) {
            const std::span<const uint8_t> cut(frame.data(), n);
            EXPECT_THROW(parse_frame(cut), WireError) << n << " of " << frame.size();
        }
    // A payload cut short under a correct header (length and CRC fixed up).
    const auto frame = encode_from_draft(3, a_from_draft());
    const std::span<const uint8_t> payload = parse_frame(frame).payload;
    for (size_t n = 0; n < payload.size(); n += 7) {
        const auto cut = reframe(frame, payload.first(n));
        EXPECT_THROW(decode_from_draft(parse_frame(cut).payload, limits()), WireError) << n;
    }
}

TEST(SsdWire, EveryBitFlipIsRejected) {
    const auto frame = encode_from_draft(3, a_from_draft());
    for (size_t i = 0; i < frame.size(); ++i)
        for (int bit : {0, 5}) {
            auto bad = frame;
            bad[i] ^= (uint8_t)(1u << bit);
            EXPECT_THROW(parse_frame(bad), WireError) << "byte " << i << " bit " << bit;
        }
}

TEST(SsdWire, WrongMagicVersionKindAndLengthAreRejected) {
    const auto frame = encode_to_draft(5, a_to_draft());
    auto bad = frame;
    bad[0] ^= 0xFF;  // magic
    EXPECT_THROW(parse_frame(bad), WireError);
    bad = frame;
    bad[4] = kWireVersion + 1;  // schema version
    try {
        parse_frame(bad);
        FAIL() << "a newer schema version was accepted";
    } catch (const WireError& e) {
        EXPECT_NE(std::string(e.what()).find("version"), std::string::npos) << e.what();
    }
    bad = frame;
    bad[6] = 77;  // kind
    EXPECT_THROW(parse_frame(bad), WireError);
    bad = frame;
    const uint32_t huge = kWireMaxPayload + 1;  // oversized length field
    std::memcpy(bad.data() + 16, &huge, 4);
    EXPECT_THROW(parse_frame(bad), WireError);
    bad = frame;
    bad.push_back(0);  // a byte past the stated length
    EXPECT_THROW(parse_frame(bad), WireError);
}

TEST(SsdWire, OversizedCountsAndTrailingBytesAreRejected) {
    // A list count far past the bytes left, behind a valid header and CRC.
    const auto frame = encode_to_draft(5, a_to_draft());
    std::vector<uint8_t> p(parse_frame(frame).payload.begin(), parse_frame(frame).payload.end());
    const uint32_t many = 0x7FFFFFFF;
    std::memcpy(p.data() + 1, &many, 4);  // the begins count
    EXPECT_THROW(decode_to_draft(parse_frame(reframe(frame, p)).payload, limits()), WireError);
    std::vector<uint8_t> q(parse_frame(frame).payload.begin(), parse_frame(frame).payload.end());
    q.push_back(0);
    EXPECT_THROW(decode_to_draft(parse_frame(reframe(frame, q)).payload, limits()), WireError);
}

TEST(SsdWire, InconsistentRecordsAreRejected) {
    const auto check = [](sched::FromDraft r, const char* what) {
        const auto frame = encode_from_draft(1, r);
        EXPECT_THROW(decode_from_draft(parse_frame(frame).payload, limits()), WireError) << what;
    };
    sched::FromDraft r = a_from_draft();
    r.specs[0].tokens[1] = kV;
    check(r, "token past the vocabulary");
    r = a_from_draft();
    r.specs[0].tokens[0] = -1;
    check(r, "negative token");
    r = a_from_draft();
    r.specs[1].root = kV + 3;
    check(r, "root past the vocabulary");
    r = a_from_draft();
    r.specs[0].q.pop_back();
    check(r, "q row short");
    r = a_from_draft();
    r.specs[0].n_vocab = kV - 1;
    r.specs[0].q.resize(2 * (kV - 1));
    check(r, "q rows of another vocabulary");
    r = a_from_draft();
    r.specs[0].q[3] = std::numeric_limits<float>::quiet_NaN();
    check(r, "q NaN");
    r = a_from_draft();
    r.specs[0].q[4] = INFINITY;
    check(r, "q infinite");
    r = a_from_draft();
    r.specs[0].q[4] = -0.5f;
    check(r, "q negative");
    r = a_from_draft();
    r.specs[0].seq = 3;
    check(r, "sequence past the batch");

    sched::ToDraft m = a_to_draft();
    m.begins[0].prompt.push_back(kV);
    EXPECT_THROW(decode_to_draft(parse_frame(encode_to_draft(1, m)).payload, limits()), WireError);
    m = a_to_draft();
    m.outcomes[0].bonus = kV;
    EXPECT_THROW(decode_to_draft(parse_frame(encode_to_draft(1, m)).payload, limits()), WireError);
    m = a_to_draft();
    m.outcomes[0].seq = -1;
    EXPECT_THROW(decode_to_draft(parse_frame(encode_to_draft(1, m)).payload, limits()), WireError);
    m = a_to_draft();
    m.verify_s = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(decode_to_draft(parse_frame(encode_to_draft(1, m)).payload, limits()), WireError);

    sched::DraftSideSpec s = a_spec();
    s.cfg.k = 0;
    EXPECT_THROW(decode_hello(parse_frame(encode_hello(1, s)).payload), WireError);
    s = a_spec();
    s.params.top_p = 0;
    EXPECT_THROW(decode_hello(parse_frame(encode_hello(1, s)).payload), WireError);
    s = a_spec();
    s.n_batch = 100000;
    EXPECT_THROW(decode_hello(parse_frame(encode_hello(1, s)).payload), WireError);
}

TEST(SsdWire, RandomBytesNeverCrashTheDecoders) {
    uint64_t x = 88172645463325252ULL;
    const auto frame = encode_from_draft(3, a_from_draft());
    const std::vector<uint8_t> payload(parse_frame(frame).payload.begin(), parse_frame(frame).payload.end());
    for (int t = 0; t < 2000; ++t) {
        auto p = payload;
        for (int j = 0; j < 4; ++j) {  // xorshift: a few random bytes changed
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            p[x % p.size()] = (uint8_t)(x >> 32);
        }
        try {
            (void)decode_from_draft(p, limits());
        } catch (const WireError&) {
        }
        try {
            (void)decode_to_draft(p, limits());
        } catch (const WireError&) {
        }
        try {
            (void)decode_hello(p);
        } catch (const WireError&) {
        }
    }
}

TEST(SsdWire, LoopbackRule) {
    EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:5557"));
    EXPECT_TRUE(is_local_endpoint("tcp://localhost:1"));
    EXPECT_TRUE(is_local_endpoint("tcp://[::1]:5557"));
    EXPECT_TRUE(is_local_endpoint("ipc:///tmp/ssd.sock"));
    EXPECT_FALSE(is_local_endpoint("tcp://0.0.0.0:5557"));
    EXPECT_FALSE(is_local_endpoint("tcp://10.0.0.2:5557"));
    EXPECT_FALSE(is_local_endpoint("tcp://*:5557"));
    EXPECT_NO_THROW(check_endpoint("tcp://127.0.0.1:5557", false, "x"));
    EXPECT_THROW(check_endpoint("tcp://10.0.0.2:5557", false, "x"), Error);
    EXPECT_NO_THROW(check_endpoint("tcp://10.0.0.2:5557", true, "x"));
    EXPECT_THROW(check_endpoint("udp://127.0.0.1:5557", true, "x"), Error);
    EXPECT_THROW(check_endpoint("tcp://127.0.0.1", true, "x"), Error);
}
