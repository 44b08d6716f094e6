#include "lib/export/onnx_writer.h"

#include <cstring>

namespace trainer::onnx {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kBytes = 2, kFixed32 = 5;

// Appends v's bytes in little-endian order, whatever the host's order.
template <typename T>
void append_le(std::string& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  if (first != 1)  // big-endian host
    for (size_t k = 0; k < sizeof(T) / 2; ++k) std::swap(b[k], b[sizeof(T) - 1 - k]);
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}

// Fields written only when set, as protobuf writes an optional field only when it has one.
void string_if_set(ProtoWriter& w, int field, const std::string& s) {
  if (!s.empty()) w.bytes_field(field, s);
}

std::string encode_shape(const std::vector<Dim>& dims) {  // TensorShapeProto
  ProtoWriter shape;
  for (const Dim& d : dims) {
    ProtoWriter dim;  // TensorShapeProto.Dimension: dim_value 1 | dim_param 2
    if (d.param.empty())
      dim.int_field(1, d.value);
    else
      dim.bytes_field(2, d.param);
    shape.bytes_field(1, dim.bytes());
  }
  return shape.bytes();
}

}  // namespace

void ProtoWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out_.push_back(char(uint8_t(v)));
}

void ProtoWriter::int_field(int field, int64_t v) {
  tag(field, kVarint);
  varint(uint64_t(v));  // a negative value takes ten bytes, as protobuf writes it
}

void ProtoWriter::float_field(int field, float v) {
  tag(field, kFixed32);
  append_le(out_, v);
}

void ProtoWriter::bytes_field(int field, const std::string& bytes) {
  tag(field, kBytes);
  varint(bytes.size());
  out_.append(bytes);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Tensor Tensor::floats(std::string name, std::vector<int64_t> dims, const float* values) {
  Tensor t;
  t.name = std::move(name);
  t.type = DataType::float32;
  t.dims = std::move(dims);
  const int64_t n = t.numel();
  t.raw.reserve(size_t(n) * sizeof(float));
  for (int64_t k = 0; k < n; ++k) append_le(t.raw, values[k]);
  return t;
}

Tensor Tensor::floats(std::string name, std::vector<int64_t> dims, const std::vector<float>& values) {
  return floats(std::move(name), std::move(dims), values.data());
}

Tensor Tensor::int64s(std::string name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Tensor t;
  t.name = std::move(name);
  t.type = DataType::int64;
  t.dims = std::move(dims);
  for (int64_t v : values) append_le(t.raw, v);
  return t;
}

Attribute Attribute::of_float(std::string name, float v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::f;
  a.f = v;
  return a;
}

Attribute Attribute::of_int(std::string name, int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::i;
  a.i = v;
  return a;
}

Attribute Attribute::of_string(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::s;
  a.s = std::move(v);
  return a;
}

Attribute Attribute::of_tensor(std::string name, Tensor v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::t;
  a.t.push_back(std::move(v));
  return a;
}

Attribute Attribute::of_ints(std::string name, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::ints;
  a.ints = std::move(v);
  return a;
}

Attribute Attribute::of_floats(std::string name, std::vector<float> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Kind::floats;
  a.floats = std::move(v);
  return a;
}

// TensorProto: dims 1, data_type 2, name 8, raw_data 9.
std::string encode(const Tensor& t) {
  ProtoWriter w;
  for (int64_t d : t.dims) w.int_field(1, d);
  w.int_field(2, int32_t(t.type));
  string_if_set(w, 8, t.name);
  w.bytes_field(9, t.raw);
  return w.bytes();
}

// AttributeProto: name 1, f 2, i 3, s 4, t 5, floats 7, ints 8, type 20.
std::string encode(const Attribute& a) {
  ProtoWriter w;
  w.bytes_field(1, a.name);
  switch (a.kind) {
    case Attribute::Kind::f:
      w.float_field(2, a.f);
      break;
    case Attribute::Kind::i:
      w.int_field(3, a.i);
      break;
    case Attribute::Kind::s:
      w.bytes_field(4, a.s);
      break;
    case Attribute::Kind::t:
      w.bytes_field(5, encode(a.t.at(0)));
      break;
    case Attribute::Kind::floats:
      for (float v : a.floats) w.float_field(7, v);
      break;
    case Attribute::Kind::ints:
      for (int64_t v : a.ints) w.int_field(8, v);
      break;
  }
  w.int_field(20, int64_t(a.kind));
  return w.bytes();
}

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
std::string encode(const Node& n) {
  ProtoWriter w;
  for (const std::string& s : n.inputs) w.bytes_field(1, s);
  for (const std::string& s : n.outputs) w.bytes_field(2, s);
  string_if_set(w, 3, n.name);
  w.bytes_field(4, n.op_type);
  for (const Attribute& a : n.attributes) w.bytes_field(5, encode(a));
  string_if_set(w, 7, n.domain);
  return w.bytes();
}

// ValueInfoProto: name 1, type 2 (TypeProto: tensor_type 1 (elem_type 1, shape 2)), doc_string 3.
std::string encode(const ValueInfo& v) {
  ProtoWriter tensor_type;
  tensor_type.int_field(1, int32_t(v.type));
  tensor_type.bytes_field(2, encode_shape(v.dims));
  ProtoWriter type;
  type.bytes_field(1, tensor_type.bytes());
  ProtoWriter w;
  w.bytes_field(1, v.name);
  w.bytes_field(2, type.bytes());
  string_if_set(w, 3, v.doc);
  return w.bytes();
}

// GraphProto: node 1, name 2, initializer 5, doc_string 10, input 11, output 12.
std::string encode(const Graph& g) {
  ProtoWriter w;
  for (const Node& n : g.nodes) w.bytes_field(1, encode(n));
  string_if_set(w, 2, g.name);
  for (const Tensor& t : g.initializers) w.bytes_field(5, encode(t));
  string_if_set(w, 10, g.doc);
  for (const ValueInfo& v : g.inputs) w.bytes_field(11, encode(v));
  for (const ValueInfo& v : g.outputs) w.bytes_field(12, encode(v));
  return w.bytes();
}

// ModelProto: ir_version 1, producer_name 2, producer_version 3, domain 4, model_version 5,
// doc_string 6, graph 7, opset_import 8 (domain 1, always written as onnx does; version 2),
// metadata_props 14 (key 1, value 2).
std::string encode(const Model& m) {
  ProtoWriter w;
  w.int_field(1, m.ir_version);
  string_if_set(w, 2, m.producer_name);
  string_if_set(w, 3, m.producer_version);
  string_if_set(w, 4, m.domain);
  if (m.model_version != 0) w.int_field(5, m.model_version);
  string_if_set(w, 6, m.doc);
  w.bytes_field(7, encode(m.graph));
  for (const auto& [domain, version] : m.opsets) {
    ProtoWriter op;
    op.bytes_field(1, domain);
    op.int_field(2, version);
    w.bytes_field(8, op.bytes());
  }
  for (const auto& [key, value] : m.metadata) {
    ProtoWriter kv;
    kv.bytes_field(1, key);
    kv.bytes_field(2, value);
    w.bytes_field(14, kv.bytes());
  }
  return w.bytes();
}

}  // namespace trainer::onnx
