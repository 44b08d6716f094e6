// The hand-written protobuf writer of lib/export/onnx_writer.h: protobuf's wire encodings, and a
// whole ModelProto byte for byte against what onnx's own serializer writes for the same model.
#include <catch2/catch.hpp>
#include <string>

#include "lib/export/onnx_writer.h"

using namespace trainer::onnx;

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

}  // namespace

TEST_CASE("protobuf varints are 7 bits a byte and low bits first; negative ints take ten bytes") {
  ProtoWriter w;
  w.varint(0);
  w.varint(1);
  w.varint(127);
  w.varint(128);
  w.varint(150);  // the protobuf documentation's example: 96 01
  w.varint(300);
  CHECK(hex(w.bytes()) == "00017f80019601ac02");
  ProtoWriter n;
  n.int_field(1, -1);
  CHECK(hex(n.bytes()) == "08ffffffffffffffffff01");
}

TEST_CASE("protobuf fields carry field number and wire type in their tag") {
  ProtoWriter w;
  w.int_field(2, 7);        // tag 0x10: field 2, varint
  w.float_field(2, 0.5f);   // tag 0x15: field 2, fixed32, little-endian 0x3f000000
  w.bytes_field(20, "ab");  // tag 0xa2 0x01: field 20, length-delimited
  w.bytes_field(1, "");     // an empty string is tag and length 0
  CHECK(hex(w.bytes()) == "1007" + std::string("150000003f") + "a201026162" + "0a00");
}

TEST_CASE("tensors store their values as little-endian raw_data after dims and data_type") {
  const Tensor f = Tensor::floats("w", {2}, std::vector<float>{1.f, -2.f});
  CHECK(f.numel() == 2);
  // dims 2 | data_type 1 (FLOAT) | name "w" | raw_data, 8 bytes: 1.0f, -2.0f
  CHECK(hex(encode(f)) == "0802" + std::string("1001") + "420177" + "4a08" + "0000803f000000c0");
  const Tensor i = Tensor::int64s("i", {1}, {-2});
  CHECK(hex(encode(i)) == "0801" + std::string("1007") + "420169" + "4a08" + "feffffffffffffff");
  const Tensor scalar = Tensor::floats("s", {}, std::vector<float>{3.f});
  CHECK(scalar.numel() == 1);
  CHECK(hex(encode(scalar)) == "1001" + std::string("420173") + "4a04" + "00004040");  // a scalar has no dims
}

// The golden bytes are onnx 1.12's (Debian's python3-onnx) SerializeToString() of the model built
// here, made with onnx.helper (make_node sorts attributes by name, as this model lists them):
//   Gemm(x, W) -> h, name fc, alpha=0.5, transB=1; Pad(h) -> y, mode="edge", pads=[0, -1],
//   scales=[1.5, -2.0]; Constant -> k, value = tensor c (0.25); initializers W (2x3 floats 1..6)
//   and b (int64 [-1, 300]); input x and output y (batch, 3) and (batch, 2); opset ("", 17),
//   ir_version 8, metadata {k: v}.
TEST_CASE("a ModelProto encodes to the bytes onnx's own serializer writes for it") {
  Model m;
  m.ir_version = 8;
  m.producer_name = "trainer";
  m.producer_version = "0.1.0";
  m.doc = "model doc";
  m.metadata = {{"k", "v"}};
  Graph& g = m.graph;
  g.name = "g";
  g.doc = "graph doc";
  Node gemm{
      "Gemm", "fc", {"x", "W"}, {"h"}, {Attribute::of_float("alpha", 0.5f), Attribute::of_int("transB", 1)},
      ""};
  Node pad{"Pad",
           "",
           {"h"},
           {"y"},
           {Attribute::of_string("mode", "edge"), Attribute::of_ints("pads", {0, -1}),
            Attribute::of_floats("scales", {1.5f, -2.f})},
           ""};
  Node constant{"Constant", "", {}, {"k"}, {Attribute::of_tensor("value", Tensor::floats("c", {}, {0.25f}))},
                ""};
  g.nodes = {gemm, pad, constant};
  g.initializers = {Tensor::floats("W", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}),
                    Tensor::int64s("b", {2}, {-1, 300})};
  g.inputs = {ValueInfo{"x", DataType::float32, {Dim{0, "batch"}, Dim{3, ""}}, ""}};
  g.outputs = {ValueInfo{"y", DataType::float32, {Dim{0, "batch"}, Dim{2, ""}}, ""}};
  const std::string golden =
      "08081207747261696e65721a05302e312e3032096d6f64656c20646f633aac020a330a01780a01571201681a026663220447"
      "656d6d2a0f0a05616c706861150000003fa001012a0d0a067472616e73421801a001020a4b0a016812017922035061642a0f"
      "0a046d6f6465220465646765a001032a160a0470616473400040ffffffffffffffffff01a001072a150a067363616c65733d"
      "0000c03f3d000000c0a001060a2612016b2208436f6e7374616e742a170a0576616c75652a0b10014201634a040000803ea0"
      "01041201672a230802080310014201574a180000803f0000004000004040000080400000a0400000c0402a19080210074201"
      "624a10ffffffffffffffff2c010000000000005209677261706820646f635a180a017812130a110801120d0a071205626174"
      "63680a02080362180a017912130a110801120d0a07120562617463680a02080242040a00101172060a016b120176";
  CHECK(hex(encode(m)) == golden);
}
