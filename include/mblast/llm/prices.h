// What a model costs, in USD per million input and output tokens.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace mblast::llm {

struct Price {
  double input_per_mtok = 0;   // USD per 1,000,000 input (prompt) tokens
  double output_per_mtok = 0;  // USD per 1,000,000 output (completion) tokens
};

class PriceTable {
 public:
  // The built-in list prices of common OpenAI and Anthropic models (see defaults_as_of()).
  PriceTable();
  static PriceTable empty();
  static const char* defaults_as_of();  // "YYYY-MM" the built-in prices were checked

  // Adds or replaces the price of a model (config file "prices" entries use this).
  void set(const std::string& model, Price price);
  // The exact name first; then the name without a snapshot suffix (-20250929, -2024-08-06,
  // -latest), so dated snapshots cost what their family does. nullopt: price unknown.
  std::optional<Price> find(const std::string& model) const;
  const std::map<std::string, Price>& entries() const { return prices_; }

 private:
  std::map<std::string, Price> prices_;
};

double cost_usd(const Price& price, long long input_tokens, long long output_tokens);

}  // namespace mblast::llm
