// An engine's outputs on disk, as `posenc verify` and `posenc diagnose` find them:
// golden/verify/actual_files.hpp.
#include "golden/verify/actual_files.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "golden/format/format.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;

TensorMap read_actual_file(const fs::path& f) {
  if (f.extension() == ".npy") {
    TensorMap m;
    m.emplace(f.stem().string(), npy_read(f, f.stem().string()));
    return m;
  }
  return tensor_map(safetensors_read(f));
}

TensorMap read_actual_dir(const fs::path& d) {
  TensorMap m;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(d)) {
    // Not only regular files: a FIFO or device named like an output is refused by the reader.
    if (!f.is_directory() && (f.path().extension() == ".npy" || f.path().extension() == ".safetensors")) {
      files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (auto& [k, v] : read_actual_file(f)) m.insert_or_assign(k, std::move(v));
  }
  return m;
}

/// Finds an engine's output for one case (docs/verifying.md); nullopt when the
/// directory holds none for it.
std::optional<TensorMap> actual_for(const fs::path& actual, const std::string& id, std::size_t n_cases) {
  if (fs::is_regular_file(actual)) {
    if (n_cases > 1) {
      throw GoldenFileError("--actual " + actual.string() + " is one file but " +
                       std::to_string(n_cases) + " cases were given: pass a directory holding "
                       "<case_id>.safetensors files");
    }
    return read_actual_file(actual);
  }
  if (!fs::is_directory(actual)) {
    if (const std::string kind = special_file_kind(actual); !kind.empty()) {
      throw GoldenFileError("--actual " + actual.string() + ": is " + kind + ", not a regular file");
    }
    throw GoldenFileError("--actual " + actual.string() + ": no such file or directory");
  }
  if (fs::exists(actual / (id + ".safetensors"))) {
    return read_actual_file(actual / (id + ".safetensors"));
  }
  if (fs::is_directory(actual / id)) return read_actual_dir(actual / id);
  if (n_cases == 1) {
    TensorMap m = read_actual_dir(actual);
    if (!m.empty()) return m;
  }
  return std::nullopt;
}

/// actual_for's files as a streaming source (`posenc verify`): headers read, data left on
/// disk; nullptr when the directory holds no output for the case.
void add_actual_file(FileSource& src, const fs::path& f) {
  if (f.extension() == ".npy") {
    src.add_npy(f, f.stem().string());
  } else {
    src.add_safetensors(f);
  }
}

void add_actual_dir(FileSource& src, const fs::path& d) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(d)) {
    // Not only regular files: a FIFO or device named like an output is refused by the reader.
    if (!f.is_directory() && (f.path().extension() == ".npy" || f.path().extension() == ".safetensors")) {
      files.push_back(f.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) add_actual_file(src, f);
}

std::unique_ptr<FileSource> actual_source_for(const fs::path& actual, const std::string& id,
                                              std::size_t n_cases) {
  auto src = std::make_unique<FileSource>();
  if (fs::is_regular_file(actual)) {
    if (n_cases > 1) {
      throw GoldenFileError("--actual " + actual.string() + " is one file but " +
                       std::to_string(n_cases) + " cases were given: pass a directory holding "
                       "<case_id>.safetensors files");
    }
    add_actual_file(*src, actual);
    return src;
  }
  if (!fs::is_directory(actual)) {
    if (const std::string kind = special_file_kind(actual); !kind.empty()) {
      throw GoldenFileError("--actual " + actual.string() + ": is " + kind + ", not a regular file");
    }
    throw GoldenFileError("--actual " + actual.string() + ": no such file or directory");
  }
  if (fs::exists(actual / (id + ".safetensors"))) {
    add_actual_file(*src, actual / (id + ".safetensors"));
    return src;
  }
  if (fs::is_directory(actual / id)) {
    add_actual_dir(*src, actual / id);
    return src;
  }
  if (n_cases == 1) {
    add_actual_dir(*src, actual);
    if (!src->names().empty()) return src;
  }
  return nullptr;
}

std::string no_output_message(const fs::path& actual, const std::string& id) {
  return "no engine output for this case in " + actual.string() + " (looked for " + id +
         ".safetensors, " + id + "/*.npy|*.safetensors)";
}

}  // namespace posenc::golden
