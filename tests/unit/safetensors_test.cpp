#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "mblast/error.h"
#include "mblast/safetensors.h"

namespace mblast {
namespace {

HostTensor make(const std::string& name, DType t, std::vector<int64_t> shape, uint8_t fill) {
  HostTensor h;
  h.spec = {name, t, std::move(shape)};
  h.data.assign(h.spec.nbytes(), std::byte{fill});
  return h;
}

TEST(Safetensors, RoundTripKeepsNamesShapesBytesAndMetadata) {
  TensorSet s;
  s.add(make("a", DType::f32, {2, 3}, 1));
  s.add(make("b", DType::i64, {5}, 2));
  s.add(make("c", DType::f16, {1, 1, 4}, 3));
  s.metadata["who"] = "test";
  auto blob = serialize_safetensors(s);
  TensorSet back = parse_safetensors(blob);
  ASSERT_EQ(back.tensors.size(), 3u);
  for (const auto& t : s.tensors) {
    const HostTensor* u = back.find(t.spec.name);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->spec.dtype, t.spec.dtype);
    EXPECT_EQ(u->spec.shape, t.spec.shape);
    EXPECT_EQ(u->data, t.data);
  }
  EXPECT_EQ(back.metadata.at("who"), "test");
}

TEST(Safetensors, EmptySetIsValid) {
  auto blob = serialize_safetensors(TensorSet{});
  EXPECT_TRUE(parse_safetensors(blob).tensors.empty());
}

TEST(Safetensors, RejectsTruncatedAndInconsistentFiles) {
  TensorSet s;
  s.add(make("a", DType::f32, {4}, 7));
  auto blob = serialize_safetensors(s);
  EXPECT_THROW(parse_safetensors(std::span(blob).first(4)), UserError);
  EXPECT_THROW(parse_safetensors(std::span(blob).first(blob.size() - 1)), UserError);  // data cut short

  auto forge = [](const std::string& header, size_t body) {
    std::vector<std::byte> b(8 + header.size() + body);
    uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, header.data(), header.size());
    return b;
  };
  EXPECT_THROW(parse_safetensors(forge(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16)), UserError)
      << "size must match the shape";
  EXPECT_THROW(parse_safetensors(forge(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4)), UserError);
  EXPECT_THROW(parse_safetensors(forge(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                       12)),
               UserError)
      << "overlapping tensors";
  EXPECT_THROW(parse_safetensors(forge("not json", 0)), UserError);
}

TEST(Safetensors, ViewsLayoutsAndMappedFilesAgreeWithTheCopies) {
  TensorSet s;
  s.add(make("x", DType::f32, {3, 5}, 9));
  s.add(make("idx", DType::i64, {7}, 4));
  auto blob = serialize_safetensors(s);

  // Views point into the blob itself.
  TensorViews v = view_safetensors(blob);
  ASSERT_EQ(v.tensors.size(), 2u);
  const TensorView* x = v.find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_GE(x->data.data(), blob.data());
  EXPECT_LE(x->data.data() + x->data.size(), blob.data() + blob.size());
  EXPECT_TRUE(std::equal(x->data.begin(), x->data.end(), s.find("x")->data.begin()));

  // A layout filled tensor by tensor is the same blob serialize_safetensors makes.
  SafetensorsLayout l = layout_safetensors({s.tensors[0].spec, s.tensors[1].spec});
  ASSERT_EQ(l.offsets.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    std::memcpy(l.blob.data() + l.offsets[i], s.tensors[i].data.data(), s.tensors[i].data.size());
  EXPECT_EQ(l.blob, blob);

  // A mapped file gives the same tensors; a damaged one is a UserError naming the file.
  const auto path =
      std::filesystem::temp_directory_path() / ("mblast-map-" + std::to_string(::getpid()) + ".safetensors");
  save_safetensors(path, s);
  {
    MappedSafetensors m(path);
    const TensorView* idx = m.tensors().find("idx");
    ASSERT_NE(idx, nullptr);
    EXPECT_EQ(idx->spec.shape, std::vector<int64_t>{7});
    EXPECT_TRUE(std::equal(idx->data.begin(), idx->data.end(), s.find("idx")->data.begin()));
    EXPECT_EQ(load_safetensors(path).find("idx")->data, s.find("idx")->data);
  }
  std::filesystem::resize_file(path, blob.size() - 3);
  try {
    MappedSafetensors bad(path);
    ADD_FAILURE() << "a truncated file was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_safetensors(path), UserError);
  std::filesystem::remove(path);
  EXPECT_THROW(MappedSafetensors{path}, UserError);  // missing
}

TEST(Tensor, ElementConversionCoversHalfAndBfloat) {
  uint16_t h = 0x3C00;   // 1.0 in f16
  uint16_t bf = 0xC000;  // -2.0 in bf16
  EXPECT_EQ(element_as_double(DType::f16, reinterpret_cast<const std::byte*>(&h), 0), 1.0);
  EXPECT_EQ(element_as_double(DType::bf16, reinterpret_cast<const std::byte*>(&bf), 0), -2.0);
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_FALSE(parse_dtype("float32").has_value());
}

}  // namespace
}  // namespace mblast
