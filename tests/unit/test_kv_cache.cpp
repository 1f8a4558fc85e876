#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "kv/kv_cache.h"

using namespace specdec;

namespace {
// Writes a recognisable value (token-like id) into every layer of a slot.
void write_slot(kv::KvCache& c, int seq, int slot, uint16_t id) {
    for (int l = 0; l < c.n_layer(); ++l)
        for (int d = 0; d < c.kv_dim(); ++d) {
            c.k(l, seq, slot)[d] = id;
            c.v(l, seq, slot)[d] = (uint16_t)(id + 1);
        }
}
uint16_t read_slot(const kv::KvCache& c, int seq, int slot) { return c.k(1, seq, slot)[3]; }
// Commits n entries in seq at positions 0..n-1, slot i holding id first_id + i.
void commit_ids(kv::KvCache& c, int seq, int n, uint16_t first_id) {
    for (int i = 0; i < n; ++i) {
        write_slot(c, seq, i, (uint16_t)(first_id + i));
        c.set_pos(seq, i, i);
    }
    c.commit_length(seq, n);
}
}  // namespace

// Property test: random branch/commit/rollback sequences leave exactly what a
// from-scratch run would hold in the committed prefix.
TEST(KvCache, RandomBranchCommitRollbackMatchesModel) {
    kv::KvCache c({2, 8, 64, 2});
    std::mt19937 rng(5);
    std::vector<std::vector<uint16_t>> model(2);  // committed ids per sequence
    uint16_t next_id = 1;
    for (int iter = 0; iter < 2000; ++iter) {
        const int seq = (int)(rng() % 2);
        const int base = c.committed(seq);
        const int room = c.n_ctx() - base;
        const int op = (int)(rng() % 4);
        if (op == 3 || room < 8) {  // rollback
            const int len = base ? (int)(rng() % (base + 1)) : 0;
            c.truncate(seq, len);
            model[seq].resize(len);
            continue;
        }
        const int n_spec = 1 + (int)(rng() % std::min(8, room));
        std::vector<uint16_t> ids;
        for (int r = 0; r < n_spec; ++r) {
            ids.push_back(next_id++);
            write_slot(c, seq, base + r, ids.back());
            c.set_pos(seq, base + r, base + r);  // chain positions
        }
        if (op == 0) {  // commit by length
            const int keep = (int)(rng() % (n_spec + 1));
            c.commit_length(seq, keep);
            model[seq].insert(model[seq].end(), ids.begin(), ids.begin() + keep);
        } else {  // commit by path: increasing indices, entry j must sit at position base+j
            std::vector<int> idx;
            for (int r = 0; r < n_spec; ++r)
                if (rng() % 2) idx.push_back(r);
            for (size_t j = 0; j < idx.size(); ++j) c.set_pos(seq, base + idx[j], base + (int)j);
            c.commit_path(seq, idx);
            for (int r : idx) model[seq].push_back(ids[r]);
        }
        ASSERT_EQ(c.committed(seq), (int)model[seq].size());
        for (int s = 0; s < 2; ++s)
            for (int i = 0; i < c.committed(s); ++i) ASSERT_EQ(read_slot(c, s, i), model[s][i]) << "iter " << iter;
    }
}

TEST(KvCache, CopySequenceAndErrors) {
    kv::KvCache c({2, 4, 16, 2});
    commit_ids(c, 0, 5, 100);
    c.copy_sequence(0, 1);
    ASSERT_EQ(c.committed(1), 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(read_slot(c, 1, i), 100 + i);
    EXPECT_THROW(c.commit_length(0, 12), Error);   // overflow
    EXPECT_THROW(c.truncate(0, 6), Error);         // beyond committed
    EXPECT_THROW(c.commit_path(0, std::vector<int>{2, 1}), Error);  // not increasing
    c.set_pos(0, 5, 9);
    EXPECT_THROW(c.commit_length(0, 1), Error);    // wrong position at slot
}

// copy_range: the SSD draft side's branch slots take a range of their
// sequence's entries past what they already share with it.
TEST(KvCache, CopyRangeAppendsEntriesPositionsIncluded) {
    kv::KvCache c({2, 4, 16, 3});
    commit_ids(c, 0, 8, 100);
    c.copy_range(0, 1, 0, 3);  // the shared prefix
    ASSERT_EQ(c.committed(1), 3);
    write_slot(c, 2, 0, 7);  // another sequence is never touched
    c.copy_range(0, 1, 3, 5);
    ASSERT_EQ(c.committed(1), 8);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(read_slot(c, 1, i), 100 + i);
        EXPECT_EQ(c.pos(1, i), i);
        EXPECT_EQ(c.v(0, 1, i)[0], 101 + i);
    }
    EXPECT_EQ(read_slot(c, 2, 0), 7);
    EXPECT_EQ(c.committed(2), 0);
    c.copy_range(0, 1, 8, 0);  // nothing to copy
    EXPECT_EQ(c.committed(1), 8);
    c.truncate(1, 2);
    EXPECT_THROW(c.copy_range(0, 1, 3, 1), Error);  // dst holds 2 entries, not 3
    EXPECT_THROW(c.copy_range(0, 1, 2, 7), Error);  // src holds only 8
    EXPECT_THROW(c.copy_range(1, 1, 2, 1), Error);  // same sequence
    EXPECT_THROW(c.copy_range(0, 3, 0, 1), Error);  // no such sequence
}

// The server tells its KV pages from its heap by this: a fresh cache holds
// (almost) nothing in RAM, written slots do, and clearing does not give them back.
TEST(KvCache, ResidentBytesCountWrittenPagesOnly) {
    kv::KvCacheOptions o;
    o.n_layer = 4;
    o.kv_dim = 256;  // a slot is 512 bytes per layer, a (layer, seq) block 512 KiB
    o.n_ctx = 1024;
    o.n_seq = 4;
    kv::KvCache c(o);
    ASSERT_EQ(c.bytes(), 16u << 20);
    const size_t page = 4096;
    // The buffers are mapped pages of their own (core/page_buffer.h), never
    // heap memory an earlier test dirtied: nothing is resident before a write.
    EXPECT_EQ(c.resident_bytes(), 0u);
    const size_t fresh = c.resident_bytes();
    for (int s = 0; s < 64; ++s) write_slot(c, 1, s, 7);  // 64 slots x 512 B = 8 pages per layer, K and V
    const size_t written = c.resident_bytes() - fresh;
    EXPECT_GE(written, 2u * 4 * 8 * page);
    EXPECT_LE(written, 2u * 4 * 9 * page);
    c.clear(1);
    EXPECT_EQ(c.resident_bytes() - fresh, written);
}
