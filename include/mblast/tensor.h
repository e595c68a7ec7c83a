// Element types, tensor descriptions and host tensors. No backend code here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "mblast/abi.h"

namespace mblast {

enum class DType : int {
  f32 = MBLAST_F32,
  f16 = MBLAST_F16,
  bf16 = MBLAST_BF16,
  f64 = MBLAST_F64,
  i32 = MBLAST_I32,
  i64 = MBLAST_I64,
  i8 = MBLAST_I8,
  u8 = MBLAST_U8,
  boolean = MBLAST_BOOL
};  // "bool": one byte, 0 or 1

size_t dtype_size(DType t);
bool dtype_is_float(DType t);
std::string_view dtype_name(DType t);                                 // "f32", as in problem.json
std::string_view dtype_safetensors_name(DType t);                     // "F32", as in safetensors headers
std::optional<DType> parse_dtype(std::string_view name);              // "f32"
std::optional<DType> parse_safetensors_dtype(std::string_view name);  // "F32"

// Reads element i of a buffer of type t as a double (f16/bf16 converted exactly).
double element_as_double(DType t, const std::byte* data, size_t i);

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;

  size_t numel() const;
  size_t nbytes() const { return numel() * dtype_size(dtype); }
  std::string shape_string() const;  // "[512, 1024]"
};

void to_json(nlohmann::json& j, const TensorSpec& s);
void from_json(const nlohmann::json& j, TensorSpec& s);  // throws UserError with a reason

struct HostTensor {
  TensorSpec spec;
  std::vector<std::byte> data;  // exactly spec.nbytes()

  std::span<const std::byte> bytes() const { return data; }
};

// 64-bit content hash (xxh3) used for "inputs unchanged" checks and content addressing.
uint64_t content_hash(std::span<const std::byte> bytes);
std::string content_hash_hex(std::span<const std::byte> bytes);  // 32 hex digits (xxh3-128)
inline std::string content_hash_hex(std::string_view text) {
  return content_hash_hex(std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace mblast
