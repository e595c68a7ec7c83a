// The safetensors container: an 8-byte little-endian header length, a JSON header that maps
// tensor names to dtype, shape and byte offsets, then the raw bytes. Used for problem data and
// for the payload of runner messages.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "mblast/tensor.h"

namespace mblast {

struct TensorSet {
  std::vector<HostTensor> tensors;
  std::map<std::string, std::string> metadata;

  const HostTensor* find(std::string_view name) const;
  HostTensor& add(HostTensor t);
};

// Parses a safetensors blob. Throws UserError naming what is wrong (truncated file, offsets out
// of range, unknown dtype, overlapping tensors).
TensorSet parse_safetensors(std::span<const std::byte> blob);
TensorSet load_safetensors(const std::filesystem::path& path);

std::vector<std::byte> serialize_safetensors(const TensorSet& set);
// Writes to a temporary file beside `path` and renames it, so readers never see half a file.
void save_safetensors(const std::filesystem::path& path, const TensorSet& set);

}  // namespace mblast
