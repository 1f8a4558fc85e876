#include "io/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace specdec::io {
namespace {

// GGUF token types (llama_token_type) to attribute bits.
uint32_t attr_from_type(int64_t type) {
    switch (type) {
        case 1: return Tokenizer::kNormal;
        case 2: return Tokenizer::kUnknown;
        case 3: return Tokenizer::kControl;
        case 4: return Tokenizer::kUserDefined;
        case 5: return Tokenizer::kUnused;
        case 6: return Tokenizer::kByte;
        default: return 0;  // undefined
    }
}

// DeepSeek's "<｜end▁of▁sentence｜>" (fullwidth bars, U+2581 for spaces).
constexpr const char* kDeepseekEndOfSentence =
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>";

// A special-token role (EOT, FIM pad, ...) that llama.cpp fills from the
// token texts when the metadata gives no id.
struct TextRole {
    int32_t* id;
    std::initializer_list<const char*> names;
    // False when whichever token is picked changes nothing (every end-of-turn
    // text is on the end-of-generation list, which makes it control anyway).
    bool pick_matters = true;
};

// llama.cpp walks its text -> id std::unordered_map<std::string, llama_token>
// and gives each role still without an id the first token, in the map's
// iteration order, whose text is one of the role's names; that token becomes
// a control token. With one name present the order cannot matter. With
// several it does (only the picked FIM pad/repo token is end of generation),
// and the same container, filled the same way (ids ascending, no reserve)
// under the same standard library, iterates in the same order:
// std::hash<std::string_view> hashes exactly as std::hash<std::string>.
// It is built only then, as it costs ~50 bytes a token (8 MiB for Qwen 2.5).
void pick_by_text(const TokenIndex& ids, std::vector<uint32_t>& attrs, std::initializer_list<TextRole> roles) {
    std::vector<std::pair<int32_t*, std::vector<int32_t>>> open;  // a role, its tokens present
    bool ambiguous = false;
    for (const TextRole& role : roles) {
        if (*role.id >= 0) continue;
        std::vector<int32_t> found;
        for (const char* name : role.names) {
            const auto it = ids.find(name);
            if (it != ids.end()) found.push_back(it->second);
        }
        if (found.empty()) continue;
        ambiguous |= role.pick_matters && found.size() > 1;
        open.emplace_back(role.id, std::move(found));
    }
    if (ambiguous) {
        std::unordered_map<std::string_view, int32_t> map;
        for (size_t i = 0; i < ids.size(); ++i) map[ids.text(int32_t(i))] = int32_t(i);
        for (const auto& entry : map) {
            for (auto& [role, found] : open) {
                if (*role < 0 && std::find(found.begin(), found.end(), entry.second) != found.end()) {
                    *role = entry.second;
                }
            }
        }
    } else {
        for (auto& [role, found] : open) *role = found[0];
    }
    for (auto& [role, found] : open) attrs[size_t(*role)] |= Tokenizer::kControl;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    const std::string model = file.get_string("tokenizer.ggml.model", "");
    if (model == "gpt2" || model == "gemma4") {
        t->kind_ = Kind::Bpe;
    } else if (model == "llama") {
        t->kind_ = Kind::Spm;
    } else if (model == "bert") {
        t->kind_ = Kind::Wpm;
    } else {
        throw Error("tokenizer: unsupported tokenizer.ggml.model '" + model + "' in " + file.path());
    }
    SPECDEC_CHECK(file.has("tokenizer.ggml.tokens"), "tokenizer: no tokenizer.ggml.tokens in ", file.path());
    const auto& tokens = file.get_string_array("tokenizer.ggml.tokens");
    const size_t n = tokens.size();
    SPECDEC_CHECK(n > 0 && n < size_t(INT32_MAX), "tokenizer: bad vocabulary size ", n, " in ", file.path());

    uint64_t h = 1469598103934665603ull;
    for (const std::string& s : tokens) {
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0u) * 1099511628211ull;
    }
    t->hash_ = h;

    t->attrs_.assign(n, kNormal);
    t->scores_.assign(n, 0.0f);
    t->ids_.reserve(n);
    if (file.has("tokenizer.ggml.scores")) {
        const auto& sc = file.get_float_array("tokenizer.ggml.scores");
        SPECDEC_CHECK(sc.size() >= n, "tokenizer: ", sc.size(), " scores for ", n, " tokens in ", file.path());
        for (size_t i = 0; i < n; ++i) t->scores_[i] = float(sc[i]);
    }
    if (file.has("tokenizer.ggml.token_type")) {
        const auto& ty = file.get_int_array("tokenizer.ggml.token_type");
        SPECDEC_CHECK(ty.size() >= n, "tokenizer: ", ty.size(), " token types for ", n, " tokens in ", file.path());
        for (size_t i = 0; i < n; ++i) t->attrs_[i] = attr_from_type(ty[i]);
    }
    for (size_t i = 0; i < n; ++i) {
        // llama.cpp renames empty tokens so that every text is a unique key.
        const std::string text = tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : tokens[i];
        SPECDEC_CHECK(t->ids_.add(text), "tokenizer: duplicate token '", text, "' (id ", i, ") in ", file.path());
    }

    if (t->kind_ == Kind::Bpe) {
        SPECDEC_CHECK(file.has("tokenizer.ggml.merges"), "tokenizer: BPE vocabulary without merges in ",
                      file.path());
        // A "gemma4" vocabulary is BPE with its own split, whatever
        // tokenizer.ggml.pre says (llama.cpp sets the name itself).
        const std::string pre_name = model == "gemma4" ? "gemma4" : file.get_string("tokenizer.ggml.pre", "");
        const PreTokenizer pre = pretokenizer_from_name(pre_name);
        t->bpe_ = std::make_unique<BpeTokenizer>(&t->ids_, file.get_string_array("tokenizer.ggml.merges"), pre,
                                                 pretokenizer_ignores_merges(pre_name));
        // llama.cpp's defaults when the metadata has no ids (none for gemma4).
        t->bos_ = model == "gemma4" ? -1 : 11;
        t->eos_ = model == "gemma4" ? -1 : 11;
        t->add_space_prefix_ = false;
        t->add_bos_ = pretokenizer_adds_bos(pre_name);  // the file's add_bos_token overrides it below
    } else if (t->kind_ == Kind::Wpm) {
        // llama.cpp's BERT defaults: [CLS] 101 as BOS, [SEP] 102, [UNK] 100.
        t->bos_ = 101;
        t->sep_ = 102;
        t->add_bos_ = true;
        int32_t unk = n > 100 ? 100 : -1;
        if (file.has("tokenizer.ggml.unknown_token_id")) {
            const int64_t v = file.get_int("tokenizer.ggml.unknown_token_id");
            if (v >= 0 && v < int64_t(n)) unk = int32_t(v);  // out of range: keep the default, as llama.cpp
        }
        for (size_t i = 0; i < n; ++i) {
            // llama.cpp aborts on reading the piece of a WordPiece byte token.
            SPECDEC_CHECK(!(t->attrs_[i] & kByte), "tokenizer: WordPiece vocabulary with a byte token ('",
                          t->ids_.text(int32_t(i)), "', id ", i, ") in ", file.path());
        }
        // BertNormalizer: lowercase by default, accents stripped when lowercasing.
        const bool lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase", true);
        const bool strip_accents = file.get_bool("tokenizer.ggml.normalizer.strip_accents", lowercase);
        t->wpm_ = std::make_unique<WpmTokenizer>(&t->ids_, unk, lowercase, strip_accents);
        t->add_space_prefix_ = false;
    } else {
        t->spm_ = std::make_unique<SpmTokenizer>(&t->ids_, &t->scores_);
        t->bos_ = 1;
        t->eos_ = 2;
        t->add_bos_ = true;
        t->add_space_prefix_ = true;
    }
    t->add_space_prefix_ = file.get_bool("tokenizer.ggml.add_space_prefix", t->add_space_prefix_);
    t->finish_special_tokens(file);
    return t;
}

void Tokenizer::finish_special_tokens(const GgufFile& file) {
    const int64_t n = int64_t(ids_.size());
    auto read_id = [&](const char* key, int32_t& id) {
        if (id >= n) id = -1;
        if (!file.has(key)) return;
        const int64_t v = file.get_int(key);
        if (v >= 0 && v < n) id = int32_t(v);  // out of range: keep the default, as llama.cpp
    };
    int32_t eot = -1, eom = -1, fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    read_id("tokenizer.ggml.bos_token_id", bos_);
    read_id("tokenizer.ggml.eos_token_id", eos_);
    read_id("tokenizer.ggml.seperator_token_id", sep_);  // sic: llama.cpp's key
    read_id("tokenizer.ggml.eot_token_id", eot);
    read_id("tokenizer.ggml.eom_token_id", eom);
    read_id("tokenizer.ggml.fim_pad_token_id", fim_pad);
    read_id("tokenizer.ggml.fim_rep_token_id", fim_rep);
    read_id("tokenizer.ggml.fim_sep_token_id", fim_sep);
    // FIM prefix/suffix/middle are not end of generation, but an id given here
    // stops llama.cpp from looking for (and forcing control on) one by text.
    read_id("tokenizer.ggml.fim_pre_token_id", fim_pre);
    read_id("tokenizer.ggml.fim_suf_token_id", fim_suf);
    read_id("tokenizer.ggml.fim_mid_token_id", fim_mid);
    read_id("tokenizer.ggml.prefix_token_id", fim_pre);  // deprecated keys, read after as llama.cpp
    read_id("tokenizer.ggml.suffix_token_id", fim_suf);
    read_id("tokenizer.ggml.middle_token_id", fim_mid);
    add_bos_ = file.get_bool("tokenizer.ggml.add_bos_token", add_bos_);
    add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token", add_eos_);
    // llama.cpp forces BOS on for Gemma 4 (its PR 21500), whatever the file says.
    if (kind_ == Kind::Bpe && bpe_->spm_style()) add_bos_ = true;
    SPECDEC_CHECK(!add_bos_ || bos_ >= 0, "tokenizer: add_bos_token set but no BOS token in ", file.path());
    SPECDEC_CHECK(!add_eos_ || eos_ >= 0, "tokenizer: add_eos_token set but no EOS token in ", file.path());

    // llama.cpp recognises end-of-turn and FIM tokens by their text and forces
    // the one it picks to be a control token; that changes how it is parsed
    // and printed, and the picked FIM pad/repo/sep token is end of generation,
    // so the pick is reproduced exactly (see pick_by_text).
    pick_by_text(ids_, attrs_, {
        {&eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                "_<EOT>", "[EOT]", kDeepseekEndOfSentence, "<end_of_utterance>"},
         false},
        {&eom, {"<|eom_id|>"}},
        {&fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"}},
        {&fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
                    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"}},
        {&fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"}},
        {&fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {&fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {&fim_sep, {"<|file_sep|>"}},
    });

    for (size_t i = 0; i < ids_.size(); ++i) {
        if ((attrs_[i] & kControl) && ids_.text(int32_t(i)).find("unused") != std::string::npos) attrs_[i] |= kUnused;
    }

    for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
        if (id >= 0) eog_.insert(id);
    }
    // llama.cpp's list of end-of-generation texts, in its order.
    for (const char* name :
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
          "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
          "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", kDeepseekEndOfSentence, "[e~["}) {
        const auto it = ids_.find(name);
        if (it == ids_.end()) continue;
        eog_.insert(it->second);
        attrs_[size_t(it->second)] |= kControl;
    }
    // gpt-oss's chat markers are always rendered (llama.cpp makes them
    // user-defined, dropping every other attribute).
    for (const char* name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        const auto it = ids_.find(name);
        if (it != ids_.end()) attrs_[size_t(it->second)] = kUserDefined;
    }
    for (int32_t id : {eos_, eot, eom}) {
        if (id >= 0) eog_.insert(id);
    }

    auto eog_text = [&](std::string_view text) {
        const auto it = ids_.find(text);
        return it != ids_.end() && eog_.count(it->second) != 0;
    };
    // gpt-oss (o200k_harmony) and Solar Open end a message with "<|end|>" but
    // the generation with "<|return|>"/"<|call|>" ("<|calls|>"/"<|flush|>"):
    // llama.cpp tells them by those tokens and makes "<|end|>" a user-defined,
    // non-EOG token.
    {
        const bool call = eog_text("<|call|>") || eog_text("<|calls|>");
        if (eog_text("<|end|>") && ((eog_text("<|return|>") && call) || (call && eog_text("<|flush|>")))) {
            const int32_t end = ids_.find("<|end|>")->second;
            eog_.erase(end);
            attrs_[size_t(end)] = kUserDefined;
        }
    }
    // Gemma 4 has an ordinary "</s>" (text, not end of generation); llama.cpp
    // tells it by "<|tool_response>" (or PLaMo's "<|plamo:eos|>") being an
    // end-of-generation token too, and then makes "</s>" a normal token.
    if (eog_text("</s>") && (eog_text("<|tool_response>") || eog_text("<|plamo:eos|>"))) {
        const int32_t s = ids_.find("</s>")->second;
        eog_.erase(s);
        attrs_[size_t(s)] = kNormal;
    }

    // Special tokens are split out longest first. std::sort (not stable) on
    // ascending ids with the same comparator as llama.cpp keeps equal-length
    // tokens in the same relative order under the same standard library.
    for (size_t i = 0; i < ids_.size(); ++i) {
        if (attrs_[i] & (kControl | kUserDefined | kUnknown)) special_.push_back(int32_t(i));
    }
    std::sort(special_.begin(), special_.end(),
              [&](int32_t a, int32_t b) { return ids_.text(a).size() > ids_.text(b).size(); });

    pieces_.clear();
    piece_off_.assign(1, 0);
    piece_off_.reserve(ids_.size() + 1);
    std::string p;
    for (size_t i = 0; i < ids_.size(); ++i) {
        const uint32_t a = attrs_[i];
        p.clear();
        if (a & (kUnknown | kControl | kUserDefined)) {
            p = ids_.text(int32_t(i));
        } else if ((kind_ == Kind::Spm || kind_ == Kind::Wpm || (kind_ == Kind::Bpe && bpe_->spm_style())) &&
                   (a & kNormal)) {
            // Texts with U+2581 for spaces.
            for (size_t k = 0; k < ids_.text(int32_t(i)).size();) {
                if (ids_.text(int32_t(i)).compare(k, 3, "\xE2\x96\x81") == 0) {
                    p.push_back(' ');
                    k += 3;
                } else {
                    p.push_back(ids_.text(int32_t(i))[k++]);
                }
            }
        } else if (a & kByte) {  // SPM and BPE (WordPiece vocabularies with one are refused)
            // A byte token reads "<0xNN>"; like llama.cpp, take the hex digits
            // at offset 3. A text shorter than that is a corrupt vocabulary:
            // substr would throw std::out_of_range, not the Error a bad file
            // must give (found by tests/fuzz/fuzz_tokenizer).
            const std::string_view text = ids_.text(int32_t(i));
            SPECDEC_CHECK(text.size() >= 3, "tokenizer: byte token '", text, "' (id ", i,
                          ") is not of the form <0xNN> in ", file.path());
            p.push_back(char(std::strtol(std::string(text.substr(3, 2)).c_str(), nullptr, 16)));
        } else if (kind_ == Kind::Bpe && (a & kNormal)) {
            p = BpeTokenizer::decode_token_text(std::string(ids_.text(int32_t(i))));
        }
        pieces_ += p;
        SPECDEC_CHECK(pieces_.size() < UINT32_MAX, "tokenizer: token pieces exceed 4 GiB");
        piece_off_.push_back(uint32_t(pieces_.size()));
    }
    pieces_.shrink_to_fit();
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    struct Frag {
        int32_t token;  // -1: raw text [off, off + len)
        size_t off, len;
    };
    std::vector<Frag> frags;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    std::vector<Frag> next;
    for (int32_t id : special_) {
        const uint32_t a = attrs_[size_t(id)];
        if (!parse_special && (a & (kControl | kUnknown))) continue;
        const std::string_view st = ids_.text(id);
        next.clear();
        bool changed = false;
        for (const Frag& f : frags) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            size_t pos = f.off;
            const size_t end = f.off + f.len;
            const std::string_view window = text.substr(0, end);
            for (;;) {
                const size_t m = window.find(st, pos);
                if (m == std::string_view::npos) break;
                changed = true;
                if (m > pos) next.push_back({-1, pos, m - pos});
                next.push_back({id, 0, 0});
                pos = m + st.size();
            }
            if (end > pos) next.push_back({-1, pos, end - pos});
        }
        if (changed) frags.swap(next);
    }

    std::vector<int32_t> out;
    // WordPiece adds [CLS] whatever add_bos_token says, as llama.cpp does.
    if (add_special && (add_bos_ || kind_ == Kind::Wpm)) {
        SPECDEC_CHECK(bos_ >= 0, "tokenizer: the vocabulary has no BOS token to add");
        out.push_back(bos_);
    }
    bool prev_special = true;  // SPM: a space prefix goes before the first text
    for (const Frag& f : frags) {
        if (f.token >= 0) {
            out.push_back(f.token);
            prev_special = true;
            continue;
        }
        if (kind_ == Kind::Spm) {
            std::string t;
            if (add_space_prefix_ && prev_special) t = " ";
            t.append(text.substr(f.off, f.len));
            spm_->encode(t, out);
            prev_special = false;
        } else if (kind_ == Kind::Wpm) {
            wpm_->encode(text.substr(f.off, f.len), out);
        } else {
            bpe_->encode(text.substr(f.off, f.len), out);
        }
    }
    if (kind_ == Kind::Wpm && add_special) {
        SPECDEC_CHECK(sep_ >= 0,
                      "tokenizer: WordPiece vocabulary without a [SEP] token (tokenizer.ggml.seperator_token_id)");
        out.push_back(sep_);
    } else if (add_special && add_eos_) {
        out.push_back(eos_);
    }
    return out;
}

void Tokenizer::check_id(int32_t id) const {
    SPECDEC_CHECK(id >= 0 && id < n_vocab(), "tokenizer: token id ", id, " out of range [0, ", n_vocab(), ")");
}

std::string Tokenizer::token_to_piece(int32_t id) const {
    check_id(id);
    return pieces_.substr(piece_off_[size_t(id)], piece_off_[size_t(id) + 1] - piece_off_[size_t(id)]);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids) out += token_to_piece(id);
    return out;
}

bool Tokenizer::is_control(int32_t id) const { return (attr(id) & kControl) != 0; }

uint32_t Tokenizer::attr(int32_t id) const {
    check_id(id);
    return attrs_[size_t(id)];
}

std::string_view Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return ids_.text(id);
}

uint64_t Tokenizer::token_list_hash() const { return hash_; }

}  // namespace specdec::io
