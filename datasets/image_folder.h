// Which image files a data source holds, and their classes: the listing half of the image formats
// (datasets/image_loader.h decodes what is listed here).
//
//   image_folder  path: a folder with one subfolder per class (torchvision's ImageFolder, Keras'
//                 image_dataset_from_directory). Classes are the subfolder names sorted bytewise;
//                 files are sorted by name within each class, so the order never depends on the
//                 file system. Only one level of class subfolders is read: a folder inside a class
//                 folder is not entered (and is named in the skipped summary), so a symlink loop
//                 cannot make the walk endless; an entry whose status cannot be read (a loop
//                 itself, a dangling link) is an error naming it.
//   image_list    path: a CSV with columns file,label (an optional header row naming them, in
//                 either order); files relative to the list's folder. A label is a class name or a
//                 class index: with data.class_names, a listed name maps to its position; without,
//                 labels that are all integers are indices, otherwise the distinct names sorted
//                 become the classes.
//
// Which files are images: a .png, .jpg, .jpeg, .jpe or .jfif name (any case) is an image and must
// decode; another file is an image when its first bytes are a PNG or JPEG signature (a wrong
// extension); everything else (notes.txt, .DS_Store, Thumbs.db) is skipped and reported in
// `skipped`, which the caller prints as one summary warning. Files listed in an image_list are
// never skipped: they were asked for.
//
// With data.class_names given, a subfolder (or a label) missing from it is an error naming it;
// without, data.num_classes, when given, must equal the number of class subfolders (a class
// missing from one folder would shift every later class's index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct ImageFile {
  std::string path;   // as opened
  int32_t label = 0;  // class index (0 when the listing has no labels)
};

struct ImageListing {
  std::vector<ImageFile> files;
  std::vector<std::string> class_names;  // class-index order; empty for integer labels
  int num_classes = 0;
  std::vector<std::string> skipped;  // "path (why)" of each entry that was not read
};

struct ListingOptions {
  std::vector<std::string> class_names;  // data.class_names: the mapping to use (empty: discover)
  int num_classes = 0;                   // data.num_classes (0: from the data)
  std::string key = "data";              // the config key, for messages ("data.train")
};

ImageListing list_image_folder(const std::string& root, const ListingOptions& o);
ImageListing list_image_list(const std::string& list_path, const ListingOptions& o);

// For `trainer predict --input`: one image file, a folder (its images and those of its
// subfolders, one level, sorted by relative path), or an image list whose label column is
// optional. Labels are all 0.
ImageListing list_images_to_predict(const std::string& input);

// True for the file names listed as images above (by extension only).
bool has_image_extension(const std::string& path);

}  // namespace trainer
