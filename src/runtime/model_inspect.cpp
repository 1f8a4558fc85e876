#include "runtime/model_inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "core/error.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "model/transformer.h"
#include "runtime/engine.h"

namespace specdec::runtime {
namespace {

using nlohmann::json;

// An integer hyper-parameter: a number, a per-layer array, or null when the
// file does not give it (or gives something else under the name).
json int_param(const io::GgufFile& f, const std::string& key) {
    const io::GgufValue* v = f.find(key);
    if (!v) return nullptr;
    if (v->type == io::GgufType::ARRAY) return v->ints.empty() ? json(nullptr) : json(v->ints);
    try {
        return f.get_int(key);
    } catch (const Error&) {
        return nullptr;
    }
}

std::string metadata_string(const io::GgufFile& f, const std::string& key) {
    try {
        return f.get_string(key, "");
    } catch (const Error&) {
        return "";
    }
}

json chat_template_info(const io::GgufFile& f) {
    const std::string text = metadata_string(f, "tokenizer.chat_template");
    json j;
    j["present"] = !text.empty();
    j["bytes"] = text.size();
    // What `generate --chat` and `serve` render (io/chat_template.h): the
    // file's template through the Jinja interpreter, or the default one.
    try {
        io::ChatTemplate t(io::model_chat_template(f));
        j["parses"] = true;
    } catch (const Error& e) {
        j["parses"] = false;
        j["error"] = e.what();
    }
    return j;
}

// The loaders' own checks, in the order Engine::load runs them; each failing
// step's message is a problem. The engine step adds the checks across parts
// (tokenizer against output layer, context size).
json runnable_check(const io::GgufFile& f) {
    json problems = json::array();
    auto attempt = [&](auto&& fn) {
        try {
            fn();
        } catch (const Error& e) {
            problems.push_back(e.what());
        }
    };
    attempt([&] { model::Transformer m(f); });
    attempt([&] { io::Tokenizer::from_gguf(f); });
    if (problems.empty()) {
        attempt([&] {
            EngineOptions o;
            o.model_path = f.path();
            o.n_ctx = 16;  // the smallest cache the engine takes: nothing is run
            o.n_threads = 1;
            Engine::load(o);
        });
    }
    return problems;
}

std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
    return buf;
}

std::string human_count(double n) {
    char buf[32];
    if (n >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
    } else if (n >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.1f M", n / 1e6);
    } else if (n >= 1e3) {
        std::snprintf(buf, sizeof buf, "%.1f K", n / 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f", n);
    }
    return buf;
}

std::string show_param(const json& v) {
    if (v.is_null()) return "?";
    if (v.is_array()) {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        return *lo == *hi ? lo->dump() : lo->dump() + "-" + hi->dump() + " (per layer)";
    }
    return v.dump();
}

}  // namespace

json inspect_model(const std::string& path) {
    auto f = io::GgufFile::open(path);
    json r;
    r["file"] = path;
    r["file_bytes"] = f->file_size();
    r["gguf_version"] = f->version();
    const std::string arch = metadata_string(*f, "general.architecture");
    r["architecture"] = arch;
    r["name"] = metadata_string(*f, "general.name");

    json shape;
    for (const char* k : {"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                          "attention.head_count_kv", "attention.key_length", "context_length",
                          "attention.sliding_window", "expert_count", "expert_used_count"})
        shape[k] = int_param(*f, arch + "." + k);
    r["hyperparameters"] = shape;

    int64_t n_params = 0;
    std::map<std::string, std::pair<int64_t, uint64_t>> by_type;  // name -> (tensors, bytes)
    for (const io::GgufTensor& t : f->tensors()) {
        n_params += t.n_elements();
        auto& e = by_type[std::string(tensor_type_name(t.type))];
        ++e.first;
        e.second += t.n_bytes;
    }
    r["parameters"] = n_params;
    r["n_tensors"] = f->tensors().size();
    json types = json::array();
    for (const auto& [name, e] : by_type) types.push_back({{"type", name}, {"tensors", e.first}, {"bytes", e.second}});
    std::sort(types.begin(), types.end(), [](const json& a, const json& b) { return a["bytes"] > b["bytes"]; });
    r["tensor_types"] = types;

    json tok;
    tok["model"] = metadata_string(*f, "tokenizer.ggml.model");
    tok["pre"] = metadata_string(*f, "tokenizer.ggml.pre");
    const io::GgufValue* tokens = f->find("tokenizer.ggml.tokens");
    tok["n_tokens"] = tokens ? tokens->array_size() : 0;
    r["tokenizer"] = tok;
    r["chat_template"] = chat_template_info(*f);

    const json problems = runnable_check(*f);
    r["runnable"] = problems.empty();
    r["problems"] = problems;
    return r;
}

std::string format_inspection(const json& r) {
    std::string out;
    auto line = [&](const std::string& key, const std::string& value) {
        out += key + std::string(key.size() < 14 ? 14 - key.size() : 1, ' ') + value + "\n";
    };
    line("file", r["file"].get<std::string>() + " (" + human_bytes(r["file_bytes"].get<double>()) + ", GGUF v" +
                     r["gguf_version"].dump() + ")");
    if (!r["name"].get<std::string>().empty()) line("name", r["name"].get<std::string>());
    line("architecture", r["architecture"].get<std::string>().empty() ? "(none given)"
                                                                      : r["architecture"].get<std::string>());
    line("parameters", human_count(r["parameters"].get<double>()) + " in " + r["n_tensors"].dump() + " tensors");
    const json& h = r["hyperparameters"];
    std::string shape = "layers " + show_param(h["block_count"]) + ", embedding " + show_param(h["embedding_length"]) +
                        ", feed-forward " + show_param(h["feed_forward_length"]) + ", heads " +
                        show_param(h["attention.head_count"]) + " (KV " + show_param(h["attention.head_count_kv"]) +
                        ")";
    if (!h["attention.key_length"].is_null()) shape += ", head size " + show_param(h["attention.key_length"]);
    shape += ", context " + show_param(h["context_length"]);
    if (!h["attention.sliding_window"].is_null()) shape += ", sliding window " + show_param(h["attention.sliding_window"]);
    if (!h["expert_count"].is_null())
        shape += ", experts " + show_param(h["expert_count"]) + " (" + show_param(h["expert_used_count"]) + " used)";
    line("shape", shape);
    std::string types;
    for (const json& t : r["tensor_types"])
        types += (types.empty() ? "" : ", ") + t["type"].get<std::string>() + " x" + t["tensors"].dump() + " (" +
                 human_bytes(t["bytes"].get<double>()) + ")";
    line("tensor types", types);
    const json& tok = r["tokenizer"];
    std::string tk = tok["model"].get<std::string>().empty() ? "(none)" : tok["model"].get<std::string>();
    if (!tok["pre"].get<std::string>().empty()) tk += ", pre-tokenizer " + tok["pre"].get<std::string>();
    line("tokenizer", tk + ", " + tok["n_tokens"].dump() + " tokens");
    const json& ct = r["chat_template"];
    std::string tmpl = ct["present"].get<bool>() ? "yes (" + ct["bytes"].dump() + " bytes)" : "none (a default is used)";
    tmpl += ct["parses"].get<bool>() ? "" : ", not supported: " + ct["error"].get<std::string>();
    line("chat template", tmpl);
    if (r["runnable"].get<bool>()) {
        line("runs", "yes");
    } else {
        line("runs", "no");
        for (const json& p : r["problems"]) line("", p.get<std::string>());
    }
    return out;
}

}  // namespace specdec::runtime
