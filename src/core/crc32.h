// CRC-32 (IEEE 802.3 / zlib polynomial, reflected), for integrity checks of
// messages that cross a process boundary (transport/ssd_wire.h). Slice-by-8
// (eight table lookups per 8 bytes): a sampled SSD reply carries megabytes of
// proposal rows per round, where a byte-at-a-time loop measured ~6 ms per
// 2.4 MB reply on each side.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace specdec {

namespace detail {
inline constexpr std::array<std::array<uint32_t, 256>, 8> make_crc32_tables() {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
        for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
    return t;
}
inline constexpr auto kCrc32Tables = make_crc32_tables();
}  // namespace detail

// Continues a CRC over more bytes: crc32_update(crc32_update(0, a), b) is the
// CRC of a followed by b.
inline uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data) {
    const auto& t = detail::kCrc32Tables;
    uint32_t c = ~crc;
    const uint8_t* p = data.data();
    size_t n = data.size();
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + 4, 4);
        // Little-endian loads (x86-64, the only target this engine builds for).
        lo ^= c;
        c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    }
    for (; n > 0; --n, ++p) c = t[0][(c ^ *p) & 0xFFu] ^ (c >> 8);
    return ~c;
}

// crc32("123456789") == 0xCBF43926, the standard check value.
inline uint32_t crc32(std::span<const uint8_t> data) { return crc32_update(0, data); }

}  // namespace specdec
