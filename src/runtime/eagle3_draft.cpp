#include "runtime/eagle3_draft.h"

#include "core/error.h"
#include "runtime/engine.h"

namespace specdec::runtime {

namespace {
// Head cache slots past the target's context: one round's draft rows (a tree
// stops growing when they run out, so this caps the tree, never correctness).
constexpr int kDraftRoom = 512;
}  // namespace

std::unique_ptr<Eagle3Draft> Eagle3Draft::load(const std::string& path, Engine& target) {
    const model::ModelConfig& tc = target.config();
    SPECDEC_CHECK(target.model().n_layers_run() == tc.n_layer, "an EAGLE-3 head reads the full target's features, ",
                  "not those of a layer-skipping copy");
    auto d = std::make_unique<Eagle3Draft>();
    d->path = path;
    d->head = model::Eagle3Head::load(path, {target.options().model_path, tc.n_layer, tc.n_embd, tc.n_vocab});
    d->forward = std::make_unique<model::Eagle3Forward>(*d->head, target.model().weights().tok_embd);
    d->cache = std::make_unique<kv::KvCache>(d->forward->kv_options(target.n_ctx() + kDraftRoom, target.cache().n_seq()));
    return d;
}

}  // namespace specdec::runtime
