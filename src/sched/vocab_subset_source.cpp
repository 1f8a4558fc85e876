#include "sched/vocab_subset_source.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace specdec::sched {

std::unique_ptr<spec::VocabSubset> load_vocab_subset(int n, const std::string& path, const std::string& corpus_path,
                                                     const runtime::Engine& target) {
    if (n <= 0) return nullptr;
    const int tv = target.config().n_vocab;
    SPECDEC_CHECK(!path.empty(), "a vocabulary subset needs a cache file path");
    if (std::filesystem::exists(path)) {
        auto s = std::make_unique<spec::VocabSubset>(spec::VocabSubset::load(path, tv));
        SPECDEC_CHECK(s->size() == n, path, " holds ", s->size(), " tokens, asked for ", n, " (delete it to rebuild)");
        return s;
    }
    SPECDEC_CHECK(!corpus_path.empty(), "building a vocabulary subset needs a corpus file");
    std::ifstream in(corpus_path);
    SPECDEC_CHECK(in.good(), "cannot read corpus ", corpus_path);
    std::vector<std::vector<int32_t>> docs;
    std::string line;
    // Any JSON line: every string in it is text to count (prompt-set JSONL).
    std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& j) {
        if (j.is_string()) docs.push_back(target.tokenizer().encode(j.get<std::string>(), false, false));
        else if (j.is_array() || j.is_object())
            for (const auto& v : j) collect(v);
    };
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) docs.push_back(target.tokenizer().encode(line, false, false));
        else collect(j);
    }
    auto s = std::make_unique<spec::VocabSubset>(spec::VocabSubset::from_corpus(docs, tv, n));
    s->save(path);
    return s;
}

}  // namespace specdec::sched
