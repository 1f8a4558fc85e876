// specdec dev: developer tools that expose internals to the parity tests
// against llama.cpp/ggml (tests/python/test_tokenizer_parity.py and
// test_kernel_parity_ggml.py). Not part of the user-facing interface.
//
// Kernel dumper for the bit-level parity test against ggml
// (tests/python/test_kernel_parity_ggml.py). `specdec dev kernel-dump IN OUT`.
//
// Input (little endian): "KDMP", int32 weight type, int64 n_in, int64 n_rows,
// int64 n_tok, uint64 row_bytes, then n_rows weight rows of row_bytes bytes,
// then n_tok activation rows of n_in floats.
// Output: int32 n_levels, uint64 act_row_bytes, the n_tok activation rows
// quantized to the weight's dot type (quantize_act_row, act_row_bytes each),
// then for each ISA level 0 (scalar) .. n_levels-1 the product y (n_tok, n_rows)
// of matmul at that level on a 1-thread pool, then the n_rows weight rows
// dequantized (dequantize_row, n_in floats each).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quantize_act.h"

namespace specdec::cli {
namespace {

using namespace specdec::kernels;
using io::ChatMessage;
using io::GgufFile;
using io::Tokenizer;

template <class T>
T read_pod(std::ifstream& in) {
    T v{};
    in.read(reinterpret_cast<char*>(&v), sizeof(T));
    return v;
}

template <class T>
void write_pod(std::ofstream& out, const T& v) {
    out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

int kernel_dump(const std::string& in_path, const std::string& out_path) {
    std::ifstream in(in_path, std::ios::binary);
    SPECDEC_CHECK(in.good(), "cannot read ", in_path);
    char magic[4];
    in.read(magic, 4);
    SPECDEC_CHECK(std::memcmp(magic, "KDMP", 4) == 0, "bad kernel dump magic");
    const auto type = (TensorType)read_pod<int32_t>(in);
    const auto n_in = read_pod<int64_t>(in);
    const auto n_rows = read_pod<int64_t>(in);
    const auto n_tok = read_pod<int64_t>(in);
    const auto row_bytes = read_pod<uint64_t>(in);
    SPECDEC_CHECK(is_supported_weight_type(type), "unsupported weight type");
    std::vector<uint8_t> w(row_bytes * (size_t)n_rows);
    in.read(reinterpret_cast<char*>(w.data()), (std::streamsize)w.size());
    std::vector<float> x((size_t)(n_tok * n_in));
    in.read(reinterpret_cast<char*>(x.data()), (std::streamsize)(x.size() * sizeof(float)));
    SPECDEC_CHECK(in.good(), "short kernel dump input");

    std::ofstream out(out_path, std::ios::binary);
    const int32_t n_levels = (int32_t)cpu_max_isa() + 1;
    const uint64_t arb = act_row_bytes(type, n_in);
    write_pod(out, n_levels);
    write_pod(out, arb);
    std::vector<uint8_t> act(arb);
    for (int64_t t = 0; t < n_tok; ++t) {
        quantize_act_row(type, x.data() + t * n_in, act.data(), n_in);
        out.write(reinterpret_cast<const char*>(act.data()), (std::streamsize)arb);
    }
    const WeightMatrix wm{type, w.data(), n_in, n_rows, (size_t)row_bytes};
    ThreadPool pool(1);
    const Isa saved = active_isa();
    const bool was_forced = isa_forced();
    std::vector<float> y((size_t)(n_tok * n_rows));
    for (int level = 0; level < n_levels; ++level) {
        force_isa((Isa)level);
        matmul(wm, x.data(), n_tok, y.data(), pool);
        out.write(reinterpret_cast<const char*>(y.data()), (std::streamsize)(y.size() * sizeof(float)));
    }
    if (was_forced) force_isa(saved);
    else unforce_isa();
    std::vector<float> deq((size_t)n_in);
    for (int64_t r = 0; r < n_rows; ++r) {
        dequantize_row(type, w.data() + (size_t)r * row_bytes, deq.data(), n_in);
        out.write(reinterpret_cast<const char*>(deq.data()), (std::streamsize)(deq.size() * sizeof(float)));
    }
    SPECDEC_CHECK(out.good(), "cannot write ", out_path);
    return 0;
}


// Tokenizer dump, driven by tests/python/test_tokenizer_parity.py. Input JSON:
// {"model": path, "items": [{"text" or "hex", "add_special", "parse_special"}],
//  "chats": [{"messages": [{"role","content"}], "add_generation_prompt"}], "pieces": bool}
// Output: {"ids": [[...]], "pieces": [hex...], "eog": [...], "chat": [...], "n_vocab": n}
// Each chat is the engine's prompt text (Engine::chat_prompt), null when the
// template raises.
int tokenize_dump(const std::string& in_path, const std::string& out_path) {
    std::ifstream in(in_path);
    const nlohmann::json req = nlohmann::json::parse(in);
    auto file = GgufFile::open(req.at("model").get<std::string>());
    auto tok = Tokenizer::from_gguf(*file);
    nlohmann::json res;
    res["n_vocab"] = tok->n_vocab();
    res["ids"] = nlohmann::json::array();
    for (const auto& item : req.value("items", nlohmann::json::array())) {
        std::string text = item.value("text", std::string());
        if (item.contains("hex")) {  // raw bytes, e.g. invalid UTF-8
            const std::string h = item.at("hex").get<std::string>();
            text.clear();
            for (size_t i = 0; i + 1 < h.size(); i += 2) text.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
        }
        res["ids"].push_back(tok->encode(text, item.at("add_special").get<bool>(),
                                         item.at("parse_special").get<bool>()));
    }
    if (req.value("pieces", false)) {
        static const char* hex = "0123456789abcdef";
        auto& arr = res["pieces"] = nlohmann::json::array();
        std::vector<int32_t> eog;
        for (int32_t id = 0; id < tok->n_vocab(); ++id) {
            std::string h;
            for (unsigned char c : tok->token_to_piece(id)) {
                h.push_back(hex[c >> 4]);
                h.push_back(hex[c & 15]);
            }
            arr.push_back(h);
            if (tok->is_end_of_generation(id)) eog.push_back(id);
        }
        res["eog"] = eog;
    }
    res["chat"] = nlohmann::json::array();
    const io::ChatTemplate tmpl(io::model_chat_template(*file));
    for (const auto& chat : req.value("chats", nlohmann::json::array())) {
        std::vector<ChatMessage> msgs;
        for (const auto& m : chat.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
        try {
            res["chat"].push_back(io::apply_chat_template(tmpl, *tok, msgs, chat.at("add_generation_prompt").get<bool>()));
        } catch (const specdec::Error& e) {
            res["chat"].push_back(nullptr);
        }
    }
    std::ofstream(out_path) << res.dump();
    return 0;
}

}  // namespace

int cmd_dev(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: specdec dev kernel-dump|tokenize-dump|render-template|eagle3-dump|features IN OUT\n");
        return 1;
    }
    const std::string tool = argv[1];
    if (tool == "kernel-dump") return kernel_dump(argv[2], argv[3]);
    if (tool == "tokenize-dump") return tokenize_dump(argv[2], argv[3]);
    if (tool == "render-template") return render_template(argv[2], argv[3]);
    if (tool == "eagle3-dump") return eagle3_dump(argv[2], argv[3]);
    if (tool == "features") return dump_features(argv[2], argv[3]);
    throw Error("unknown dev tool '" + tool + "'");
}

}  // namespace specdec::cli
