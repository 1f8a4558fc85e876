// Where a draft's vocabulary subset comes from (--vocab-subset N
// --vocab-subset-file F --vocab-corpus C): read from F when it exists, else
// counted from the JSONL corpus C with the target's tokenizer and saved to F.
// Shared by the synchronous draft proposer and the SSD draft worker.
#pragma once

#include <memory>
#include <string>

#include "runtime/engine.h"
#include "spec/vocab_subset.h"

namespace specdec::sched {

// Null when n == 0 (no subset).
std::unique_ptr<spec::VocabSubset> load_vocab_subset(int n, const std::string& path, const std::string& corpus_path,
                                                     const runtime::Engine& target);

}  // namespace specdec::sched
