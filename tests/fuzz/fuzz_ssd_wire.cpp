// libFuzzer target: SSD's wire schema (transport/ssd_wire.h), the bytes a
// draft server or a target reads from a peer it does not control. The first
// input byte picks what reads the rest: the frame header check (magic,
// version, kind, length, CRC) or one payload decoder directly (random bytes
// almost never pass a CRC, so the decoders are fuzzed past it). The contract:
// any malformed input throws specdec::Error (WireError) and nothing is read
// outside the buffer; whatever decodes re-encodes to a frame that decodes to
// the same record.
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "transport/ssd_wire.h"

using namespace specdec;
using namespace specdec::transport;

namespace {

// The payload of a frame that encode_* made (its header is checked too).
std::span<const uint8_t> payload_of(const std::vector<uint8_t>& frame, WireKind kind) {
    const WireFrame f = parse_frame(frame);
    FUZZ_CHECK(f.kind == kind && f.id == 7);
    return f.payload;
}

void run(const uint8_t* data, size_t size) {
    if (size == 0) return;
    const std::span<const uint8_t> in(data + 1, size - 1);
    const WireLimits lim{64 + data[0] % 128, 4};
    switch (data[0] % 6) {
        case 0: {
            const WireFrame f = parse_frame(in);
            FUZZ_CHECK(f.payload.data() >= in.data() && f.payload.data() + f.payload.size() <= in.data() + in.size());
            break;
        }
        case 1: {
            const sched::DraftSideSpec spec = decode_hello(in);
            const sched::DraftSideSpec again = decode_hello(payload_of(encode_hello(7, spec), WireKind::Hello));
            FUZZ_CHECK(encode_hello(7, again) == encode_hello(7, spec));
            break;
        }
        case 2: {
            const HelloAck ack = decode_hello_ack(in);
            const HelloAck again = decode_hello_ack(payload_of(encode_hello_ack(7, ack), WireKind::HelloAck));
            FUZZ_CHECK(again.n_vocab == ack.n_vocab && again.model == ack.model &&
                       again.vocab_fingerprint == ack.vocab_fingerprint);
            break;
        }
        case 3: {
            const sched::ToDraft m = decode_to_draft(in, lim);
            const auto frame = encode_to_draft(7, m);
            FUZZ_CHECK(encode_to_draft(7, decode_to_draft(payload_of(frame, WireKind::ToDraft), lim)) == frame);
            break;
        }
        case 4: {
            const sched::FromDraft m = decode_from_draft(in, lim);
            const auto frame = encode_from_draft(7, m);
            FUZZ_CHECK(encode_from_draft(7, decode_from_draft(payload_of(frame, WireKind::FromDraft), lim)) == frame);
            break;
        }
        default: {
            const std::string msg = decode_error(in);
            FUZZ_CHECK(decode_error(payload_of(encode_error(7, msg), WireKind::Error)) == msg);
            break;
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // libFuzzer hands the input over in a heap block of exactly its size, so
    // ASan sees any read past the end.
    try {
        run(data, size);
    } catch (const Error&) {
        // documented: malformed input
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "ssd_wire");
    }
    return 0;
}
