// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/):
//   build/fuzz/fuzz_make_seeds tests/fuzz/corpus [TEMPLATES_DIR]
// The committed corpus is this program's output; rerun it only to change the
// seeds. Realistic inputs make the fuzzers start deep in the code instead of
// at the JSON or GGUF syntax: real request bodies with every field and the
// specdec extension, real chat templates (llama.cpp's models/templates and the
// models' own), GGUF files shaped like real models (their metadata with the
// big arrays cut short and tiny tensors of the real types), and text in the
// languages and code the tokenizer tests use.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor_type.h"
#include "fuzz/fuzz_vocab.h"
#include "io/gguf.h"
#include "unit/gguf_writer.h"

namespace fs = std::filesystem;
using namespace specdec;
using specdec::test::GgufWriter;
using specdec::test::sample_writer;

namespace {

fs::path g_out;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = g_out / target;
    fs::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary) << bytes;
}
void write(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
    write(target, name, std::string(bytes.begin(), bytes.end()));
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// --- parse_request: byte 0 is '0' + (endpoint | server config << 1) -------------
void request_seeds() {
    const std::vector<std::pair<std::string, std::string>> bodies = {
        {"chat_full",
         R"(0{"model":"smol","messages":[{"role":"system","content":"You are a helpful assistant."},)"
         R"({"role":"user","content":"Write a haiku about autumn."}],"max_tokens":64,"temperature":0.7,)"
         R"("top_p":0.95,"top_k":40,"min_p":0.05,"seed":1234,"stop":["\n\n","<|im_end|>"],"stream":true,)"
         R"("stream_options":{"include_usage":true},"n":1,"frequency_penalty":0,"presence_penalty":0,)"
         R"("logprobs":false,"logit_bias":{},"tools":[],"response_format":{"type":"text"},"user":"u-42"})"},
        {"chat_parts",
         R"(0{"model":"smol.gguf","messages":[{"role":"developer","content":[{"type":"text","text":"Be terse."}]},)"
         R"({"role":"user","content":[{"type":"text","text":"What is 2+2?"},{"type":"text","text":" One digit."}]},)"
         R"({"role":"assistant","content":"4"},{"role":"tool","content":null},{"role":"user","content":"Thanks"}],)"
         R"("max_completion_tokens":16,"temperature":null,"seed":-1})"},
        {"chat_spec_tree",
         R"(4{"model":"qwen2.5-coder-0.5b-instruct-q4_k_m","messages":[{"role":"user","content":"def fib(n):"}],)"
         R"("temperature":0,"max_tokens":128,"specdec":{"method":"tree","draft_k":8}})"},
        {"chat_spec_ngram", R"(2{"messages":[{"role":"user","content":"Hello"}],"specdec":{"method":"ngram"},"max_tokens":4.0})"},
        {"chat_spec_chain_nodraft",
         R"(2{"messages":[{"role":"user","content":"Hello"}],"temperature":0.8,"specdec":{"method":"chain","draft_k":4}})"},
        {"completion_full",
         R"(1{"model":"smol","prompt":"Once upon a time","max_tokens":32,"temperature":1.0,"top_p":0.9,"stop":"\n",)"
         R"("echo":false,"best_of":1,"stream":false,"seed":7})"},
        {"completion_list_ssd",
         R"(5{"prompt":["def quicksort(arr):\n"],"temperature":0,"specdec":{"method":"ssd","draft_k":4},)"
         R"("seed":9223372036854775807,"stream":true,"stream_options":{"include_usage":false}})"},
        {"chat_rejected",
         R"(0{"messages":[{"role":"user","content":"hi"}],"n":2,"logprobs":true,"specdec":{"method":"chain","x":1}})"},
        {"chat_unicode",
         R"(0{"messages":[{"role":"user","content":"\u00e9\u4e2d\ud83d\ude00 unicode"}],"temperature":2,"top_p":1,)"
         R"("min_p":1,"top_k":1048576,"presence_penalty":0.0})"},
        {"chat_empty_model", R"(6{"model":"a","messages":[],"stream":true})"},
        {"completion_tokens", R"(1{"prompt":[[1,2,3]],"max_tokens":0})"},
    };
    for (const auto& [name, body] : bodies) write("parse_request", name + ".json", body);
}

// --- chat_template: flags byte, template, then NUL-separated messages -------------
std::string conversation(bool tools) {
    std::string m;
    m += std::string(1, '\0') + "sYou are a helpful assistant.";
    m += std::string(1, '\0') + "uHi there";
    m += std::string(1, '\0') + "aHello! How can I help?";
    if (tools) {
        m += std::string(1, '\0') + "t{\"temperature\": 21}";
        m += std::string(1, '\0') + "t{\"humidity\": 0.4}";
    }
    m += std::string(1, '\0') + "u  What is 2+2?\n ";
    return m;
}

void template_seeds(const fs::path& templates_dir, const std::vector<std::pair<std::string, std::string>>& gguf_templates) {
    // token bits (1-2): which bos/eos texts the template gets
    const std::vector<std::pair<std::string, char>> files = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", char(1 | (2 << 1))}, {"google-gemma-2-2b-it.jinja", char(1 | (1 << 1))},
        {"microsoft-Phi-3.5-mini-instruct.jinja", char(1 | (3 << 1))}, {"HuggingFaceTB-SmolLM3-3B.jinja", char(1)},
        {"LFM2-8B-A1B.jinja", char(0)}, {"Qwen-Qwen3-0.6B.jinja", char(1 | (2 << 1))},
    };
    for (const auto& [file, flags] : files) {
        const fs::path p = templates_dir / file;
        if (!fs::exists(p)) {
            std::fprintf(stderr, "no %s: skipped\n", p.c_str());
            continue;
        }
        const std::string t = read_file(p);
        write("chat_template", fs::path(file).stem().string(),
              std::string(1, flags) + t + conversation(t.find("tool_response") != std::string::npos));
    }
    for (const auto& [name, t] : gguf_templates) {
        write("chat_template", "gguf-" + name, std::string(1, char(1)) + t + conversation(false));
    }
    write("chat_template", "gemma_empty_template", std::string(1, char(1 | (1 << 1))) + conversation(false));
    write("chat_template", "custom_roles",
          std::string(1, char(1)) + "<|im_start|>system\nDefault prompt.<|im_end|>" + std::string(1, '\0') +
              "?function\x01{}" + std::string(1, '\0') + "uhey");
}

// --- gguf ------------------------------------------------------------------------
// A model-shaped file: llama metadata and one small tensor of each common type.
std::vector<uint8_t> tiny_model() {
    GgufWriter w(3, 64);
    w.kv_str("general.architecture", "qwen2");
    w.kv_str("general.name", "tiny");
    w.kv_u32("general.alignment", 64);
    w.kv_u32("qwen2.block_count", 1);
    w.kv_u32("qwen2.context_length", 256);
    w.kv_u32("qwen2.embedding_length", 256);
    w.kv_u32("qwen2.feed_forward_length", 512);
    w.kv_u32("qwen2.attention.head_count", 4);
    w.kv_u32("qwen2.attention.head_count_kv", 2);
    w.kv_f32("qwen2.rope.freq_base", 1000000.0f);
    w.kv_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    const std::vector<std::pair<std::string, uint32_t>> ts = {
        {"token_embd.weight", 12}, {"blk.0.attn_q.weight", 2}, {"blk.0.attn_k.weight", 8},
        {"blk.0.ffn_down.weight", 14}, {"blk.0.attn_norm.weight", 0}, {"output.weight", 1}, {"blk.0.ffn_up.weight", 30}};
    for (const auto& [name, type] : ts) {
        const std::vector<int64_t> dims = type == 0 ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 2};
        size_t n = tensor_row_bytes(TensorType(type), 256) * (dims.size() > 1 ? 2 : 1);
        w.tensor(name, type, dims, std::vector<uint8_t>(n, 0x11));
    }
    return w.bytes();
}

// Every metadata type, incl. those GgufWriter has no call for (8/16-bit and
// 64-bit signed scalars, bool and u8 arrays, an array of arrays), by hand.
std::vector<uint8_t> all_types() {
    std::vector<uint8_t> kv;
    auto pod = [&](auto v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        kv.insert(kv.end(), p, p + sizeof(v));
    };
    auto str = [&](const std::string& s) {
        pod(uint64_t(s.size()));
        kv.insert(kv.end(), s.begin(), s.end());
    };
    uint64_t n_kv = 0;
    auto key = [&](const std::string& k, uint32_t type) {
        str(k);
        pod(type);
        ++n_kv;
    };
    key("u8", 0); pod(uint8_t(200));
    key("i8", 1); pod(int8_t(-100));
    key("u16", 2); pod(uint16_t(60000));
    key("i16", 3); pod(int16_t(-30000));
    key("i64", 11); pod(int64_t(-5));
    key("b", 7); pod(uint8_t(1));
    key("u8s", 9); pod(uint32_t(0)); pod(uint64_t(3)); pod(uint8_t(1)); pod(uint8_t(2)); pod(uint8_t(3));
    key("bools", 9); pod(uint32_t(7)); pod(uint64_t(2)); pod(uint8_t(0)); pod(uint8_t(1));
    key("f64s", 9); pod(uint32_t(12)); pod(uint64_t(1)); pod(2.5);
    key("nested", 9); pod(uint32_t(9)); pod(uint64_t(2));
    pod(uint32_t(4)); pod(uint64_t(1)); pod(uint32_t(42));  // [u32 42]
    pod(uint32_t(8)); pod(uint64_t(1)); str("x");         // ["x"]
    std::vector<uint8_t> out;
    auto put = [&](auto v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        out.insert(out.end(), p, p + sizeof(v));
    };
    put(uint32_t(0x46554747));
    put(uint32_t(3));
    put(uint64_t(0));
    put(n_kv);
    out.insert(out.end(), kv.begin(), kv.end());
    return out;
}

// A real model's header, shrunk: all scalar and string metadata (architecture,
// hyper-parameters, chat template), arrays cut to their first `keep` entries,
// and its first tensors with their real names and types but tiny shapes.
std::vector<uint8_t> shrunk_header(const io::GgufFile& f, size_t keep) {
    using io::GgufType;
    GgufWriter w(f.version(), f.alignment());
    for (const auto& [k, v] : f.metadata()) {
        switch (v.type) {
            case GgufType::STRING: w.kv_str(k, v.s); break;
            case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: w.kv_u32(k, uint32_t(v.u)); break;
            case GgufType::INT8: case GgufType::INT16: case GgufType::INT32: w.kv_i32(k, int32_t(v.i)); break;
            case GgufType::UINT64: case GgufType::INT64: w.kv_u64(k, v.u); break;
            case GgufType::FLOAT32: w.kv_f32(k, float(v.f)); break;
            case GgufType::FLOAT64: w.kv_f64(k, v.f); break;
            case GgufType::BOOL: w.kv_bool(k, v.i != 0); break;
            case GgufType::ARRAY:
                if (v.elem_type == GgufType::STRING) {
                    w.kv_str_array(k, std::vector<std::string>(v.strings.begin(),
                                                               v.strings.begin() + std::min(keep, v.strings.size())));
                } else if (!v.floats.empty()) {
                    std::vector<float> x;
                    for (size_t i = 0; i < std::min(keep, v.floats.size()); ++i) x.push_back(float(v.floats[i]));
                    w.kv_f32_array(k, x);
                } else if (!v.ints.empty()) {
                    std::vector<int32_t> x;
                    for (size_t i = 0; i < std::min(keep, v.ints.size()); ++i) x.push_back(int32_t(v.ints[i]));
                    w.kv_i32_array(k, x);
                }
                break;
        }
    }
    size_t n = 0;
    for (const auto& t : f.tensors()) {
        if (n++ == 6) break;
        const int64_t row = tensor_type_traits(t.type).block_elems;
        const std::vector<int64_t> dims = t.dims.size() == 1 ? std::vector<int64_t>{row} : std::vector<int64_t>{row, 2};
        const size_t bytes = tensor_row_bytes(t.type, row) * (dims.size() > 1 ? 2 : 1);
        w.tensor(t.name, uint32_t(t.type), dims, std::vector<uint8_t>(bytes, 0x3c));
    }
    return w.bytes();
}

// --- tokenizer: byte 0 = vocabulary slot | add_special 8 | parse_special 16 ------
void tokenizer_seeds() {
    const std::vector<std::pair<std::string, std::string>> texts = {
        {"mixed", "Hello world don't I'LL 12345 <|im_start|> <start_of_turn>"},
        {"code", "def f(x):\n\treturn x ** 2  # ok\n\n    print(f(3))\r\n"},
        {"unicode", "\xE4\xB8\xAD\xE6\x96\x87 \xC3\xA9moji \xF0\x9F\x98\x80 \xE2\x80\x94 ok"},
        {"chat", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<tool_call>{}</tool_call><|endoftext|>"},
        {"invalid", "a\xFF\xC3(b\xE2\x82 \xF0\x9F\x98 \xC0\x80 \xED\xA0\x80 x"},
        {"spaces", "   \n\n\t \xE3\x80\x80 \xE2\x96\x81 end  "},
        {"numbers", "3.14159 1,000,000 0x1F 42nd 1234567890"},
    };
    const std::vector<std::pair<std::string, uint8_t>> modes = {
        {"bpe_default", 0}, {"bpe_gpt2", 1}, {"bpe_smollm", 2}, {"bpe_qwen2", 3}, {"spm", 4},
        {"real_smollm", 5}, {"real_qwen", 6 | 16}, {"real_gemma", 7 | 8}};
    for (const auto& [mname, flags] : modes) {
        for (const auto& [tname, text] : texts) write("tokenizer", mname + "-" + tname, std::string(1, char(flags)) + text);
    }
    // Vocabulary mode: FuzzedDataProvider reads numbers from the end and
    // strings from the front (a backslash and the byte after it end a string,
    // two backslashes are one), so tokens separated by backslash-bar and a few
    // tail bytes are a fine start.
    const std::vector<std::string> vocab_inputs = {
        std::string("a\\|b\\|ab\\|<0x41>\\|x\\\\y\\|") + "Hello ab" + std::string("\x01\x02\x03\x04\x05\x06\x07\x10\x20\x30", 10),
        std::string("<s>\\|</s>\\|<0x0A>\\|\xE2\x96\x81\\|h\\|e\\|") + "he he" + std::string("\x11\x01\x21\x07\x09\x02\x30\x40", 8),
    };
    for (size_t i = 0; i < vocab_inputs.size(); ++i)
        write("tokenizer", "vocab-" + std::to_string(i), std::string(1, char(0x80)) + vocab_inputs[i]);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR [TEMPLATES_DIR [MODELS_DIR]]\n", argv[0]);
        return 2;
    }
    g_out = argv[1];
    const fs::path templates = argc > 2 ? argv[2] : "build/llamacpp/src/vendor/llama.cpp/models/templates";
    const fs::path models = argc > 3 ? argv[3] : "models";

    request_seeds();
    tokenizer_seeds();

    write("gguf", "sample_v3", sample_writer(3).bytes());
    write("gguf", "sample_v2", sample_writer(2).bytes());
    write("gguf", "tiny_model", tiny_model());
    write("gguf", "all_types", all_types());
    auto bpe = fuzz::bpe_vocab("qwen2");
    bpe.kv_str("general.architecture", "qwen2");
    bpe.kv_str("tokenizer.chat_template",
               "{%- for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
               "'<|im_end|>' + '\\n'}}{%- endfor %}<tool_response>");
    write("gguf", "vocab_bpe", bpe.bytes());
    auto spm = fuzz::spm_vocab(false);
    spm.kv_str("general.architecture", "gemma3");
    write("gguf", "vocab_spm", spm.bytes());

    std::vector<std::pair<std::string, std::string>> gguf_templates;
    for (const char* name : {"smollm2-135m-instruct-q4_1", "qwen2.5-coder-0.5b-instruct-q4_k_m", "gemma3-270m-q4_k_m"}) {
        const fs::path p = models / (std::string(name) + ".gguf");
        if (!fs::exists(p)) {
            std::fprintf(stderr, "no %s: skipped\n", p.c_str());
            continue;
        }
        const auto f = io::GgufFile::open(p.string());
        write("gguf", std::string("real-") + name, shrunk_header(*f, 300));
        if (f->has("tokenizer.chat_template")) gguf_templates.emplace_back(name, f->get_string("tokenizer.chat_template"));
    }
    template_seeds(templates, gguf_templates);
    return 0;
}
