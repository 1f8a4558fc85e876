// libFuzzer target: the tokenizer (io/tokenizer, BPE and SentencePiece) in two
// modes, chosen by bit 7 of byte 0.
//
// Text mode (bit 7 clear): bits 0-2 pick one of eight vocabularies, bit 3 is
// add_special, bit 4 parse_special; the rest of the input is the text to
// encode. Slots 0-4 are synthetic (tests/fuzz/fuzz_vocab.h); slots 5-7 are the
// real SmolLM2, Qwen2.5 and Gemma 3 vocabularies when models/ has them (set
// SPECDEC_FUZZ_MODELS to another folder, or to "none"), else synthetic ones of
// the same kind. Checked: ids are in range, decoding works, and for the
// synthetic vocabularies (built so that this holds) decode(encode(text)) gives
// the text back.
//
// Vocabulary mode (bit 7 set): the rest of the input describes a vocabulary
// (model type, pre-tokenizer, tokens, types, scores, merges, special ids and
// flags), which is written as GGUF metadata and loaded as a model load would;
// what is left encodes as text. Loading must succeed or throw specdec::Error.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/fuzz_vocab.h"
#include "io/gguf.h"
#include "io/tokenizer.h"

using namespace specdec;
using namespace specdec::io;

namespace {

struct Vocab {
    std::string name;
    std::vector<uint8_t> bytes;  // backing store of `file` when synthetic
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<Tokenizer> tok;
    bool synthetic = true;
    bool spm = false;
    bool space_prefix = false;
};

std::unique_ptr<Vocab> synthetic(const std::string& name, const test::GgufWriter& w, bool spm, bool prefix) {
    auto v = std::make_unique<Vocab>();
    v->name = name;
    v->bytes = w.bytes();
    v->file = GgufFile::parse(v->bytes.data(), v->bytes.size(), name);
    v->tok = Tokenizer::from_gguf(*v->file);
    v->spm = spm;
    v->space_prefix = prefix;
    return v;
}

// A real model's vocabulary, or nullptr when the file is not there.
std::unique_ptr<Vocab> real(const std::string& file_name) {
    const char* env = std::getenv("SPECDEC_FUZZ_MODELS");
    std::string dir = env ? env : std::string(SPECDEC_SOURCE_DIR) + "/models";
    if (dir == "none") return nullptr;
    const std::string path = dir + "/" + file_name;
    if (FILE* fp = std::fopen(path.c_str(), "rb")) {
        std::fclose(fp);
    } else {
        return nullptr;
    }
    auto v = std::make_unique<Vocab>();
    v->name = file_name;
    v->file = GgufFile::open(path);
    v->tok = Tokenizer::from_gguf(*v->file);
    v->file->release_large_arrays(4096);  // as the engine does once loaded
    v->synthetic = false;
    return v;
}

std::vector<std::unique_ptr<Vocab>> load_vocabs() {
    std::vector<std::unique_ptr<Vocab>> v;
    v.push_back(synthetic("bpe-default", fuzz::bpe_vocab("default"), false, false));
    v.push_back(synthetic("bpe-gpt2", fuzz::bpe_vocab("gpt2"), false, false));
    v.push_back(synthetic("bpe-smollm", fuzz::bpe_vocab("smollm"), false, false));
    v.push_back(synthetic("bpe-qwen2", fuzz::bpe_vocab("qwen2"), false, false));
    v.push_back(synthetic("spm-prefix", fuzz::spm_vocab(true), true, true));
    auto smol = real("smollm2-135m-instruct-q4_1.gguf");
    v.push_back(smol ? std::move(smol) : synthetic("bpe-smollm", fuzz::bpe_vocab("smollm"), false, false));
    auto qwen = real("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    v.push_back(qwen ? std::move(qwen) : synthetic("bpe-qwen2", fuzz::bpe_vocab("qwen2"), false, false));
    auto gemma = real("gemma3-270m-q4_k_m.gguf");
    v.push_back(gemma ? std::move(gemma) : synthetic("spm-noprefix", fuzz::spm_vocab(false), true, false));
    for (const auto& x : v) std::fprintf(stderr, "fuzz_tokenizer: vocabulary %s (%d tokens)\n", x->name.c_str(), x->tok->n_vocab());
    return v;
}

const std::vector<std::unique_ptr<Vocab>>& vocabs() {
    static const std::vector<std::unique_ptr<Vocab>> v = load_vocabs();
    return v;
}

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// the text for which byte-level BPE must give back exactly the input.
bool strict_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        size_t n = 0;
        uint32_t cp = 0;
        if (c < 0x80) { i += 1; continue; }
        if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
        else return false;
        if (i + n >= s.size()) return false;  // truncated sequence
        for (size_t k = 1; k <= n; ++k) {
            const uint8_t d = uint8_t(s[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        static const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n + 1;
    }
    return true;
}

void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), std::to_string(id));
}

void text_mode(uint8_t flags, std::string_view text) {
    const Vocab& v = *vocabs()[flags & 7];
    const Tokenizer& tok = *v.tok;
    const bool add_special = flags & 8, parse_special = flags & 16;
    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text, add_special, parse_special);
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "Tokenizer::encode");  // every vocabulary here has byte fallback
    }
    check_ids(tok, ids);
    if (add_special && tok.add_bos()) FUZZ_CHECK(!ids.empty() && ids.front() == tok.bos_id());
    if (add_special && tok.add_eos()) FUZZ_CHECK(!ids.empty() && ids.back() == tok.eos_id());
    const std::string back = tok.decode(ids);
    if (add_special || !v.synthetic) return;
    if (!v.spm) {
        if (strict_utf8(text)) FUZZ_CHECK(back == text, v.name);
    } else if (!parse_special && strict_utf8(text) && text.find("\xE2\x96\x81") == std::string_view::npos) {
        // SentencePiece with byte fallback gives valid text back, plus the
        // space prefix; a U+2581 in the text is indistinguishable from a space.
        // Not invalid UTF-8: a truncated sequence swallows the bytes of the
        // U+2581 that replaced a following space, and those come back through
        // byte tokens as they are (llama.cpp does the same).
        const std::string want = (v.space_prefix && !text.empty() ? " " : "") + std::string(text);
        FUZZ_CHECK(back == want, v.name);
    }
}

void vocab_mode(const uint8_t* data, size_t size) {
    FuzzedDataProvider p(data, size);
    static const char* const models[] = {"gpt2", "llama", "bert", ""};
    // Every pre-tokenizer family (pretokenizer_from_name), plus an unknown name.
    static const char* const pres[] = {"",          "default", "gpt2",         "smollm",         "qwen2",
                                       "starcoder", "llama3",  "llama-bpe",    "gpt-2",          "qwen35",
                                       "falcon",    "deepseek-llm", "deepseek-coder", "no-such-pre"};
    constexpr int n_pres = int(sizeof(pres) / sizeof(pres[0]));
    test::GgufWriter w;
    const char* model = models[p.ConsumeIntegralInRange<int>(0, 3) % 4];
    if (p.ConsumeIntegralInRange<int>(0, 7) != 0) w.kv_str("tokenizer.ggml.model", model);
    const size_t n = p.ConsumeIntegralInRange<size_t>(0, 48);
    std::vector<std::string> tokens;
    for (size_t i = 0; i < n; ++i) tokens.push_back(p.ConsumeRandomLengthString(12));
    if (p.ConsumeIntegralInRange<int>(0, 7) != 0) w.kv_str_array("tokenizer.ggml.tokens", tokens);
    if (p.ConsumeBool()) {
        std::vector<int32_t> types;
        const size_t nt = p.ConsumeBool() ? n : p.ConsumeIntegralInRange<size_t>(0, n + 1);
        for (size_t i = 0; i < nt; ++i) types.push_back(p.ConsumeIntegralInRange<int32_t>(-1, 7));
        w.kv_i32_array("tokenizer.ggml.token_type", types);
    }
    if (p.ConsumeBool()) {
        std::vector<float> scores;
        const size_t ns = p.ConsumeBool() ? n : p.ConsumeIntegralInRange<size_t>(0, n + 1);
        for (size_t i = 0; i < ns; ++i) scores.push_back(p.ConsumeFloatingPoint<float>());
        w.kv_f32_array("tokenizer.ggml.scores", scores);
    }
    if (p.ConsumeIntegralInRange<int>(0, 7) != 0) {
        std::vector<std::string> merges;
        const size_t nm = p.ConsumeIntegralInRange<size_t>(0, 32);
        for (size_t i = 0; i < nm; ++i) {
            if (n > 0 && p.ConsumeBool()) {
                // Mostly well-formed: "left right" of two tokens.
                merges.push_back(tokens[p.ConsumeIntegralInRange<size_t>(0, n - 1)] + " " +
                                 tokens[p.ConsumeIntegralInRange<size_t>(0, n - 1)]);
            } else {
                merges.push_back(p.ConsumeRandomLengthString(12));
            }
        }
        w.kv_str_array("tokenizer.ggml.merges", merges);
    }
    if (p.ConsumeBool()) w.kv_str("tokenizer.ggml.pre", pres[p.ConsumeIntegralInRange<int>(0, n_pres - 1)]);
    const char* const id_keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                   "tokenizer.ggml.eot_token_id", "tokenizer.ggml.fim_pad_token_id"};
    for (const char* k : id_keys) {
        if (p.ConsumeBool()) w.kv_i32(k, p.ConsumeIntegralInRange<int32_t>(-2, int32_t(n) + 2));
    }
    for (const char* k : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                          "tokenizer.ggml.add_space_prefix"}) {
        if (p.ConsumeBool()) w.kv_bool(k, p.ConsumeBool());
    }
    const bool add_special = p.ConsumeBool(), parse_special = p.ConsumeBool();
    const std::string text = p.ConsumeRemainingBytesAsString();

    const std::vector<uint8_t> bytes = w.bytes();
    std::unique_ptr<GgufFile> f;
    std::unique_ptr<Tokenizer> tok;
    try {
        f = GgufFile::parse(bytes.data(), bytes.size(), "vocab.gguf");
        tok = Tokenizer::from_gguf(*f);
    } catch (const Error&) {
        return;
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "Tokenizer::from_gguf");
    }
    FUZZ_CHECK(tok->n_vocab() == int32_t(n));
    FUZZ_CHECK(tok->bos_id() < tok->n_vocab() && tok->eos_id() < tok->n_vocab());
    for (int32_t id = 0; id < tok->n_vocab(); ++id) (void)tok->token_to_piece(id);
    std::vector<int32_t> ids;
    try {
        ids = tok->encode(text, add_special, parse_special);
    } catch (const Error&) {
        return;  // SentencePiece without a fallback token for some byte
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "Tokenizer::encode");
    }
    check_ids(*tok, ids);
    (void)tok->decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)vocabs();  // load once, before the first input is timed
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 0x80) {
        vocab_mode(data + 1, size - 1);
    } else {
        text_mode(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    }
    return 0;
}
