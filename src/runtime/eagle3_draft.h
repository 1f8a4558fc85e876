// An EAGLE-3 head loaded for a target engine: the head (checked against the
// target), its forward over the target's embedding table, and its own KV
// cache (one sequence per target sequence, with room past the target's
// context for one round's draft rows).
#pragma once

#include <memory>
#include <string>

#include "kv/kv_cache.h"
#include "model/eagle3_forward.h"
#include "model/eagle3_head.h"

namespace specdec::runtime {

class Engine;

struct Eagle3Draft {
    std::string path;
    std::unique_ptr<model::Eagle3Head> head;
    std::unique_ptr<model::Eagle3Forward> forward;
    std::unique_ptr<kv::KvCache> cache;

    // Throws specdec::Error for a head that is bad or does not fit `target`.
    static std::unique_ptr<Eagle3Draft> load(const std::string& path, Engine& target);
};

}  // namespace specdec::runtime
