#include "mblast/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mblast/error.h"

namespace mblast {

const HostTensor* TensorSet::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.spec.name == name) return &t;
  return nullptr;
}

HostTensor& TensorSet::add(HostTensor t) {
  tensors.push_back(std::move(t));
  return tensors.back();
}

const TensorView* TensorViews::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.spec.name == name) return &t;
  return nullptr;
}

namespace {
struct Entry {
  TensorSpec spec;
  uint64_t begin = 0, end = 0;  // byte range in the body
};

uint64_t header_length(const std::byte* p) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(p[i]);
  return n;
}

// The entries of a header whose body has `body_size` bytes, checked against it.
std::vector<Entry> parse_header(std::string_view text, uint64_t body_size,
                                std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (header.is_discarded() || !header.is_object()) throw UserError("safetensors: header is not a JSON object");
  std::vector<Entry> entries;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw UserError("safetensors: entry '" + it.key() + "' lacks dtype, shape or data_offsets");
    auto dt = parse_safetensors_dtype(e["dtype"].get<std::string>());
    if (!dt) throw UserError("safetensors: entry '" + it.key() + "' has unsupported dtype " + e["dtype"].dump());
    Entry t;
    t.spec.name = it.key();
    t.spec.dtype = *dt;
    for (const auto& d : e["shape"]) t.spec.shape.push_back(d.get<int64_t>());
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      throw UserError("safetensors: entry '" + it.key() + "' has bad data_offsets");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end || t.end > body_size)
      throw UserError("safetensors: entry '" + it.key() + "' points outside the data");
    if (t.end - t.begin != t.spec.nbytes())
      throw UserError("safetensors: entry '" + it.key() + "' has " + std::to_string(t.end - t.begin) +
                      " bytes but its shape needs " + std::to_string(t.spec.nbytes()));
    ranges.emplace_back(t.begin, t.end);
    entries.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw UserError("safetensors: two entries overlap");
  return entries;
}
}  // namespace

TensorViews view_safetensors(std::span<const std::byte> blob) {
  if (blob.size() < 8) throw UserError("safetensors: truncated (no header length)");
  const uint64_t header_len = header_length(blob.data());
  if (header_len > blob.size() - 8) throw UserError("safetensors: header length runs past the end of the data");
  const std::span<const std::byte> body = blob.subspan(8 + header_len);
  TensorViews set;
  const std::string_view text(reinterpret_cast<const char*>(blob.data() + 8), header_len);
  for (auto& e : parse_header(text, body.size(), set.metadata))
    set.tensors.push_back({std::move(e.spec), body.subspan(e.begin, e.end - e.begin)});
  return set;
}

TensorSet parse_safetensors(std::span<const std::byte> blob) {
  TensorViews views = view_safetensors(blob);
  TensorSet set;
  set.metadata = std::move(views.metadata);
  for (auto& v : views.tensors) {
    HostTensor t;
    t.spec = std::move(v.spec);
    t.data.assign(v.data.begin(), v.data.end());
    set.tensors.push_back(std::move(t));
  }
  return set;
}

TensorSet load_safetensors(const std::filesystem::path& path) {
  // Each tensor is read from the file straight into its own buffer: no copy of the whole file.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw UserError("cannot open " + path.string());
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  try {
    std::byte len[8];
    if (size < 8 || !in.read(reinterpret_cast<char*>(len), 8))
      throw UserError("safetensors: truncated (no header length)");
    const uint64_t header_len = header_length(len);
    if (header_len > size - 8) throw UserError("safetensors: header length runs past the end of the data");
    std::string text(header_len, '\0');
    if (!in.read(text.data(), static_cast<std::streamsize>(header_len)))
      throw UserError("cannot read " + path.string());
    TensorSet set;
    for (auto& e : parse_header(text, size - 8 - header_len, set.metadata)) {
      HostTensor t;
      t.spec = std::move(e.spec);
      t.data.resize(e.end - e.begin);
      in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
      if (!in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(t.data.size())))
        throw UserError("cannot read " + path.string());
      set.tensors.push_back(std::move(t));
    }
    return set;
  } catch (const UserError& e) {
    throw UserError(path.string() + ": " + e.what());
  }
}

MappedSafetensors::MappedSafetensors(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot open " + path.string());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw UserError("cannot read " + path.string());
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    addr_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr_ == MAP_FAILED) addr_ = nullptr;
  }
  ::close(fd);
  if (!addr_)
    throw UserError(path.string() + ": " +
                    (size_ == 0 ? "safetensors: truncated (no header length)" : "cannot map the file"));
  try {
    views_ = view_safetensors(std::span(static_cast<const std::byte*>(addr_), size_));
  } catch (const UserError& e) {
    ::munmap(addr_, size_);
    throw UserError(path.string() + ": " + e.what());
  }
}

MappedSafetensors::~MappedSafetensors() {
  if (addr_) ::munmap(addr_, size_);
}

namespace {
// The header of a blob holding these tensors back to back, padded so the body stays 8-byte aligned.
std::string header_for(const std::vector<const TensorSpec*>& specs, const std::map<std::string, std::string>& metadata,
                       std::vector<size_t>* offsets) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const TensorSpec* s : specs) {
    header[s->name] = {{"dtype", dtype_safetensors_name(s->dtype)},
                       {"shape", s->shape},
                       {"data_offsets", {offset, offset + s->nbytes()}}};
    offsets->push_back(offset);
    offset += s->nbytes();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');
  return h;
}

SafetensorsLayout layout_for(const std::vector<const TensorSpec*>& specs,
                             const std::map<std::string, std::string>& metadata) {
  SafetensorsLayout l;
  const std::string h = header_for(specs, metadata, &l.offsets);
  size_t body = 0;
  for (const TensorSpec* s : specs) body += s->nbytes();
  l.blob.resize(8 + h.size() + body);
  const uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) l.blob[i] = static_cast<std::byte>((len >> (8 * i)) & 0xff);
  std::memcpy(l.blob.data() + 8, h.data(), h.size());
  for (auto& o : l.offsets) o += 8 + h.size();
  return l;
}
}  // namespace

SafetensorsLayout layout_safetensors(const std::vector<TensorSpec>& specs) {
  std::vector<const TensorSpec*> ptrs;
  for (const auto& s : specs) ptrs.push_back(&s);
  return layout_for(ptrs, {});
}

std::vector<std::byte> serialize_safetensors(const TensorSet& set) {
  std::vector<const TensorSpec*> ptrs;
  for (const auto& t : set.tensors) {
    if (t.data.size() != t.spec.nbytes())
      throw Error("safetensors: tensor '" + t.spec.name + "' holds " + std::to_string(t.data.size()) +
                  " bytes, its shape needs " + std::to_string(t.spec.nbytes()));
    ptrs.push_back(&t.spec);
  }
  SafetensorsLayout l = layout_for(ptrs, set.metadata);
  for (size_t i = 0; i < set.tensors.size(); ++i)
    if (!set.tensors[i].data.empty())
      std::memcpy(l.blob.data() + l.offsets[i], set.tensors[i].data.data(), set.tensors[i].data.size());
  return std::move(l.blob);
}

void save_safetensors(const std::filesystem::path& path, const TensorSet& set) {
  const auto blob = serialize_safetensors(set);
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp);
    out.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    if (!out) throw Error("short write to " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace mblast
