// Which LLM to talk to: a provider kind, the base URL of its API and a model name.
#pragma once

#include <string>

namespace mblast::llm {

struct ProviderSpec {
  std::string kind;      // "openai" (chat completions) or "anthropic" (messages)
  std::string base_url;  // no trailing '/', e.g. https://api.openai.com/v1
  std::string model;

  // The provider's own API (api.openai.com / api.anthropic.com), as opposed to a compatible
  // server at a custom URL (vLLM, llama.cpp, Ollama, SGLang, a proxy).
  bool is_official() const;
  // For messages and logs: "openai gpt-4o", or "openai http://localhost:8000/v1 qwen2.5" for a
  // custom URL (user:password in the URL is shown as "***").
  std::string describe() const;
};

// Parses the value of --llm / MBLAST_LLM / the config file's "llm":
//   openai:MODEL                          https://api.openai.com/v1
//   anthropic:MODEL                       https://api.anthropic.com/v1
//   http(s)://HOST[:PORT]/PATH:MODEL      an OpenAI-compatible server (vLLM, llama.cpp, Ollama, SGLang)
//   openai+http(s)://HOST[:PORT]/PATH:MODEL     the same, explicitly
//   anthropic+http(s)://HOST[:PORT]/PATH:MODEL  an Anthropic-compatible server
// For a URL the model starts after the first ':' that follows the start of the path, so model
// names with tags keep their colon (http://localhost:11434/v1:qwen2.5-coder:7b).
// Throws UserError with a one-line reason on a malformed spec.
ProviderSpec parse_llm_spec(const std::string& spec);

}  // namespace mblast::llm
