// A vocabulary's text -> id index in flat arrays: the texts concatenated (with
// offsets, so id -> text too) and an open-addressing table of ids. It replaces
// an std::unordered_map<std::string, int32_t>, whose 64-byte node per token
// came to 16 MiB for Gemma 3's 262144 tokens; this is about 13 bytes a token
// plus the text. find() reads like the map's: an entry with ->second, end()
// on a miss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace specdec::io {

class TokenIndex {
public:
    struct Entry {
        int32_t second = -1;  // the id; -1: empty slot
    };

    // Appends the text of the next id (0, 1, ...); false when the text is
    // already present (nothing is added then).
    bool add(std::string_view text) {
        if ((size() + 1) * 2 > table_.size()) rehash(std::max<size_t>(64, table_.size() * 2));
        size_t slot = hash(text) & (table_.size() - 1);
        while (table_[slot].second >= 0) {
            if (this->text(table_[slot].second) == text) return false;
            slot = (slot + 1) & (table_.size() - 1);
        }
        SPECDEC_CHECK(blob_.size() + text.size() < UINT32_MAX, "tokenizer: vocabulary texts exceed 4 GiB");
        table_[slot].second = (int32_t)size();
        blob_.append(text);
        off_.push_back((uint32_t)blob_.size());
        return true;
    }
    // Sizes the table for n texts (no rehash while adding them).
    void reserve(size_t n) {
        size_t cap = 64;
        while (cap < 2 * n) cap *= 2;
        if (cap > table_.size()) rehash(cap);
        off_.reserve(n + 1);
    }
    void shrink_to_fit() { blob_.shrink_to_fit(); }

    const Entry* find(std::string_view text) const {
        if (table_.empty()) return end();
        size_t slot = hash(text) & (table_.size() - 1);
        while (table_[slot].second >= 0) {
            if (this->text(table_[slot].second) == text) return &table_[slot];
            slot = (slot + 1) & (table_.size() - 1);
        }
        return end();
    }
    const Entry* end() const { return nullptr; }

    size_t size() const { return off_.size() - 1; }
    std::string_view text(int32_t id) const {
        return std::string_view(blob_).substr(off_[(size_t)id], off_[(size_t)id + 1] - off_[(size_t)id]);
    }

private:
    static size_t hash(std::string_view s) {
        uint64_t h = 1469598103934665603ull;  // FNV-1a
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
        return (size_t)(h ^ (h >> 29));
    }
    void rehash(size_t cap) {
        table_.assign(cap, Entry{});
        for (size_t id = 0; id < size(); ++id) {
            size_t slot = hash(text((int32_t)id)) & (cap - 1);
            while (table_[slot].second >= 0) slot = (slot + 1) & (cap - 1);
            table_[slot].second = (int32_t)id;
        }
    }

    std::string blob_;
    std::vector<uint32_t> off_{0};
    std::vector<Entry> table_;  // power-of-two size, at most half full
};

}  // namespace specdec::io
