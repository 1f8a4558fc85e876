// The wire format of SSD's draft link (schema version 2): the records of
// sched/ssd_messages.h and the session handshake, hand-encoded little-endian
// so that both ends agree byte for byte whatever their compilers.
//
// Every message is one frame: a 24-byte header, then the payload.
//   u32 magic 'SSDW'   u16 schema version   u16 kind
//   u64 request id     u32 payload length   u32 CRC-32
// The CRC-32 covers the header's first 20 bytes and the payload: a flipped
// bit anywhere, the kind and the request id included, is caught.
// Kinds: Hello (target -> server: the DraftSideSpec; the server (re)creates
// its worker and cache and answers HelloAck with its own vocabulary), ToDraft
// and FromDraft (the records; a reply carries its request's id, so a late
// one is recognised), Error (a server's answer to what it could not serve).
//
// Decoding is bounds-checked throughout and throws WireError for anything
// malformed: a wrong magic, version or CRC, a length past the end or beyond
// the limit, a count that does not fit the bytes left, a token outside the
// vocabulary, a q row of the wrong width or not a distribution, trailing
// bytes. Floats travel as their exact IEEE bits: the verifier needs the very
// q the draft drew from, so proposals are never compressed lossily.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/ssd_draft_side.h"
#include "sched/ssd_messages.h"

namespace specdec::transport {

inline constexpr uint32_t kWireMagic = 0x57445353u;  // "SSDW" little-endian
inline constexpr uint16_t kWireVersion = 2;  // 2: the HelloAck's vocabulary fingerprint, outcomes' adopted chains
inline constexpr size_t kWireHeaderBytes = 24;
// The largest payload either side accepts: a batch of 64 speculations of 16
// sampled drafts over a 256k vocabulary is 1 GiB, far past what a round
// carries here; 256 MiB bounds what a bad peer can make us allocate.
inline constexpr uint32_t kWireMaxPayload = 256u << 20;

enum class WireKind : uint16_t { Hello = 1, HelloAck = 2, ToDraft = 3, FromDraft = 4, Error = 5 };

class WireError : public Error {
public:
    using Error::Error;
};

// A frame whose header checked out; payload points into the decoded buffer.
struct WireFrame {
    WireKind kind = WireKind::Error;
    uint64_t id = 0;
    std::span<const uint8_t> payload;
};

struct HelloAck {
    int n_vocab = 0;        // the draft's vocabulary
    int n_ctx_train = 0;    // the draft's training context
    std::string model;      // the draft model's file name (for logs)
    // runtime::vocabulary_fingerprint of the draft's token texts over the
    // target's n_vocab ids (the Hello says how many).
    uint64_t vocab_fingerprint = 0;
};

// Bounds that depend on the session: token ids must be < n_vocab, sequence
// ids < n_seq (0: no bound beyond being non-negative).
struct WireLimits {
    int n_vocab = 0;
    int n_seq = 0;
};

// Header checks (magic, version, kind, length, CRC); throws WireError.
WireFrame parse_frame(std::span<const uint8_t> bytes);

std::vector<uint8_t> encode_hello(uint64_t id, const sched::DraftSideSpec& spec);
std::vector<uint8_t> encode_hello_ack(uint64_t id, const HelloAck& ack);
std::vector<uint8_t> encode_to_draft(uint64_t id, const sched::ToDraft& m);
std::vector<uint8_t> encode_from_draft(uint64_t id, const sched::FromDraft& m);
std::vector<uint8_t> encode_error(uint64_t id, const std::string& message);

// Payload decoders (of a frame of that kind). Hello also validates the
// configuration (SsdConfig::validate, sampling ranges, sizes).
sched::DraftSideSpec decode_hello(std::span<const uint8_t> payload);
HelloAck decode_hello_ack(std::span<const uint8_t> payload);
sched::ToDraft decode_to_draft(std::span<const uint8_t> payload, const WireLimits& lim);
sched::FromDraft decode_from_draft(std::span<const uint8_t> payload, const WireLimits& lim);
std::string decode_error(std::span<const uint8_t> payload);

}  // namespace specdec::transport
