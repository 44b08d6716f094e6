#include "lib/keys/yaml_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/file_kind.h"
#include "lib/core/printable.h"
#include "lib/core/shape.h"

namespace trainer {

namespace {

std::string position(const std::string& name, const YAML::Mark& m) {
  return name + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

// Counts nodes and nesting while yaml-cpp parses, and stops it at the first one past a limit:
// before the node tree is built, and before yaml-cpp's own recursion goes deep.
class BoundedScan : public YAML::EventHandler {
 public:
  explicit BoundedScan(const std::string& name) : name_(name) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void node(const YAML::Mark& m) {
    if (++nodes_ > kMaxConfigNodes)
      throw ConfigError(
          position(name_, m) + ": the config has more than " + with_thousands(kMaxConfigNodes) +
          " YAML nodes (values, lists and mappings); a config is far smaller: is this the right file?");
  }
  void open(const YAML::Mark& m) {
    node(m);
    if (++depth_ > kMaxConfigDepth)
      throw ConfigError(position(name_, m) + ": lists and mappings are nested more than " +
                        std::to_string(kMaxConfigDepth) + " levels deep; a config needs a handful");
  }
  const std::string& name_;
  int64_t nodes_ = 0;
  int depth_ = 0;
};

void check_encoding(const std::string& text, const std::string& name) {
  size_t bad = first_invalid_utf8(text);
  const size_t nul = text.find('\0');
  if (nul < bad) bad = nul;
  if (bad == std::string::npos) return;
  YAML::Mark m;
  for (size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n')
      ++m.line, m.column = 0;
    else
      ++m.column;
  }
  throw ConfigError(position(name, m) + ": the config is not UTF-8 text (byte " +
                    printable(std::string(1, text[bad])) + "); a config is a YAML text file");
}

void walk(const YAML::Node& node, const std::string& name, const std::string& path, int depth,
          int64_t& visited) {
  // Aliases make the tree a graph that the readers walk as a tree: bound that walk too.
  if (++visited > kMaxConfigNodes || depth > kMaxConfigDepth)
    throw ConfigError(position(name, node.Mark()) +
                      ": through its aliases (*name) the config expands to more than " +
                      with_thousands(kMaxConfigNodes) + " nodes or " + std::to_string(kMaxConfigDepth) +
                      " levels; write the repeated parts out or use fewer aliases");
  const auto child_path = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      walk(node[i], name, child_path(std::to_string(i)), depth + 1, visited);
  } else if (node.IsMap()) {
    std::unordered_map<std::string, YAML::Mark> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar()) {
        const std::string& key = it->first.Scalar();
        auto [first, inserted] = seen.emplace(key, it->first.Mark());
        if (!inserted) {
          const std::string where = first->second.is_null() ? "--set" : position(name, first->second);
          const std::string here = it->first.Mark().is_null() ? name : position(name, it->first.Mark());
          throw ConfigError(here + ": duplicate key '" + child_path(key) + "', also at " + where +
                            "; a key may appear only once in a mapping: delete one of them");
        }
      }
      walk(it->first, name, path, depth + 1, visited);
      walk(it->second, name, child_path(it->first.IsScalar() ? it->first.Scalar() : "?"), depth + 1, visited);
    }
  }
}

bool is_merge_key(const YAML::Node& key) {
  return key.IsScalar() && key.Scalar() == "<<" && key.Tag() != "!";  // "!": quoted, an ordinary key
}

// Applies the merge keys of `node` and everything below it, children first, so that a mapping
// merged in has its own merges applied. Mappings reached again through an alias have no '<<'
// left and are only walked (the walk is bounded: check_duplicate_keys() ran first).
void apply_merges(YAML::Node node, const std::string& name) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) apply_merges(node[i], name);
    return;
  }
  if (!node.IsMap()) return;
  YAML::Node merge_key, merge_value;
  bool merges = false;
  for (auto it = node.begin(); it != node.end(); ++it) {
    apply_merges(it->second, name);
    if (is_merge_key(it->first)) merge_key.reset(it->first), merge_value.reset(it->second), merges = true;
  }
  if (!merges) return;
  const auto bad = [&](const YAML::Node& at, const std::string& what) {
    return ConfigError(position(name, at.Mark()) +
                       ": the merge key '<<' takes a mapping or a list of mappings (" +
                       "<<: *defaults or <<: [*a, *b]); " + what);
  };
  std::vector<YAML::Node> sources;
  if (merge_value.IsMap()) {
    sources.push_back(merge_value);
  } else if (merge_value.IsSequence()) {
    for (size_t i = 0; i < merge_value.size(); ++i) {
      if (!merge_value[i].IsMap())
        throw bad(merge_value[i], "item " + std::to_string(i) + " of its list is not a mapping");
      sources.push_back(merge_value[i]);
    }
  } else {
    throw bad(merge_value, std::string("got ") + (merge_value.IsScalar() ? "a single value" : "nothing"));
  }
  node.remove(merge_key);
  // Keys written in the mapping win over merged ones; of the merged mappings, the first wins.
  std::set<std::string> present;
  for (auto it = node.begin(); it != node.end(); ++it)
    if (it->first.IsScalar()) present.insert(it->first.Scalar());
  for (const YAML::Node& source : sources)
    for (auto it = source.begin(); it != source.end(); ++it)
      if (it->first.IsScalar() && present.insert(it->first.Scalar()).second)
        node.force_insert(it->first, it->second);  // the same nodes: their positions stay
}

}  // namespace

std::string read_config_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw UsageError(path + ": cannot open the config file: " + std::strerror(errno));
  Fd guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw UsageError(path + ": cannot read the config file: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw UsageError(path + ": the config is " + file_kind(st.st_mode) +
                     ", not a regular file; give a YAML file");
  const auto too_big = [&](const std::string& size) {
    return ConfigError(path + ": the config file is " + size + " bytes; at most " +
                       with_thousands(int64_t(kMaxConfigBytes)) +
                       " (16 MiB) are allowed: is this the right file?");
  };
  if (size_t(st.st_size) > kMaxConfigBytes) throw too_big(with_thousands(int64_t(st.st_size)));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError(path + ": cannot read the config file: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kMaxConfigBytes) throw too_big("more than " + with_thousands(int64_t(kMaxConfigBytes)));
  }
  return text;
}

YAML::Node load_yaml_document(const std::string& text, const std::string& name) {
  if (text.size() > kMaxConfigBytes)
    throw ConfigError(name + ": the config is " + with_thousands(int64_t(text.size())) + " bytes; at most " +
                      with_thousands(int64_t(kMaxConfigBytes)) + " (16 MiB) are allowed");
  check_encoding(text, name);
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    BoundedScan first(name), second(name);
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second))
      throw ConfigError(name +
                        ": the config holds more than one YAML document (separated by '---'); "
                        "yaml-cpp would read only the first: give one document");
    root = YAML::Load(text);  // within the bounds checked above
  } catch (const YAML::ParserException& e) {
    throw ConfigError(position(name, e.mark) + ": invalid YAML: " + e.msg);
  }
  check_duplicate_keys(root, name);
  if (root) apply_merges(root, name);
  return root;
}

void check_duplicate_keys(const YAML::Node& node, const std::string& name, const std::string& path) {
  int64_t visited = 0;
  if (node) walk(node, name, path, 0, visited);
}

}  // namespace trainer
