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

// The tensors of a blob, read in place: each view points into the blob, which must outlive it.
struct TensorView {
  TensorSpec spec;
  std::span<const std::byte> data;
};
struct TensorViews {
  std::vector<TensorView> tensors;
  std::map<std::string, std::string> metadata;

  const TensorView* find(std::string_view name) const;
};

// Parses a safetensors blob. Throws UserError naming what is wrong (truncated file, offsets out
// of range, unknown dtype, overlapping tensors). view_ copies nothing; parse_ copies the data.
TensorViews view_safetensors(std::span<const std::byte> blob);
TensorSet parse_safetensors(std::span<const std::byte> blob);
TensorSet load_safetensors(const std::filesystem::path& path);

// A safetensors file mapped read-only: its tensors are views into the page cache, so a large
// file costs neither a copy nor fresh memory. Files are replaced by rename (save_safetensors),
// never rewritten in place, so a mapping stays valid while it lives.
class MappedSafetensors {
 public:
  explicit MappedSafetensors(const std::filesystem::path& path);  // throws UserError
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;
  const TensorViews& tensors() const { return views_; }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
  TensorViews views_;
};

std::vector<std::byte> serialize_safetensors(const TensorSet& set);

// A blob laid out for these tensors with the data left to be written: `blob` holds the header,
// and tensor i's bytes go at blob[offsets[i]] .. + specs[i].nbytes(). Lets a producer write
// (or download) tensors straight into a message, and reuse the blob for the next one.
struct SafetensorsLayout {
  std::vector<std::byte> blob;
  std::vector<size_t> offsets;
};
SafetensorsLayout layout_safetensors(const std::vector<TensorSpec>& specs);
// Writes to a temporary file beside `path` and renames it, so readers never see half a file.
void save_safetensors(const std::filesystem::path& path, const TensorSet& set);

}  // namespace mblast
