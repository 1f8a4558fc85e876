// The chat page `specdec serve` answers at GET /: one self-contained HTML
// document (inline CSS and JavaScript, nothing fetched from elsewhere) that
// streams chat completions from this server's /v1/chat/completions, lets the
// user pick the speculation method and its draft length per message, and
// colours each token by where it came from (the specdec.provenance stream
// extension: accepted draft or the target's own), with live tokens per
// second and accept length. Tested in headless Chromium
// (tests/python/test_chat_page.py).
#pragma once

#include <string_view>

namespace specdec::server {

std::string_view chat_page_html();

}  // namespace specdec::server
