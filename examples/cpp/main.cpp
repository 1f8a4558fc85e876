// Generates greedy text with the public API (include/specdec/engine.h): the
// text streams to stdout as it becomes final, the speculation statistics go
// to stderr.
//   specdec_example MODEL PROMPT [MAX_TOKENS [THREADS]]
// MODEL is a .gguf path or a name from models/manifest.json.
#include <specdec/engine.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS [THREADS]]\n", argv[0]);
        return 2;
    }
    try {
        specdec::EngineOptions opts;
        opts.model = argv[1];
        if (argc > 4) opts.threads = std::stoi(argv[4]);
        specdec::Engine engine(opts);

        specdec::Request req;
        req.prompt = argv[2];
        req.max_tokens = argc > 3 ? std::stoi(argv[3]) : 64;
        req.on_text = [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;  // false would stop generating here
        };
        const specdec::Result r = engine.generate(req);  // temperature 0: greedy, method auto
        std::fprintf(stderr, "\n[%s: %d tokens, %d rounds, %.2f tokens per target forward, %.1f tok/s; %s]\n",
                     r.method.c_str(), r.n_generated, r.rounds(), r.mean_accept_len(), r.decode_tok_s(),
                     r.finish_reason.c_str());
    } catch (const specdec::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {  // std::stoi on a bad number
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    return 0;
}
