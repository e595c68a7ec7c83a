#include "wire.h"

#include <nlohmann/json.hpp>

#include "mblast/llm/client.h"
#include "message_text.h"

namespace mblast::llm {

using nlohmann::json;

namespace {

constexpr const char* kAnthropicVersion = "2023-06-01";

// OpenAI's reasoning models (o-series, gpt-5 family) take only the default temperature.
bool is_openai_reasoning_model(const std::string& model) {
  for (const char* p : {"o1", "o3", "o4", "gpt-5"})
    if (model.rfind(p, 0) == 0) return true;
  return false;
}

json openai_body(const ProviderSpec& provider, const Request& r) {
  json messages = json::array();
  for (const Message& m : r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", provider.model}, {"messages", std::move(messages)}};
  if (provider.is_official()) {
    // OpenAI deprecated max_tokens in favour of max_completion_tokens, which its reasoning
    // models require; compatible servers (vLLM, llama.cpp, Ollama, SGLang) all take max_tokens.
    body["max_completion_tokens"] = r.max_tokens;
    if (!is_openai_reasoning_model(provider.model)) body["temperature"] = r.temperature;
  } else {
    body["max_tokens"] = r.max_tokens;
    body["temperature"] = r.temperature;
  }
  return body;
}

json anthropic_body(const ProviderSpec& provider, const Request& r) {
  std::string system;
  json messages = json::array();
  for (const Message& m : r.messages) {
    if (m.role == "system") {
      if (!system.empty()) system += "\n\n";
      system += m.content;
    } else {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
  }
  json body = {{"model", provider.model},
               {"max_tokens", r.max_tokens},
               {"messages", std::move(messages)},
               {"temperature", r.temperature}};
  if (!system.empty()) body["system"] = system;
  return body;
}

json parse_json(const std::string& body) {
  try {
    return json::parse(body);
  } catch (const json::parse_error&) {
    if (body.empty()) throw MalformedReply("an empty body instead of JSON");
    throw MalformedReply("not JSON (" + std::to_string(body.size()) + " bytes: " + one_line(body, 80) + ")");
  }
}

int64_t token_count(const json& usage, const char* name) {
  if (!usage.is_object() || !usage.contains(name) || usage[name].is_null()) return 0;
  if (!usage[name].is_number_integer()) throw MalformedReply(std::string("usage.") + name + " is not an integer");
  return usage[name].get<int64_t>();
}

std::string string_or_empty(const json& obj, const char* name) {
  if (!obj.is_object() || !obj.contains(name) || obj[name].is_null()) return "";
  if (!obj[name].is_string()) throw MalformedReply(std::string(name) + " is not a string");
  return obj[name].get<std::string>();
}

void reject_error_object(const json& doc) {
  if (doc.contains("error") && !doc["error"].is_null())
    throw MalformedReply("an error instead of an answer: " + error_reason(doc.dump()));
}

Reply parse_openai(const ProviderSpec& provider, const json& doc) {
  reject_error_object(doc);
  if (!doc.contains("choices") || !doc["choices"].is_array()) throw MalformedReply("no \"choices\" array");
  if (doc["choices"].empty()) throw MalformedReply("\"choices\" is empty");
  const json& choice = doc["choices"][0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object())
    throw MalformedReply("choices[0] has no \"message\" object");
  const json& msg = choice["message"];
  Reply r;
  if (msg.contains("content") && msg["content"].is_array()) {  // content parts
    for (const json& part : msg["content"])
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        r.text += part["text"].get<std::string>();
  } else if (msg.contains("content") && !msg["content"].is_null()) {
    if (!msg["content"].is_string()) throw MalformedReply("choices[0].message.content is not a string");
    r.text = msg["content"].get<std::string>();
  } else if (!msg.contains("content")) {
    throw MalformedReply("choices[0].message has no \"content\"");
  }
  r.refusal = string_or_empty(msg, "refusal");
  r.finish_reason = string_or_empty(choice, "finish_reason");
  r.model = string_or_empty(doc, "model");
  if (r.model.empty()) r.model = provider.model;
  if (doc.contains("usage")) {
    r.input_tokens = token_count(doc["usage"], "prompt_tokens");
    r.output_tokens = token_count(doc["usage"], "completion_tokens");
  }
  r.refused = r.text.empty() && (!r.refusal.empty() || r.finish_reason == "content_filter");
  return r;
}

Reply parse_anthropic(const ProviderSpec& provider, const json& doc) {
  reject_error_object(doc);
  if (!doc.contains("content") || !doc["content"].is_array()) throw MalformedReply("no \"content\" array");
  Reply r;
  // Text blocks are consecutive pieces of one answer (citations split them); other blocks
  // (thinking, tool use) are not the answer.
  for (const json& block : doc["content"]) {
    if (!block.is_object()) throw MalformedReply("a content block is not an object");
    if (block.value("type", "") != "text") continue;
    if (!block.contains("text") || !block["text"].is_string()) throw MalformedReply("a text block has no text");
    r.text += block["text"].get<std::string>();
  }
  r.finish_reason = string_or_empty(doc, "stop_reason");
  r.model = string_or_empty(doc, "model");
  if (r.model.empty()) r.model = provider.model;
  if (doc.contains("usage")) {
    const json& u = doc["usage"];
    // Prompt-cache reads and writes are input too (priced differently; counted at the input price).
    r.input_tokens = token_count(u, "input_tokens") + token_count(u, "cache_creation_input_tokens") +
                     token_count(u, "cache_read_input_tokens");
    r.output_tokens = token_count(u, "output_tokens");
  }
  r.refused = r.text.empty() && r.finish_reason == "refusal";
  return r;
}

}  // namespace

HttpPost build_post(const ProviderSpec& provider, const std::string& api_key, const Request& request,
                    double timeout_s) {
  HttpPost p;
  p.timeout_s = timeout_s;
  if (provider.kind == "anthropic") {
    p.url = provider.base_url + "/messages";
    if (!api_key.empty()) p.headers.push_back("x-api-key: " + api_key);
    p.headers.push_back(std::string("anthropic-version: ") + kAnthropicVersion);
    p.headers.push_back("content-type: application/json");
    p.body = anthropic_body(provider, request).dump();
  } else {
    p.url = provider.base_url + "/chat/completions";
    if (!api_key.empty()) p.headers.push_back("Authorization: Bearer " + api_key);
    p.headers.push_back("Content-Type: application/json");
    p.body = openai_body(provider, request).dump();
  }
  return p;
}

Reply parse_reply(const ProviderSpec& provider, const std::string& body) {
  const json doc = parse_json(body);
  if (!doc.is_object()) throw MalformedReply("the JSON is not an object");
  try {
    return provider.kind == "anthropic" ? parse_anthropic(provider, doc) : parse_openai(provider, doc);
  } catch (const json::exception& e) {
    throw MalformedReply(std::string("unexpected JSON structure (") + e.what() + ")");
  }
}

std::string error_reason(const std::string& body) {
  try {
    const json doc = json::parse(body);
    if (doc.is_object()) {
      if (doc.contains("error")) {
        const json& e = doc["error"];
        if (e.is_object() && e.contains("message") && e["message"].is_string())
          return one_line(e["message"].get<std::string>());
        if (e.is_string()) return one_line(e.get<std::string>());
      }
      for (const char* k : {"message", "detail"})
        if (doc.contains(k) && doc[k].is_string()) return one_line(doc[k].get<std::string>());
    }
  } catch (const json::exception&) {
  }
  return one_line(body);
}

}  // namespace mblast::llm
