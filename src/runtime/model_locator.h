// Resolves what the user typed after -m: a path to a GGUF file, or the name of
// a model recorded in models/manifest.json by tools/fetch_models.py; and after
// --eagle3: a head's path, or the name of an EAGLE-3 head the manifest records
// (the repository's heads, checked against their pins by fetch_models.py).
#pragma once

#include <string>

namespace specdec::runtime {

// Directory holding manifest.json: $SPECDEC_MODELS_DIR, else ./models, else
// models/ two levels above the running executable (build/<dir>/specdec).
std::string models_dir();

// "" means the manifest's default model. Throws specdec::Error listing the
// known names when nothing matches.
std::string resolve_model(const std::string& name_or_path);

// A path (it exists, or has a '/', or ends in .gguf) is returned as it is;
// otherwise the directory of the manifest's head of that name. Throws
// specdec::Error listing the known heads when nothing matches.
std::string resolve_eagle3_head(const std::string& name_or_path);

}  // namespace specdec::runtime
