#include "mblast/llm/config.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "mblast/error.h"
#include "mblast/paths.h"

namespace mblast::llm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

bool is_none(const std::string& spec) { return spec == "none" || spec == "builtin"; }

// The parsed config file, or an empty object when there is none.
struct ConfigFile {
  fs::path path;
  bool exists = false;
  json doc = json::object();
};

ConfigFile read_config_file() {
  ConfigFile cf;
  cf.path = llm_config_file();
  const bool explicit_path = !env("MBLAST_CONFIG").empty();
  std::error_code ec;
  if (!fs::exists(cf.path, ec)) {
    if (explicit_path) throw UserError("MBLAST_CONFIG=" + cf.path.string() + ": no such file");
    return cf;
  }
  std::ifstream in(cf.path, std::ios::binary);
  if (!in) throw UserError(cf.path.string() + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  cf.exists = true;
  try {
    cf.doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    // Only the position: the parser's message quotes the text near the error, which may be a key.
    throw UserError(cf.path.string() + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  }
  if (!cf.doc.is_object()) throw UserError(cf.path.string() + ": expected a JSON object");
  return cf;
}

[[noreturn]] void bad_field(const ConfigFile& cf, const std::string& field, const std::string& want) {
  throw UserError(cf.path.string() + ": \"" + field + "\" must be " + want);
}

double number_field(const ConfigFile& cf, const json& v, const std::string& name, bool positive) {
  if (!v.is_number() || (positive ? !(v.get<double>() > 0) : !(v.get<double>() >= 0)))
    bad_field(cf, name, positive ? "a positive number" : "a number >= 0");
  return v.get<double>();
}

int64_t count_field(const ConfigFile& cf, const json& v, const std::string& name) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) bad_field(cf, name, "an integer >= 0");
  return v.get<int64_t>();
}

void read_settings(const ConfigFile& cf, LlmConfig& c) {
  const json& d = cf.doc;
  if (d.contains("timeout_s")) c.timeout_s = number_field(cf, d["timeout_s"], "timeout_s", true);
  if (d.contains("max_retries")) c.max_retries = static_cast<int>(count_field(cf, d["max_retries"], "max_retries"));
  if (d.contains("budget")) {
    const json& b = d["budget"];
    if (!b.is_object()) bad_field(cf, "budget", "an object with max_calls, max_tokens, max_usd");
    for (const auto& [k, v] : b.items()) {
      if (k == "max_calls")
        c.budget.max_calls = count_field(cf, v, "budget.max_calls");
      else if (k == "max_tokens")
        c.budget.max_tokens = count_field(cf, v, "budget.max_tokens");
      else if (k == "max_usd")
        c.budget.max_usd = number_field(cf, v, "budget.max_usd", false);
      else
        throw UserError(cf.path.string() + ": unknown key \"budget." + k + "\" (max_calls, max_tokens, max_usd)");
    }
  }
  if (d.contains("prices")) {
    const json& p = d["prices"];
    if (!p.is_object())
      bad_field(cf, "prices", "an object {\"MODEL\": {\"input\": USD, \"output\": USD}} (per million tokens)");
    for (const auto& [model, v] : p.items()) {
      const std::string where = "prices." + model;
      if (!v.is_object() || !v.contains("input") || !v.contains("output") || v.size() != 2)
        bad_field(cf, where, "{\"input\": USD, \"output\": USD} (per million tokens)");
      c.prices.set(model, Price{number_field(cf, v["input"], where + ".input", false),
                                number_field(cf, v["output"], where + ".output", false)});
    }
  }
}

std::string checked_key(std::string key, const std::string& source) {
  key = trim(std::move(key));
  for (char ch : key)
    if (std::iscntrl(static_cast<unsigned char>(ch)))
      throw UserError("the API key from " + source + " contains a control character (a line break?)");
  return key;
}

void warn_if_readable_by_others(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    spdlog::warn("{} holds an API key and can be read by other users (chmod 600 it)", path.string());
}

}  // namespace

fs::path llm_config_file() {
  if (std::string p = env("MBLAST_CONFIG"); !p.empty()) return p;
  return config_dir() / "config.json";
}

std::optional<LlmConfig> resolve_llm_config(const std::string& flag_value, bool require_key) {
  LlmConfig c;
  std::string spec = trim(flag_value);
  c.source = "--llm";
  if (spec.empty()) {
    spec = trim(env("MBLAST_LLM"));
    c.source = "MBLAST_LLM";
  }
  if (is_none(spec)) return std::nullopt;

  const ConfigFile cf = read_config_file();
  const json& d = cf.doc;
  std::optional<ProviderSpec> file_provider;
  bool file_names_llm = false;  // the file's "llm" names a provider (its api_key is for that one)
  if (d.contains("llm")) {
    if (!d["llm"].is_string()) bad_field(cf, "llm", "a string such as \"openai:gpt-4o\"");
    const std::string file_spec = trim(d["llm"].get<std::string>());
    if (!is_none(file_spec)) {
      file_names_llm = true;
      try {
        file_provider = parse_llm_spec(file_spec);
      } catch (const UserError& e) {
        if (spec.empty()) throw UserError(cf.path.string() + ": " + e.what());
      }
    }
    if (spec.empty()) {
      if (is_none(file_spec)) return std::nullopt;
      spec = file_spec;
      c.source = cf.path.string();
    }
  }
  if (spec.empty()) return std::nullopt;

  c.spec = spec;
  c.provider = parse_llm_spec(spec);
  read_settings(cf, c);

  // The key: a variable meant for mblast, then the provider's own variable (never sent to a
  // custom URL), then the config file's key when it belongs to this server.
  const bool official = c.provider.is_official();
  const std::string provider_var = c.provider.kind == "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
  if (std::string k = env("MBLAST_LLM_API_KEY"); !trim(k).empty()) {
    c.api_key = checked_key(k, "MBLAST_LLM_API_KEY");
    c.api_key_source = "MBLAST_LLM_API_KEY";
  } else if (std::string pk = env(provider_var.c_str()); official && !trim(pk).empty()) {
    c.api_key = checked_key(pk, provider_var);
    c.api_key_source = provider_var;
  } else if (d.contains("api_key")) {
    if (!d["api_key"].is_string()) bad_field(cf, "api_key", "a string");
    const bool same_server = !file_names_llm || (file_provider && file_provider->kind == c.provider.kind &&
                                                 file_provider->base_url == c.provider.base_url);
    if (same_server && !trim(d["api_key"].get<std::string>()).empty()) {
      c.api_key = checked_key(d["api_key"].get<std::string>(), cf.path.string());
      c.api_key_source = cf.path.string();
      warn_if_readable_by_others(cf.path);
    }
  }
  if (c.api_key.empty() && official && require_key)
    throw UserError("no API key for " + c.provider.describe() + ": set " + provider_var +
                    " (or MBLAST_LLM_API_KEY, or \"api_key\" in " + cf.path.string() + ")");
  return c;
}

}  // namespace mblast::llm
