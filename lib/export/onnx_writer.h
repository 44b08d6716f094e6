// The ONNX file format: the messages of onnx.proto that a trained network needs, and their
// protobuf encoding, written by hand.
//
// Why by hand: a model file uses one small family of messages (ModelProto, GraphProto, NodeProto,
// AttributeProto, TensorProto, ValueInfoProto, TypeProto, TensorShapeProto, OperatorSetIdProto,
// StringStringEntryProto), and protobuf's wire format for them is four encodings: varints (wire
// type 0), 32-bit floats (5), length-delimited bytes and sub-messages (2). Writing those here
// costs ~150 lines and keeps libprotobuf, protoc code generation and onnx.proto out of the build.
// Only writing is needed; nothing here reads ONNX.
//
// Fields are written in field-number order, as protobuf's own serializers do, and repeated
// scalars unpacked (onnx.proto is proto2, where that is the default), so a message encodes to the
// same bytes as onnx's SerializeToString() (tests/test_onnx_writer.cc checks golden bytes made so).
// Field numbers are onnx.proto's (IR version 8, the one of opset 17).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainer::onnx {

// Appends protobuf fields to a byte string.
class ProtoWriter {
 public:
  void varint(uint64_t v);  // a bare varint, no tag
  void tag(int field, int wire_type) { varint(uint64_t(field) << 3 | uint64_t(wire_type)); }
  void int_field(int field, int64_t v);                   // int32/int64/enum: two's complement as a varint
  void float_field(int field, float v);                   // fixed 32 bits, little-endian
  void bytes_field(int field, const std::string& bytes);  // strings, bytes, sub-messages
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// TensorProto.DataType values used here.
enum class DataType : int32_t { float32 = 1, uint8 = 2, int32 = 6, int64 = 7 };

struct Tensor {  // TensorProto: dims, data_type, name, raw_data
  std::string name;
  DataType type = DataType::float32;
  std::vector<int64_t> dims;
  std::string raw;  // little-endian values, row-major

  static Tensor floats(std::string name, std::vector<int64_t> dims, const float* values);
  static Tensor floats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values);
  static Tensor int64s(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values);
  int64_t numel() const;
};

struct Attribute {  // AttributeProto: one of f, i, s, t, floats, ints, with its type
  enum class Kind { f = 1, i = 2, s = 3, t = 4, floats = 6, ints = 7 };
  std::string name;
  Kind kind = Kind::i;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<Tensor> t;  // one tensor for Kind::t (a vector keeps Tensor complete here)
  std::vector<float> floats;
  std::vector<int64_t> ints;

  static Attribute of_float(std::string name, float v);
  static Attribute of_int(std::string name, int64_t v);
  static Attribute of_string(std::string name, std::string v);
  static Attribute of_tensor(std::string name, Tensor v);
  static Attribute of_ints(std::string name, std::vector<int64_t> v);
  static Attribute of_floats(std::string name, std::vector<float> v);
};

struct Node {  // NodeProto
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attributes;
  std::string domain;  // "" = the default ONNX domain
};

// One dimension of a value's shape: a size, or a symbolic name ("batch") when `param` is set.
struct Dim {
  int64_t value = 0;
  std::string param;
};

struct ValueInfo {  // ValueInfoProto of a tensor: name, element type, shape
  std::string name;
  DataType type = DataType::float32;
  std::vector<Dim> dims;
  std::string doc;
};

struct Graph {  // GraphProto
  std::string name, doc;
  std::vector<Node> nodes;
  std::vector<Tensor> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct Model {  // ModelProto
  int64_t ir_version = 8;
  std::vector<std::pair<std::string, int64_t>> opsets{{"", 17}};  // (domain, version)
  std::string producer_name, producer_version, domain, doc;
  int64_t model_version = 0;  // written when non-zero
  Graph graph;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props
};

// The protobuf encoding of each message (what SerializeToString() gives).
std::string encode(const Tensor& t);
std::string encode(const Attribute& a);
std::string encode(const Node& n);
std::string encode(const ValueInfo& v);
std::string encode(const Graph& g);
std::string encode(const Model& m);

}  // namespace trainer::onnx
