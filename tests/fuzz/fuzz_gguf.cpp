// libFuzzer target: the GGUF reader (io/gguf) on arbitrary bytes, followed by
// what loading a model does next with the metadata: every typed getter, the
// tokenizer built from the vocabulary, the chat template, and releasing the
// large arrays. The reader's contract (io/gguf.h): any truncated, corrupt or
// unsupported file throws specdec::Error and nothing is read outside the
// buffer. libFuzzer hands the input over in a heap block of exactly its size,
// so ASan sees any read past the end.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/tokenizer.h"

using namespace specdec;
using namespace specdec::io;

namespace {

void check_tensors(const GgufFile& f, const uint8_t* data, size_t size) {
    const uint8_t* data_section = nullptr;
    for (const GgufTensor& t : f.tensors()) {
        FUZZ_CHECK(!t.dims.empty() && t.dims.size() <= 4);
        FUZZ_CHECK(t.data >= data && t.data <= data + size);
        FUZZ_CHECK(t.n_bytes <= size_t(data + size - t.data), t.name);
        FUZZ_CHECK(t.offset % f.alignment() == 0);
        // All tensors share one data section: offsets are relative to it.
        if (!data_section) data_section = t.data - t.offset;
        FUZZ_CHECK(t.data - t.offset == data_section);
        FUZZ_CHECK(size_t(data_section - data) % f.alignment() == 0);
        // n_bytes is the size the kernels will read: recompute it without
        // wrap-around and compare, since a wrapped product would pass the
        // bounds check above with a tensor far larger than the file.
        size_t bytes = tensor_row_bytes(t.type, t.dims[0]);
        for (size_t d = 1; d < t.dims.size(); ++d) {
            FUZZ_CHECK(!__builtin_mul_overflow(bytes, size_t(t.dims[d]), &bytes), t.name + ": size overflows");
        }
        FUZZ_CHECK(bytes == t.n_bytes, t.name);
        FUZZ_CHECK(t.n_elements() > 0, t.name);  // a signed overflow here is UB (UBSan reports it)
        FUZZ_CHECK(f.find_tensor(t.name) == &t);
    }
}

void check_metadata(const GgufFile& f) {
    for (const auto& [key, v] : f.metadata()) {
        FUZZ_CHECK(f.has(key) && f.find(key) == &v);
        // Every getter either answers or throws Error: none may touch a wrong member.
        try { (void)f.get_string(key); } catch (const Error&) {}
        try { (void)f.get_int(key); } catch (const Error&) {}
        try { (void)f.get_float(key); } catch (const Error&) {}
        try { (void)f.get_bool(key); } catch (const Error&) {}
        try { (void)f.get_string_array(key); } catch (const Error&) {}
        try { (void)f.get_int_array(key); } catch (const Error&) {}
        try { (void)f.get_float_array(key); } catch (const Error&) {}
        if (v.type != GgufType::ARRAY) FUZZ_CHECK(v.array_size() == 0);
    }
}

void check_tokenizer(const GgufFile& f) {
    std::unique_ptr<Tokenizer> tok;
    try {
        tok = Tokenizer::from_gguf(f);
    } catch (const Error&) {
        return;  // most inputs have no usable vocabulary
    }
    const int32_t n = tok->n_vocab();
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(tok->bos_id() < n && tok->eos_id() < n);
    for (int32_t id = 0; id < n && id < 4096; ++id) {
        (void)tok->token_to_piece(id);
        (void)tok->token_text(id);
        (void)tok->attr(id);
    }
    static const char* const samples[] = {"Hello world don't I'LL 12345", " <|im_start|>user\n\t\xE4\xB8\xAD\xF0\x9F\x98\x80",
                                          "\xFF\xC3 x", ""};
    for (const char* s : samples) {
        for (int flags = 0; flags < 4; ++flags) {
            std::vector<int32_t> ids;
            try {
                ids = tok->encode(s, flags & 1, flags & 2);
            } catch (const Error&) {
                continue;  // e.g. SentencePiece without a byte-fallback token for a byte
            }
            for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n, std::to_string(id));
            (void)tok->decode(ids);
        }
    }
}

void check_chat(const GgufFile& f) {
    try {
        jinja::Limits limits;
        limits.max_output = 1 << 20;
        limits.max_steps = 200000;
        const ChatTemplate t(model_chat_template(f), limits);
        ChatRenderInputs in;
        in.messages = messages_value({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}});
        (void)t.render(in);
    } catch (const Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<GgufFile> f;
    try {
        f = GgufFile::parse(data, size, "fuzz.gguf");
    } catch (const Error& e) {
        FUZZ_CHECK(std::string(e.what()).find("fuzz.gguf") != std::string::npos, e.what());
        return 0;
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "GgufFile::parse");
    }
    try {
        FUZZ_CHECK(f->version() == 2 || f->version() == 3);
        FUZZ_CHECK(f->file_size() == size);
        check_tensors(*f, data, size);
        check_metadata(*f);
        check_tokenizer(*f);
        check_chat(*f);
        // What the engine does after loading: arrays are freed and must then
        // fail loudly instead of reading as empty.
        std::vector<std::string> arrays;
        for (const auto& [key, v] : f->metadata()) {
            if (v.array_size() >= 1) arrays.push_back(key);
        }
        f->release_large_arrays(1);
        for (const std::string& key : arrays) {
            bool threw = false;
            try {
                (void)f->get_string_array(key);
            } catch (const Error&) {
                threw = true;
            }
            FUZZ_CHECK(threw, key);
        }
    } catch (const std::exception& e) {
        fuzz::unexpected_exception(e, "GGUF consumers");
    }
    return 0;
}
