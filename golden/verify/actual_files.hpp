// An engine's outputs on disk, as `posenc verify` and `posenc diagnose` find them: for a case
// <id>, ACT/<id>.safetensors, or ACT/<id>/ holding .npy files (one tensor each, named by the
// file) and .safetensors files; ACT itself may be one such file when one case is verified. Read
// whole (TensorMap) or as a streaming source (FileSource, golden/verify/tensor_source.hpp).
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "golden/verify/tensor_source.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// One output file: .npy (one tensor, named by the file's stem) or .safetensors.
TensorMap read_actual_file(const std::filesystem::path& f);
/// Every .npy and .safetensors file of a folder, in name order (a later file's tensor of the same
/// name replaces an earlier one).
TensorMap read_actual_dir(const std::filesystem::path& d);
/// Case `id`'s outputs under `actual` (a file when n_cases is 1, else a folder), nullopt if none.
std::optional<TensorMap> actual_for(const std::filesystem::path& actual, const std::string& id,
                                    std::size_t n_cases);
/// The same files as a streaming source (headers read, data in chunks); nullptr if none.
void add_actual_file(FileSource& src, const std::filesystem::path& f);
void add_actual_dir(FileSource& src, const std::filesystem::path& d);
std::unique_ptr<FileSource> actual_source_for(const std::filesystem::path& actual,
                                              const std::string& id, std::size_t n_cases);
/// "no engine output for this case in ACT (looked for ...)".
std::string no_output_message(const std::filesystem::path& actual, const std::string& id);

}  // namespace posenc::golden
