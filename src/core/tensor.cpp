#include "mblast/tensor.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mblast/error.h"

namespace mblast {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  const char* name;
  const char* st_name;
  bool is_float;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f32, 4, "f32", "F32", true},        {DType::f16, 2, "f16", "F16", true},
    {DType::bf16, 2, "bf16", "BF16", true},     {DType::f64, 8, "f64", "F64", true},
    {DType::i32, 4, "i32", "I32", false},       {DType::i64, 8, "i64", "I64", false},
    {DType::i8, 1, "i8", "I8", false},          {DType::u8, 1, "u8", "U8", false},
    {DType::boolean, 1, "bool", "BOOL", false},
};
const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  throw Error("unknown dtype value " + std::to_string(static_cast<int>(t)));
}

double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
bool dtype_is_float(DType t) { return info(t).is_float; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::string_view dtype_safetensors_name(DType t) { return info(t).st_name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}
std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.st_name) return d.type;
  return std::nullopt;
}

double element_as_double(DType t, const std::byte* data, size_t i) {
  switch (t) {
    case DType::f32: {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, data + 8 * i, 8);
      return v;
    }
    case DType::f16: {
      uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      return half_to_double(v);
    }
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      uint32_t bits = static_cast<uint32_t>(v) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, data + 4 * i, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, data + 8 * i, 8);
      return static_cast<double>(v);
    }
    case DType::i8:
      return static_cast<double>(static_cast<int8_t>(data[i]));
    case DType::u8:
    case DType::boolean:
      return static_cast<double>(static_cast<uint8_t>(data[i]));
  }
  return 0.0;
}

size_t TensorSpec::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::string TensorSpec::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void to_json(nlohmann::json& j, const TensorSpec& s) {
  j = nlohmann::json{{"name", s.name}, {"dtype", dtype_name(s.dtype)}, {"shape", s.shape}};
}

void from_json(const nlohmann::json& j, TensorSpec& s) {
  if (!j.is_object()) throw UserError("a tensor entry must be an object with name, dtype and shape");
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    throw UserError("a tensor entry has no name");
  s.name = j["name"].get<std::string>();
  if (!j.contains("dtype") || !j["dtype"].is_string()) throw UserError("tensor '" + s.name + "' has no dtype");
  auto dt = parse_dtype(j["dtype"].get<std::string>());
  if (!dt) throw UserError("tensor '" + s.name + "' has unknown dtype '" + j["dtype"].get<std::string>() + "'");
  s.dtype = *dt;
  if (!j.contains("shape") || !j["shape"].is_array()) throw UserError("tensor '" + s.name + "' has no shape array");
  s.shape.clear();
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw UserError("tensor '" + s.name + "' has a shape entry that is not a non-negative integer");
    s.shape.push_back(d.get<int64_t>());
  }
  if (s.shape.size() > MBLAST_MAX_DIMS)
    throw UserError("tensor '" + s.name + "' has more than " + std::to_string(MBLAST_MAX_DIMS) + " dimensions");
}

uint64_t content_hash(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string content_hash_hex(std::span<const std::byte> bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

}  // namespace mblast
