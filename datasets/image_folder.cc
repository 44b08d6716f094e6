// Listing image folders and image lists with std::filesystem, every call with an error_code (a
// file system error is a DataError naming the entry, never an exception of another type).
#include "datasets/image_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>

#include "datasets/csv_records.h"
#include "datasets/file_bytes.h"
#include "datasets/image_decode.h"
#include "lib/core/error.h"

namespace trainer {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string joined(const std::vector<std::string>& names, size_t most = 12) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// The first bytes of a file are a PNG or JPEG signature (false when it cannot be read).
bool starts_like_image(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t head[8];
  ssize_t n;
  do n = ::read(fd, head, sizeof head);
  while (n < 0 && errno == EINTR);
  ::close(fd);
  return n > 0 && sniff_image_format(head, size_t(n)) != ImageFormat::unknown;
}

enum class EntryKind { file, folder, other };

// What an entry is, following symlinks; a DataError names it when its status cannot be read
// (a symlink loop: "Too many levels of symbolic links"; a dangling link; no permission).
EntryKind entry_kind(const fs::directory_entry& e, const std::string& key) {
  std::error_code ec;
  const fs::file_status st = e.status(ec);
  if (ec) {
    const std::string why = ec.message();
    throw DataError(key + ": cannot read " + quoted(e.path().string()) + ": " + why +
                    (fs::is_symlink(e.symlink_status(ec)) ? " (a symbolic link)" : ""));
  }
  if (fs::is_regular_file(st)) return EntryKind::file;
  if (fs::is_directory(st)) return EntryKind::folder;
  return EntryKind::other;
}

// The entries of one folder, sorted by name.
std::vector<fs::directory_entry> sorted_entries(const fs::path& dir, const std::string& key) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  std::vector<fs::directory_entry> out;
  for (; !ec && it != end; it.increment(ec)) out.push_back(*it);
  if (ec) throw DataError(key + ": cannot list " + quoted(dir.string()) + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const fs::directory_entry& a, const fs::directory_entry& b) {
    return a.path().filename().string() < b.path().filename().string();
  });
  return out;
}

void require_folder(const std::string& path, const std::string& key, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) throw DataError(key + ": cannot read " + quoted(path) + ": " + ec.message());
  if (!fs::is_directory(st)) throw DataError(key + ": " + quoted(path) + " is not a folder; " + what);
}

// The images of one folder (sorted), the rest added to `skipped`; folders inside are not entered.
std::vector<std::string> images_in(const fs::path& dir, const std::string& key,
                                   std::vector<std::string>& skipped) {
  std::vector<std::string> images;
  for (const fs::directory_entry& e : sorted_entries(dir, key)) {
    const std::string p = e.path().string();
    switch (entry_kind(e, key)) {
      case EntryKind::folder:
        skipped.push_back(p + " (a folder inside a class folder: only one level is read)");
        break;
      case EntryKind::other:
        skipped.push_back(p + " (not a regular file)");
        break;
      case EntryKind::file:
        if (has_image_extension(p) || starts_like_image(e.path()))
          images.push_back(p);
        else
          skipped.push_back(p + " (not a PNG or JPEG file)");
    }
  }
  return images;
}

// Class index of `name` in the given names; DataError naming `what` when absent.
int32_t index_of_name(const std::vector<std::string>& names, const std::string& name,
                      const std::string& what) {
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw DataError(what + " is not one of data.class_names (" + joined(names) +
                    "); add it there, or remove data.class_names to use the names found");
  return int32_t(it - names.begin());
}

bool parse_index(std::string_view s, int64_t* v) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, *v);
  return r.ec == std::errc() && r.ptr == end;
}

}  // namespace

bool has_image_extension(const std::string& path) {
  const std::string ext = lower(fs::path(path).extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".jpe" || ext == ".jfif";
}

ImageListing list_image_folder(const std::string& root, const ListingOptions& o) {
  const std::string& key = o.key;
  require_folder(root, key, "format image_folder reads a folder with one subfolder of images per class");
  ImageListing out;
  std::vector<fs::path> class_dirs;
  for (const fs::directory_entry& e : sorted_entries(root, key)) {
    const EntryKind kind = entry_kind(e, key);
    if (kind == EntryKind::folder)
      class_dirs.push_back(e.path());
    else
      out.skipped.push_back(e.path().string() + " (outside the class subfolders)");
  }
  if (class_dirs.empty())
    throw DataError(key + ": " + quoted(root) +
                    " has no subfolders; format image_folder reads one subfolder of images per class "
                    "(e.g. " +
                    root + "/cat/1.png, " + root + "/dog/2.jpg)");
  std::vector<std::string> found;
  for (const fs::path& d : class_dirs) found.push_back(d.filename().string());
  if (!o.class_names.empty()) {
    out.class_names = o.class_names;
  } else {
    if (o.num_classes > 0 && size_t(o.num_classes) != found.size())
      throw DataError(key + ": " + quoted(root) + " has " + std::to_string(found.size()) +
                      " class subfolders (" + joined(found) + ") but data.num_classes is " +
                      std::to_string(o.num_classes) +
                      "; when a folder lacks some classes, list them all in data.class_names so that "
                      "every folder maps names to the same indices");
    out.class_names = found;
  }
  out.num_classes = int(out.class_names.size());
  for (size_t c = 0; c < class_dirs.size(); ++c) {
    const int32_t label = o.class_names.empty()
                              ? int32_t(c)
                              : index_of_name(o.class_names, found[c],
                                              key + ": class subfolder " + quoted(class_dirs[c].string()));
    const std::vector<std::string> images = images_in(class_dirs[c], key, out.skipped);
    if (images.empty())
      throw DataError(key + ": class folder " + quoted(class_dirs[c].string()) +
                      " holds no PNG or JPEG images; remove it or add its images");
    for (const std::string& p : images) out.files.push_back({p, label});
  }
  return out;
}

ImageListing list_image_list(const std::string& list_path, const ListingOptions& o) {
  const std::string& key = o.key;
  const std::vector<uint8_t> bytes = read_file_bytes(list_path);
  CsvRecords records(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), ',',
                     list_path);
  const fs::path base = fs::path(list_path).parent_path();
  std::vector<std::string_view> fields;
  size_t file_col = 0, label_col = 1;
  bool first = true;
  std::vector<std::pair<std::string, std::string>> rows;  // (path, label) as written
  std::vector<size_t> lines;
  while (records.next(&fields)) {
    if (first) {
      first = false;
      const auto col = [&](const char* name) {
        for (size_t i = 0; i < fields.size(); ++i)
          if (lower(std::string(fields[i])) == name) return i;
        return fields.size();
      };
      if (col("file") < fields.size()) {
        file_col = col("file");
        label_col = col("label");
        continue;
      }
    }
    const std::string where = list_path + ":" + std::to_string(records.line());
    const bool need_label = o.num_classes >= 0;
    if (fields.size() <= file_col || (need_label && fields.size() <= label_col))
      throw DataError(where + ": expected the columns file,label; this row has " +
                      std::to_string(fields.size()) + (fields.size() == 1 ? " field" : " fields"));
    if (fields[file_col].empty()) throw DataError(where + ": the file name is empty");
    fs::path p{std::string(fields[file_col])};
    if (p.is_relative()) p = base / p;
    rows.emplace_back(p.string(), label_col < fields.size() ? std::string(fields[label_col]) : "0");
    lines.push_back(records.line());
  }
  if (rows.empty())
    throw DataError(key + ": " + quoted(list_path) + " lists no images (expected rows of file,label)");
  ImageListing out;
  bool all_integers = true;
  int64_t v = 0;
  for (const auto& r : rows) all_integers = all_integers && parse_index(r.second, &v);
  if (o.class_names.empty() && !all_integers) {
    std::vector<std::string> names;
    for (const auto& r : rows) names.push_back(r.second);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    if (o.num_classes > 0 && size_t(o.num_classes) != names.size())
      throw DataError(key + ": " + quoted(list_path) + " names " + std::to_string(names.size()) +
                      " classes (" + joined(names) + ") but data.num_classes is " +
                      std::to_string(o.num_classes) +
                      "; list every class in data.class_names to fix the mapping");
    out.class_names = names;
  } else {
    out.class_names = o.class_names;
  }
  int64_t largest = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& label = rows[i].second;
    const std::string where = list_path + ":" + std::to_string(lines[i]);
    int32_t y;
    if (!out.class_names.empty() &&
        std::find(out.class_names.begin(), out.class_names.end(), label) != out.class_names.end())
      y = index_of_name(out.class_names, label, where);
    else if (parse_index(label, &v) && v >= 0 && v < (int64_t(1) << 30))
      y = int32_t(v);
    else if (!out.class_names.empty())
      y = index_of_name(out.class_names, label, where + ": label " + quoted(label));
    else
      throw DataError(where + ": label " + quoted(label) + " is neither a class name nor a class index >= 0");
    largest = std::max<int64_t>(largest, y);
    out.files.push_back({rows[i].first, y});
  }
  out.num_classes =
      !out.class_names.empty() ? int(out.class_names.size()) : std::max(o.num_classes, int(largest + 1));
  for (size_t i = 0; i < rows.size(); ++i)
    if (out.files[i].label >= out.num_classes)
      throw DataError(list_path + ":" + std::to_string(lines[i]) + ": label " +
                      std::to_string(out.files[i].label) + " is outside [0, " +
                      std::to_string(out.num_classes) + ") (data.num_classes)");
  return out;
}

ImageListing list_images_to_predict(const std::string& input) {
  const std::string key = "--input";
  std::error_code ec;
  const fs::file_status st = fs::status(input, ec);
  if (ec) throw DataError(key + ": cannot read " + quoted(input) + ": " + ec.message());
  ImageListing out;
  if (fs::is_directory(st)) {
    std::vector<std::string> images = images_in(input, key, out.skipped);
    // One level of subfolders (a validation folder's classes); their own subfolders are skipped.
    std::vector<std::string> nested;
    for (const fs::directory_entry& e : sorted_entries(input, key))
      if (entry_kind(e, key) == EntryKind::folder) {
        const std::vector<std::string> inner = images_in(e.path(), key, nested);
        images.insert(images.end(), inner.begin(), inner.end());
      }
    out.skipped.erase(
        std::remove_if(out.skipped.begin(), out.skipped.end(),
                       [](const std::string& s) { return s.find(" (a folder inside") != std::string::npos; }),
        out.skipped.end());
    out.skipped.insert(out.skipped.end(), nested.begin(), nested.end());
    std::sort(images.begin(), images.end());
    if (images.empty()) throw DataError(key + ": " + quoted(input) + " holds no PNG or JPEG images");
    for (std::string& p : images) out.files.push_back({std::move(p), 0});
    return out;
  }
  if (lower(fs::path(input).extension().string()) == ".csv") {
    ListingOptions o;
    o.key = key;
    o.num_classes = -1;  // labels optional
    ImageListing l = list_image_list(input, o);
    for (ImageFile& f : l.files) out.files.push_back({std::move(f.path), 0});
    return out;
  }
  out.files.push_back({input, 0});
  return out;
}

}  // namespace trainer
