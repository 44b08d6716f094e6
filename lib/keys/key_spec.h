// Key declarations: what a config section accepts, declared once where the thing that reads it is
// registered (a layer in lib/layers/register_layers.cc, an optimizer in lib/optim/optimizers.cc, a
// data format in lib/data/data_formats.cc, the config's own sections in lib/config/config_keys.cc),
// and the one validator that walks a section with them. `trainer schema` and `trainer help` print
// them (lib/schema).
//
// read_keys() checks every declared key of a mapping (type, range or allowed values, required),
// fills in the defaults and rejects every undeclared key with file:line:column and a did-you-mean
// (NodeReader's messages). What it returns, KeyValues, holds only valid values: the code that
// builds a layer, an optimizer or a data source reads them without checking again.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/keys/node_reader.h"

namespace trainer {

struct KeySpec {
  enum class Type {
    integer,
    number,
    boolean,
    string,
    character,     // a string of one character (a delimiter)
    choice,        // one of `allowed`
    string_list,   // a list of strings, or one string for a list of one
    integer_list,  // a list of integers in [lo, hi], or one integer for a list of one
    number_list,   // a list of numbers in [lo, hi], or one number for a list of one
    size,          // an integer in [lo, hi], or a list of one (1-D layers: kernel_size: 3)
    size_pair,     // an integer in [lo, hi] or an [h, w] pair; resolved to the pair
    padding,       // valid | same | an integer in [lo, hi]
    image_size,    // an [h, w] pair (or one integer for both) or {shorter: S}; integers in [lo, hi]
    mapping,       // a nested mapping, kept as it is; its reader validates its keys
    // One of `allowed`, or a number in [lo, hi] (train.loss_scale: auto | dynamic | none | 128).
    choice_or_number,
    // A value of its own form (the layer list, a data source, a name-or-mapping section), read by the
    // code of its section: read_keys() marks it known and checks `required`, nothing else. The
    // schema (lib/schema) describes its form.
    section,
  };
  std::string name;
  Type type = Type::string;
  double lo = 0, hi = 0;             // numbers
  double min_magnitude = 0;          // number: |value| at least this too (0: no bound; a scale)
  int64_t ilo = 0, ihi = 0;          // integers, sizes and integer lists
  std::vector<std::string> allowed;  // choice
  YAML::Node def;                    // the default; null: none (the key has no value unless it is given)
  std::string required;              // non-empty: the key must be given; the message when it is not
  std::string doc;                   // one line for the README and for tools

  // The same key, required; `message` follows the key in the error, e.g. "is required: ...".
  KeySpec require(std::string message) const;
};
using KeySpecs = std::vector<KeySpec>;

// Builders. `doc` is one line saying what the key means.
KeySpec integer_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc);
KeySpec number_key(std::string name, double def, double lo, double hi, std::string doc);
KeySpec bool_key(std::string name, bool def, std::string doc);
KeySpec string_key(std::string name, std::string def, std::string doc);  // def "": no default
KeySpec char_key(std::string name, std::string def, std::string doc);
KeySpec choice_key(std::string name, std::string def, std::vector<std::string> allowed, std::string doc);
KeySpec string_list_key(std::string name, std::string doc);
KeySpec size_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc);       // def 0: none
KeySpec size_pair_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc);  // def 0: none
KeySpec padding_key(std::string doc);
// Resolved to [h, w] or {shorter: S}; read it with KeyValues::node().
KeySpec image_size_key(std::string name, int64_t lo, int64_t hi, std::string doc);
KeySpec mapping_key(std::string name, std::string doc);
KeySpec integer_list_key(std::string name, int64_t lo, int64_t hi, std::string doc);  // no default
KeySpec number_list_key(std::string name, std::vector<double> def, double lo, double hi,
                        std::string doc);  // def {}: none
KeySpec choice_or_number_key(std::string name, std::string def, std::vector<std::string> allowed, double lo,
                             double hi, std::string doc);
KeySpec section_key(std::string name, std::string doc);

// The declaration named `name` in `keys`; InternalError when there is none (a bug).
const KeySpec& key_named(const KeySpecs& keys, const std::string& name);

// A section whose keys depend on one of its keys: optimizer `type`, data source `format`.
struct KeyVariant {
  std::string name;
  KeySpecs keys;
  std::string doc;  // one line: what this variant is (trainer help, docs/config.md)
};
using KeyVariants = std::vector<KeyVariant>;

// The validated values of one mapping, defaults filled. Reading a key that was not declared is
// an InternalError (a bug), never a user error.
class KeyValues {
 public:
  explicit KeyValues(NodeReader reader) : reader_(std::move(reader)) {}

  bool has(const std::string& key) const;  // declared with a default, or given
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;  // integer_list, size_pair
  std::vector<double> numbers(const std::string& key) const;
  std::vector<std::string> strings(const std::string& key) const;
  YAML::Node node(const std::string& key) const;  // the resolved value as it is (image_size)
  const YAML::Node& resolved() const { return reader_.resolved(); }
  // A constraint between keys failed: the same one-line error, at the key's position.
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { reader_.fail(key, what); }

 private:
  YAML::Node at(const std::string& key) const;
  NodeReader reader_;
};

// The validator: reads every key of `keys` from r in declaration order, then r.finish() (an
// undeclared key is an error). `also_known`: keys the caller reads itself (type, name).
KeyValues read_keys(NodeReader& r, const KeySpecs& keys, const std::vector<std::string>& also_known = {});

// For a section with variants: the variant key (a choice of the variants' names, `def` when
// absent), then that variant's keys.
KeyValues read_variant(NodeReader& r, const std::string& key, const std::string& def,
                       const KeyVariants& variants);

}  // namespace trainer
