#include "mblast/llm/prices.h"

#include <cctype>
#include <string_view>

namespace mblast::llm {

namespace {

// List prices in USD per million tokens (standard tier, no batch or cache discounts), from
// the providers' pricing pages as of defaults_as_of(). A config file's "prices" overrides them.
struct DefaultPrice {
  const char* model;
  double input, output;
};
constexpr DefaultPrice kDefaults[] = {
    {"gpt-4o", 2.50, 10.00},
    {"gpt-4o-mini", 0.15, 0.60},
    {"gpt-4.1", 2.00, 8.00},
    {"gpt-4.1-mini", 0.40, 1.60},
    {"gpt-4.1-nano", 0.10, 0.40},
    {"o3", 2.00, 8.00},
    {"o3-mini", 1.10, 4.40},
    {"o4-mini", 1.10, 4.40},
    {"gpt-5", 1.25, 10.00},
    {"gpt-5-mini", 0.25, 2.00},
    {"gpt-5-nano", 0.05, 0.40},
    {"gpt-5.1", 1.25, 10.00},
    {"claude-opus-4-6", 5.00, 25.00},
    {"claude-opus-4-5", 5.00, 25.00},
    {"claude-opus-4-1", 15.00, 75.00},
    {"claude-opus-4-0", 15.00, 75.00},
    {"claude-opus-4", 15.00, 75.00},
    {"claude-sonnet-4-6", 3.00, 15.00},
    {"claude-sonnet-4-5", 3.00, 15.00},
    {"claude-sonnet-4-0", 3.00, 15.00},
    {"claude-sonnet-4", 3.00, 15.00},
    {"claude-3-7-sonnet", 3.00, 15.00},
    {"claude-haiku-4-5", 1.00, 5.00},
    {"claude-3-5-haiku", 0.80, 4.00},
};

bool digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "name-20250929" / "name-2024-08-06" / "name-latest" -> "name"; otherwise "".
std::string without_snapshot(const std::string& model) {
  const std::string_view m = model;
  const auto strip = [&](size_t n) { return model.substr(0, model.size() - n); };
  if (m.size() > 7 && m.ends_with("-latest")) return strip(7);
  if (m.size() > 9 && m[m.size() - 9] == '-' && digits(m.substr(m.size() - 8))) return strip(9);
  if (m.size() > 11) {
    const std::string_view t = m.substr(m.size() - 11);  // "-YYYY-MM-DD"
    if (t[0] == '-' && digits(t.substr(1, 4)) && t[5] == '-' && digits(t.substr(6, 2)) && t[8] == '-' &&
        digits(t.substr(9, 2)))
      return strip(11);
  }
  return "";
}

}  // namespace

PriceTable::PriceTable() {
  for (const auto& d : kDefaults) prices_[d.model] = Price{d.input, d.output};
}

PriceTable PriceTable::empty() {
  PriceTable t;
  t.prices_.clear();
  return t;
}

const char* PriceTable::defaults_as_of() { return "2026-03"; }

void PriceTable::set(const std::string& model, Price price) { prices_[model] = price; }

std::optional<Price> PriceTable::find(const std::string& model) const {
  if (auto it = prices_.find(model); it != prices_.end()) return it->second;
  if (std::string family = without_snapshot(model); !family.empty())
    if (auto it = prices_.find(family); it != prices_.end()) return it->second;
  return std::nullopt;
}

double cost_usd(const Price& price, long long input_tokens, long long output_tokens) {
  return (static_cast<double>(input_tokens) * price.input_per_mtok +
          static_cast<double>(output_tokens) * price.output_per_mtok) /
         1e6;
}

}  // namespace mblast::llm
