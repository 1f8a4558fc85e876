#include "specdec/request.h"

namespace specdec {

// Auto's choices depend on measured times, so under sampling a seed would not
// reproduce its text from run to run (the output is still exact in
// distribution): there the default is AR.
std::string default_method(const SamplingParams& sampling) { return sampling.greedy() ? "auto" : "ar"; }

}  // namespace specdec
