#include "kv/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"

namespace specdec::kv {

namespace {
// Bytes of [p, p + n) in resident pages (whole pages: the first and last may
// be shared with neighbouring allocations).
size_t resident(const void* p, size_t n) {
    const uintptr_t page = (uintptr_t)::sysconf(_SC_PAGESIZE);
    const uintptr_t begin = (uintptr_t)p & ~(page - 1);
    const size_t len = (uintptr_t)p + n - begin;
    std::vector<unsigned char> in((len + page - 1) / page);
    if (::mincore(reinterpret_cast<void*>(begin), len, in.data()) != 0) return 0;
    size_t pages = 0;
    for (unsigned char c : in) pages += c & 1;
    return pages * page;
}
}  // namespace

size_t KvCache::resident_bytes() const {
    return resident(k_.data(), k_.bytes()) + resident(v_.data(), v_.bytes());
}

KvCache::KvCache(const KvCacheOptions& opts) : opts_(opts) {
    SPECDEC_CHECK(opts.n_layer > 0 && opts.kv_dim > 0 && opts.n_ctx > 0 && opts.n_seq > 0,
                  "invalid KV cache dimensions");
    k_ = PageBuffer(elems() * sizeof(uint16_t), "the KV cache's keys");
    v_ = PageBuffer(elems() * sizeof(uint16_t), "the KV cache's values");
    pos_.assign((size_t)opts.n_seq * opts.n_ctx, 0);
    committed_.assign(opts.n_seq, 0);
    if (opts.recurrent_floats > 0) rec_ = RecurrentStates(opts.n_seq, opts.recurrent_floats, opts.recurrent_spec_rows);
}

void KvCache::commit_length(int seq, int n) {
    SPECDEC_CHECK(n >= 0 && committed_[seq] + n <= opts_.n_ctx, "KV commit of ", n,
                  " entries overflows the context of ", opts_.n_ctx);
    for (int s = committed_[seq]; s < committed_[seq] + n; ++s)
        SPECDEC_CHECK(pos(seq, s) == s, "KV commit: slot ", s, " holds position ", pos(seq, s),
                      "; committed entries must sit at their own position");
    if (!rec_.empty() && n > 0) rec_.commit_row(seq, n - 1);
    committed_[seq] += n;
}

void KvCache::move_slot(int seq, int from, int to) {
    const size_t bytes = (size_t)opts_.kv_dim * sizeof(uint16_t);
    for (int l = 0; l < opts_.n_layer; ++l) {
        std::memcpy(k(l, seq, to), k(l, seq, from), bytes);
        std::memcpy(v(l, seq, to), v(l, seq, from), bytes);
    }
    set_pos(seq, to, pos(seq, from));
}

void KvCache::commit_path(int seq, std::span<const int> spec_indices) {
    const int base = committed_[seq];
    // The state after the path's last row (its ancestors are the path).
    if (!rec_.empty() && !spec_indices.empty()) rec_.commit_row(seq, spec_indices.back());
    int prev = -1;
    for (size_t i = 0; i < spec_indices.size(); ++i) {
        const int r = spec_indices[i];
        // Increasing indices with r >= i make the in-place forward copy safe.
        SPECDEC_CHECK(r > prev && r >= (int)i && base + r < opts_.n_ctx,
                      "KV commit_path: indices must increase and stay inside the context");
        prev = r;
        if (r != (int)i) move_slot(seq, base + r, base + (int)i);
        SPECDEC_CHECK(pos(seq, base + (int)i) == base + (int)i, "KV commit_path: entry ", r,
                      " holds position ", pos(seq, base + (int)i), ", expected ", base + (int)i);
    }
    committed_[seq] = base + (int)spec_indices.size();
}

void KvCache::truncate(int seq, int len) {
    SPECDEC_CHECK(len >= 0 && len <= committed_[seq], "KV truncate to ", len, " beyond committed ",
                  committed_[seq]);
    if (!rec_.empty()) rec_.restore(seq, len, committed_[seq]);
    committed_[seq] = len;
}

void KvCache::copy_sequence(int src, int dst) {
    if (src == dst) return;
    copy_entries(src, dst, 0, committed_[src]);
    committed_[dst] = committed_[src];
    if (!rec_.empty()) rec_.copy(src, dst);
}

void KvCache::copy_entries(int src, int dst, int from, int n) {
    if (n <= 0) return;
    const size_t bytes = (size_t)n * opts_.kv_dim * sizeof(uint16_t);
    for (int l = 0; l < opts_.n_layer; ++l) {
        std::memcpy(k(l, dst, from), k(l, src, from), bytes);
        std::memcpy(v(l, dst, from), v(l, src, from), bytes);
    }
    std::memcpy(&pos_[(size_t)dst * opts_.n_ctx + from], &pos_[(size_t)src * opts_.n_ctx + from],
                (size_t)n * sizeof(int32_t));
}

void KvCache::copy_range(int src, int dst, int from, int n) {
    SPECDEC_CHECK(rec_.empty(), "KV cache: a range of a recurrent state cannot be copied");
    SPECDEC_CHECK(src != dst && src >= 0 && dst >= 0 && src < opts_.n_seq && dst < opts_.n_seq,
                  "KV cache: copy between sequences ", src, " and ", dst, " of ", opts_.n_seq);
    SPECDEC_CHECK(n >= 0 && committed_[dst] == from && committed_[src] >= from + n, "KV cache: copying entries [",
                  from, ", ", from + n, ") of a sequence holding ", committed_[src], " into one holding ",
                  committed_[dst]);
    copy_entries(src, dst, from, n);
    committed_[dst] = from + n;
}

void KvCache::checkpoint(int seq) {
    if (!rec_.empty()) rec_.save_checkpoint(seq, committed_[seq]);
}

}  // namespace specdec::kv
