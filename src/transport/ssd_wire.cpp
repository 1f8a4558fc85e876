#include "transport/ssd_wire.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/crc32.h"
#include "sample/sampler.h"

namespace specdec::transport {

namespace {

// The CRC covers the header before it (so a flipped kind or request id is
// caught too, not only a flipped payload byte) and then the payload.
uint32_t frame_crc(std::span<const uint8_t> frame) {
    return crc32_update(crc32(frame.first(20)), frame.subspan(kWireHeaderBytes));
}

// Float rows (q) are copied in bulk: the host's layout is the wire's.
static_assert(std::endian::native == std::endian::little, "the wire format is little-endian, as is this host");

// Little-endian writer of one frame: header first (patched at the end).
class Writer {
public:
    Writer(WireKind kind, uint64_t id) : buf_(kWireHeaderBytes, 0), kind_(kind), id_(id) {}
    void u8(uint8_t v) { buf_.push_back(v); }
    void u16(uint16_t v) { le(v, 2); }
    void u32(uint32_t v) { le(v, 4); }
    void u64(uint64_t v) { le(v, 8); }
    void i32(int32_t v) { u32((uint32_t)v); }
    void f32(float v) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        u32(b);
    }
    void f64(double v) {
        uint64_t b;
        std::memcpy(&b, &v, 8);
        u64(b);
    }
    void count(size_t n) {
        SPECDEC_CHECK(n <= 0xFFFFFFFFu, "wire: a list of ", n, " entries is too long");
        u32((uint32_t)n);
    }
    void str(const std::string& s) {
        count(s.size());
        buf_.insert(buf_.end(), s.begin(), s.end());
    }
    void i32s(const std::vector<int32_t>& v) {
        count(v.size());
        for (int32_t x : v) i32(x);
    }
    void ints(const std::vector<int>& v) {
        count(v.size());
        for (int x : v) i32(x);
    }
    void f32s(const std::vector<float>& v) {
        count(v.size());
        const size_t at = buf_.size();
        buf_.resize(at + v.size() * 4);
        if (!v.empty()) std::memcpy(buf_.data() + at, v.data(), v.size() * 4);
    }
    std::vector<uint8_t> finish() {
        const size_t n = buf_.size() - kWireHeaderBytes;
        SPECDEC_CHECK(n <= kWireMaxPayload, "wire: a message of ", n, " bytes is past the limit");
        put_at(0, kWireMagic, 4);
        put_at(4, kWireVersion, 2);
        put_at(6, (uint16_t)kind_, 2);
        put_at(8, id_, 8);
        put_at(16, n, 4);
        put_at(20, frame_crc(buf_), 4);
        return std::move(buf_);
    }

private:
    void le(uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) buf_.push_back((uint8_t)(v >> (8 * i)));
    }
    void put_at(size_t at, uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) buf_[at + i] = (uint8_t)(v >> (8 * i));
    }
    std::vector<uint8_t> buf_;
    WireKind kind_;
    uint64_t id_;
};

// Bounds-checked little-endian reader; every failure is a WireError.
class Reader {
public:
    explicit Reader(std::span<const uint8_t> b) : b_(b) {}
    uint64_t le(int bytes) {
        need((size_t)bytes);
        uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) v |= (uint64_t)b_[pos_ + i] << (8 * i);
        pos_ += bytes;
        return v;
    }
    uint8_t u8() { return (uint8_t)le(1); }
    uint32_t u32() { return (uint32_t)le(4); }
    uint64_t u64() { return le(8); }
    int32_t i32() { return (int32_t)u32(); }
    float f32() {
        const uint32_t b = u32();
        float v;
        std::memcpy(&v, &b, 4);
        return v;
    }
    double f64() {
        const uint64_t b = u64();
        double v;
        std::memcpy(&v, &b, 8);
        return v;
    }
    bool flag() {
        const uint8_t v = u8();
        if (v > 1) throw WireError("wire: a flag byte of " + std::to_string(v));
        return v == 1;
    }
    // A list count whose entries (elem_bytes each at least) fit the bytes left.
    size_t count(size_t elem_bytes) {
        const size_t n = u32();
        if (elem_bytes > 0 && n > (b_.size() - pos_) / elem_bytes)
            throw WireError("wire: a list of " + std::to_string(n) + " entries runs past the end");
        return n;
    }
    std::string str(size_t max_len) {
        const size_t n = count(1);
        if (n > max_len) throw WireError("wire: a string of " + std::to_string(n) + " bytes");
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    std::vector<int32_t> tokens(int n_vocab) {
        const size_t n = count(4);
        std::vector<int32_t> v(n);
        for (size_t i = 0; i < n; ++i) {
            v[i] = i32();
            if (v[i] < 0 || (n_vocab > 0 && v[i] >= n_vocab))
                throw WireError("wire: token " + std::to_string(v[i]) + " outside the vocabulary of " +
                                std::to_string(n_vocab));
        }
        return v;
    }
    // n floats in bulk (the caller checked the count against the bytes left).
    void f32s(std::vector<float>& out, size_t n) {
        need(n * 4);
        out.resize(n);
        if (n) std::memcpy(out.data(), b_.data() + pos_, n * 4);
        pos_ += n * 4;
    }
    std::vector<int> counters() {
        const size_t n = count(4);
        if (n > 4096) throw WireError("wire: " + std::to_string(n) + " counters");
        std::vector<int> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = i32();
        return v;
    }
    void end() const {
        if (pos_ != b_.size()) throw WireError("wire: " + std::to_string(b_.size() - pos_) + " trailing bytes");
    }

private:
    void need(size_t n) const {
        if (n > b_.size() - pos_) throw WireError("wire: the message ends early");
    }
    std::span<const uint8_t> b_;
    size_t pos_ = 0;
};

int checked_int(Reader& r, int lo, int hi, const char* what) {
    const int32_t v = r.i32();
    if (v < lo || v > hi)
        throw WireError(std::string("wire: ") + what + " " + std::to_string(v) + " outside [" + std::to_string(lo) +
                        ", " + std::to_string(hi) + "]");
    return v;
}

double finite(double v, const char* what) {
    if (!std::isfinite(v)) throw WireError(std::string("wire: ") + what + " is not finite");
    return v;
}

int checked_seq(Reader& r, const WireLimits& lim) {
    return checked_int(r, 0, lim.n_seq > 0 ? lim.n_seq - 1 : 1 << 20, "sequence");
}

void put_stats(Writer& w, const sched::DraftSideStats& s) {
    w.i32(s.lookups);
    w.i32(s.hits);
    w.ints(s.lookups_k);
    w.ints(s.hits_k);
    w.i32(s.jit);
    w.i32(s.ngram);
    w.i32(s.random);
    w.i32(s.trees);
    w.i32(s.interrupted);
    w.i32(s.branches);
    w.i32(s.glue_reused);
    w.f64(s.tree_s);
    w.f64(s.backup_s);
    w.f64(s.acceptance);
    w.f64(s.miss_exponent);
    w.f64(s.b_star);  // infinite until calibrated
    w.ints(s.fanout);
}

sched::DraftSideStats get_stats(Reader& r) {
    sched::DraftSideStats s;
    s.lookups = r.i32();
    s.hits = r.i32();
    s.lookups_k = r.counters();
    s.hits_k = r.counters();
    s.jit = r.i32();
    s.ngram = r.i32();
    s.random = r.i32();
    s.trees = r.i32();
    s.interrupted = r.i32();
    s.branches = r.i32();
    s.glue_reused = r.i32();
    s.tree_s = r.f64();
    s.backup_s = r.f64();
    s.acceptance = r.f64();
    s.miss_exponent = r.f64();
    s.b_star = r.f64();
    s.fanout = r.counters();
    return s;
}

}  // namespace

WireFrame parse_frame(std::span<const uint8_t> bytes) {
    if (bytes.size() < kWireHeaderBytes)
        throw WireError("wire: a frame of " + std::to_string(bytes.size()) + " bytes has no header");
    Reader h(bytes.first(kWireHeaderBytes));
    const uint32_t magic = h.u32();
    const uint16_t version = (uint16_t)h.le(2);
    const uint16_t kind = (uint16_t)h.le(2);
    WireFrame f;
    f.id = h.u64();
    const uint32_t len = h.u32();
    const uint32_t crc = h.u32();
    if (magic != kWireMagic) throw WireError("wire: not an SSD draft-link message (bad magic)");
    if (version != kWireVersion)
        throw WireError("wire: schema version " + std::to_string(version) + ", this build speaks " +
                        std::to_string(kWireVersion));
    if (kind < (uint16_t)WireKind::Hello || kind > (uint16_t)WireKind::Error)
        throw WireError("wire: unknown message kind " + std::to_string(kind));
    if (len > kWireMaxPayload) throw WireError("wire: a payload of " + std::to_string(len) + " bytes is past the limit");
    if (len != bytes.size() - kWireHeaderBytes)
        throw WireError("wire: the header says " + std::to_string(len) + " payload bytes, the frame holds " +
                        std::to_string(bytes.size() - kWireHeaderBytes));
    f.kind = (WireKind)kind;
    f.payload = bytes.subspan(kWireHeaderBytes);
    if (frame_crc(bytes) != crc) throw WireError("wire: CRC mismatch (a corrupted message)");
    return f;
}

std::vector<uint8_t> encode_hello(uint64_t id, const sched::DraftSideSpec& s) {
    Writer w(WireKind::Hello, id);
    w.i32(s.target_n_vocab);
    w.i32(s.target_n_ctx);
    w.i32(s.n_batch);
    w.i32(s.branch_slots);
    const sched::SsdConfig& c = s.cfg;
    w.i32(c.k);
    w.u8((uint8_t)c.fanout);
    w.i32(c.fanout_budget);
    w.f32(c.saguaro_c);
    w.u8((uint8_t)c.backup);
    w.i32(c.ngram_min);
    w.i32(c.ngram_max);
    w.u8(c.interrupt ? 1 : 0);
    w.u8(c.force_miss ? 1 : 0);
    w.u64(c.draft_seed);
    const sample::SamplingParams& p = s.params;
    w.f32(p.temperature);
    w.i32(p.top_k);
    w.f32(p.top_p);
    w.f32(p.min_p);
    w.f32(p.repeat_penalty);
    w.i32(p.repeat_last_n);
    w.u64(p.seed);
    return w.finish();
}

sched::DraftSideSpec decode_hello(std::span<const uint8_t> payload) {
    Reader r(payload);
    sched::DraftSideSpec s;
    s.target_n_vocab = checked_int(r, 1, 1 << 22, "vocabulary size");
    s.target_n_ctx = checked_int(r, 8, 1 << 20, "context");
    s.n_batch = checked_int(r, 1, 64, "batch");
    s.branch_slots = checked_int(r, 0, 256, "branch slots");
    sched::SsdConfig& c = s.cfg;
    c.k = checked_int(r, 1, 64, "K");
    const uint8_t fan = r.u8();
    if (fan > (uint8_t)sched::FanoutKind::Uniform) throw WireError("wire: unknown fan-out " + std::to_string(fan));
    c.fanout = (sched::FanoutKind)fan;
    c.fanout_budget = checked_int(r, 0, 256, "fan-out budget");
    c.saguaro_c = (float)finite(r.f32(), "saguaro C");
    const uint8_t backup = r.u8();
    if (backup > (uint8_t)sched::BackupKind::Random) throw WireError("wire: unknown backup " + std::to_string(backup));
    c.backup = (sched::BackupKind)backup;
    c.ngram_min = checked_int(r, 1, 64, "n-gram minimum");
    c.ngram_max = checked_int(r, 1, 64, "n-gram maximum");
    c.interrupt = r.flag();
    c.force_miss = r.flag();
    c.draft_seed = r.u64();
    sample::SamplingParams& p = s.params;
    p.temperature = (float)finite(r.f32(), "temperature");
    p.top_k = checked_int(r, 0, 1 << 22, "top-k");
    p.top_p = (float)finite(r.f32(), "top-p");
    p.min_p = (float)finite(r.f32(), "min-p");
    p.repeat_penalty = (float)finite(r.f32(), "repeat penalty");
    p.repeat_last_n = checked_int(r, -1, 1 << 20, "repeat window");
    p.seed = r.u64();
    r.end();
    try {
        c.validate();
        sample::validate(p);
    } catch (const WireError&) {
        throw;
    } catch (const Error& e) {
        throw WireError(std::string("wire: bad hello: ") + e.what());
    }
    return s;
}

std::vector<uint8_t> encode_hello_ack(uint64_t id, const HelloAck& a) {
    Writer w(WireKind::HelloAck, id);
    w.i32(a.n_vocab);
    w.i32(a.n_ctx_train);
    w.str(a.model);
    w.u64(a.vocab_fingerprint);
    return w.finish();
}

HelloAck decode_hello_ack(std::span<const uint8_t> payload) {
    Reader r(payload);
    HelloAck a;
    a.n_vocab = checked_int(r, 1, 1 << 22, "vocabulary size");
    a.n_ctx_train = checked_int(r, 1, 1 << 24, "training context");
    a.model = r.str(4096);
    a.vocab_fingerprint = r.u64();
    r.end();
    return a;
}

std::vector<uint8_t> encode_to_draft(uint64_t id, const sched::ToDraft& m) {
    Writer w(WireKind::ToDraft, id);
    w.u8((uint8_t)m.kind);
    w.count(m.begins.size());
    for (const sched::DraftBegin& b : m.begins) {
        w.i32(b.seq);
        w.u8(b.in_cache ? 1 : 0);
        w.i32s(b.prompt);
    }
    w.count(m.outcomes.size());
    for (const sched::DraftOutcome& o : m.outcomes) {
        w.i32(o.seq);
        w.i32(o.accepted);
        w.i32(o.bonus);
        w.i32(o.max_drafts);
        w.u8(o.done ? 1 : 0);
        w.i32s(o.adopt);
    }
    w.i32(m.batch_size);
    w.f64(m.verify_s);
    return w.finish();
}

sched::ToDraft decode_to_draft(std::span<const uint8_t> payload, const WireLimits& lim) {
    Reader r(payload);
    sched::ToDraft m;
    const uint8_t kind = r.u8();
    if (kind > (uint8_t)sched::ToDraft::Kind::Stop) throw WireError("wire: unknown ToDraft kind " + std::to_string(kind));
    m.kind = (sched::ToDraft::Kind)kind;
    const size_t nb = r.count(9);
    m.begins.resize(nb);
    for (sched::DraftBegin& b : m.begins) {
        b.seq = checked_seq(r, lim);
        b.in_cache = r.flag();
        b.prompt = r.tokens(lim.n_vocab);
    }
    const size_t no = r.count(21);
    m.outcomes.resize(no);
    for (sched::DraftOutcome& o : m.outcomes) {
        o.seq = checked_seq(r, lim);
        o.accepted = checked_int(r, 0, 64, "accepted drafts");
        o.bonus = checked_int(r, 0, lim.n_vocab > 0 ? lim.n_vocab - 1 : (1 << 22), "bonus token");
        o.max_drafts = checked_int(r, 0, 1 << 20, "draft cap");
        o.done = r.flag();
        o.adopt = r.tokens(lim.n_vocab);
        if (o.adopt.size() > 64) throw WireError("wire: an adopted chain of more than 64 tokens");
    }
    m.batch_size = checked_int(r, 0, 1 << 16, "batch size");
    m.verify_s = finite(r.f64(), "verification time");
    if (m.verify_s < 0) throw WireError("wire: negative verification time");
    r.end();
    return m;
}

std::vector<uint8_t> encode_from_draft(uint64_t id, const sched::FromDraft& m) {
    Writer w(WireKind::FromDraft, id);
    w.count(m.specs.size());
    for (const sched::Speculation& s : m.specs) {
        w.i32(s.seq);
        w.i32(s.root);
        w.i32s(s.tokens);
        w.u8((uint8_t)s.kind);
        w.i32(s.n_vocab);
        w.f32s(s.q);  // exact float32: the verifier needs the q the draft drew from
        w.u8(s.hit ? 1 : 0);
        w.u8((uint8_t)s.backup);
    }
    put_stats(w, m.stats);
    w.f64(m.build_s);
    w.u8(m.build_interrupted ? 1 : 0);
    w.f64(m.backup_s);
    w.str(m.error);
    return w.finish();
}

sched::FromDraft decode_from_draft(std::span<const uint8_t> payload, const WireLimits& lim) {
    Reader r(payload);
    sched::FromDraft m;
    const size_t ns = r.count(23);
    m.specs.resize(ns);
    for (sched::Speculation& s : m.specs) {
        s.seq = checked_seq(r, lim);
        s.root = checked_int(r, 0, lim.n_vocab > 0 ? lim.n_vocab - 1 : (1 << 22), "root token");
        s.tokens = r.tokens(lim.n_vocab);
        const uint8_t kind = r.u8();
        if (kind > (uint8_t)spec::DraftKind::Sampled) throw WireError("wire: unknown draft kind " + std::to_string(kind));
        s.kind = (spec::DraftKind)kind;
        s.n_vocab = checked_int(r, 0, 1 << 22, "q width");
        const size_t nq = r.count(4);
        if (nq != 0) {
            if (s.n_vocab <= 0 || (lim.n_vocab > 0 && s.n_vocab != lim.n_vocab) ||
                nq != s.tokens.size() * (size_t)s.n_vocab)
                throw WireError("wire: q rows of the wrong size (" + std::to_string(nq) + " values for " +
                                std::to_string(s.tokens.size()) + " drafts of width " + std::to_string(s.n_vocab) +
                                ")");
            r.f32s(s.q, nq);
            for (float v : s.q)
                if (!std::isfinite(v) || v < 0.0f) throw WireError("wire: a q value that is not a probability");
        }
        s.hit = r.flag();
        const uint8_t backup = r.u8();
        if (backup > (uint8_t)sched::BackupKind::Random) throw WireError("wire: unknown backup " + std::to_string(backup));
        s.backup = (sched::BackupKind)backup;
    }
    m.stats = get_stats(r);
    m.build_s = r.f64();
    m.build_interrupted = r.flag();
    m.backup_s = r.f64();
    m.error = r.str(1 << 16);
    r.end();
    return m;
}

std::vector<uint8_t> encode_error(uint64_t id, const std::string& message) {
    Writer w(WireKind::Error, id);
    w.str(message.substr(0, 1 << 16));
    return w.finish();
}

std::string decode_error(std::span<const uint8_t> payload) {
    Reader r(payload);
    std::string s = r.str(1 << 16);
    r.end();
    return s;
}

}  // namespace specdec::transport
