#include "mblast/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <unistd.h>

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

TensorSet parse_safetensors(std::span<const std::byte> blob) {
  if (blob.size() < 8) throw UserError("safetensors: truncated (no header length)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(blob[i]);
  if (header_len > blob.size() - 8) throw UserError("safetensors: header length runs past the end of the data");
  const char* hp = reinterpret_cast<const char*>(blob.data() + 8);
  nlohmann::json header = nlohmann::json::parse(hp, hp + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object()) throw UserError("safetensors: header is not a JSON object");
  const std::span<const std::byte> body = blob.subspan(8 + header_len);

  TensorSet set;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) set.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw UserError("safetensors: entry '" + it.key() + "' lacks dtype, shape or data_offsets");
    auto dt = parse_safetensors_dtype(e["dtype"].get<std::string>());
    if (!dt) throw UserError("safetensors: entry '" + it.key() + "' has unsupported dtype " + e["dtype"].dump());
    HostTensor t;
    t.spec.name = it.key();
    t.spec.dtype = *dt;
    for (const auto& d : e["shape"]) t.spec.shape.push_back(d.get<int64_t>());
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2) throw UserError("safetensors: entry '" + it.key() + "' has bad data_offsets");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > body.size())
      throw UserError("safetensors: entry '" + it.key() + "' points outside the data");
    if (end - begin != t.spec.nbytes())
      throw UserError("safetensors: entry '" + it.key() + "' has " + std::to_string(end - begin) +
                      " bytes but its shape needs " + std::to_string(t.spec.nbytes()));
    ranges.emplace_back(begin, end);
    t.data.assign(body.begin() + static_cast<ptrdiff_t>(begin), body.begin() + static_cast<ptrdiff_t>(end));
    set.tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw UserError("safetensors: two entries overlap");
  return set;
}

TensorSet load_safetensors(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw UserError("cannot open " + path.string());
  std::vector<char> raw(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size()))) throw UserError("cannot read " + path.string());
  try {
    return parse_safetensors(std::as_bytes(std::span(raw)));
  } catch (const UserError& e) {
    throw UserError(path.string() + ": " + e.what());
  }
}

std::vector<std::byte> serialize_safetensors(const TensorSet& set) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& t : set.tensors) {
    header[t.spec.name] = {{"dtype", dtype_safetensors_name(t.spec.dtype)},
                           {"shape", t.spec.shape},
                           {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  if (!set.metadata.empty()) header["__metadata__"] = set.metadata;
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // keep the body 8-byte aligned
  std::vector<std::byte> out(8 + h.size() + offset);
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((len >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, h.data(), h.size());
  size_t pos = 8 + h.size();
  for (const auto& t : set.tensors) {
    if (!t.data.empty()) std::memcpy(out.data() + pos, t.data.data(), t.data.size());
    pos += t.data.size();
  }
  return out;
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
