// `specdec dev render-template IN OUT`: renders chat templates with the
// project's Jinja interpreter for tests/python/test_chat_templates.py, which
// renders the same cases with Python's jinja2 and compares the bytes.
//
// Input JSON: {"templates": {"name": "template text", ...},
//              "cases": [{"template": name, "messages": [...], "add_generation_prompt": bool,
//                         "bos_token": str, "eos_token": str, "tools": [...] (optional),
//                         "now": epoch seconds (optional: strftime_now's clock)}]}
// Output JSON: {"templates": {"name": null or "parse error"},
//               "results": [{"text": str} or {"error": str}, ...]} in case order.
// The messages are passed as they are (any JSON), like Hugging Face does.
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_commands.h"
#include "io/chat_template.h"

namespace specdec::cli {
namespace {

namespace jinja = io::jinja;

jinja::Value from_json(const nlohmann::ordered_json& j) {
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return jinja::Value::none();
        case nlohmann::ordered_json::value_t::boolean: return jinja::Value::boolean(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
        case nlohmann::ordered_json::value_t::number_unsigned: return jinja::Value::integer(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_float: return jinja::Value::number(j.get<double>());
        case nlohmann::ordered_json::value_t::string: return jinja::Value::string(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<jinja::Value> items;
            for (const auto& x : j) items.push_back(from_json(x));
            return jinja::Value::array(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            jinja::Value o = jinja::Value::object();
            for (const auto& [k, x] : j.items()) o.obj->set(k, from_json(x));
            return o;
        }
        default: return jinja::Value::undefined();
    }
}

}  // namespace

int render_template(const std::string& in_path, const std::string& out_path) {
    std::ifstream in(in_path);
    // Object keys keep their order (Python dicts do, and tojson prints them so).
    const nlohmann::ordered_json req = nlohmann::ordered_json::parse(in);
    nlohmann::ordered_json res;
    std::map<std::string, std::unique_ptr<io::ChatTemplate>> parsed;
    res["templates"] = nlohmann::ordered_json::object();
    for (const auto& [name, text] : req.at("templates").items()) {
        try {
            parsed[name] = std::make_unique<io::ChatTemplate>(text.get<std::string>());
            res["templates"][name] = nullptr;
        } catch (const Error& e) {
            res["templates"][name] = e.what();
        }
    }
    res["results"] = nlohmann::ordered_json::array();
    for (const auto& c : req.at("cases")) {
        nlohmann::ordered_json r;
        const auto it = parsed.find(c.at("template").get<std::string>());
        if (it == parsed.end() || !it->second) {
            r["error"] = "template did not parse";
        } else {
            io::ChatRenderInputs inputs;
            inputs.messages = from_json(c.at("messages"));
            inputs.add_generation_prompt = c.value("add_generation_prompt", false);
            inputs.bos_token = c.value("bos_token", std::string());
            inputs.eos_token = c.value("eos_token", std::string());
            if (c.contains("tools")) inputs.tools = from_json(c.at("tools"));
            if (c.contains("now")) inputs.now = c.at("now").get<int64_t>();
            try {
                r["text"] = it->second->render(inputs);
            } catch (const Error& e) {
                r["error"] = e.what();
            }
        }
        res["results"].push_back(std::move(r));
    }
    std::ofstream(out_path) << res.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
}

}  // namespace specdec::cli
