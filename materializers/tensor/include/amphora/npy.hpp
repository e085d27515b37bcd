#pragma once
// Tensors to and from NumPy .npy files (the header codec is amphora/npy_format.hpp).

#include <amphora/export.hpp>
#include <amphora/npy_format.hpp>
#include <amphora/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// Tensors of at least this many bytes have their data page-aligned.
inline constexpr std::uint64_t kPageAlignedTensorBytes = 64u << 10;

/// The header Amphora writes before a tensor's data (payloads and exports):
/// data at byte 4096 for a tensor of kPageAlignedTensorBytes or more, else at
/// the next multiple of 64 (docs/FORMAT.md section 5.4). Throws
/// InvalidArgument for a shape checked_element_count refuses.
std::string make_tensor_npy_header(DType dtype, std::span<const std::int64_t> shape);

/// Reads a .npy file into fresh memory (read on all cores, never mapped, so
/// another program truncating the file cannot crash this one) as a writable
/// C-ordered little-endian tensor, converting byte order and Fortran order.
/// Throws InvalidArgument if `file` is not a regular file (a FIFO is refused
/// at once, not waited on), NotFound if it is missing, OutOfResources when
/// no descriptor or memory is left, IoError if it cannot be read, CorruptData naming the file for truncated or malformed input,
/// a bool element other than 0 or 1, or a file that shrank while being read,
/// and Unsupported for a dtype Amphora has no DType for (structured records,
/// objects, strings) or a .npy format version other than 1.0, 2.0 or 3.0.
Tensor read_npy(const std::filesystem::path& file);
/// The same on bytes already in memory: the result shares `file` when its
/// data is already C-ordered, little-endian and aligned, and is converted
/// into fresh memory otherwise. `where` names the bytes in errors.
Tensor read_npy(std::shared_ptr<const Buffer> file, std::string_view where);

/// Writes `tensor` as a .npy file with the header of make_tensor_npy_header,
/// atomically: the file appears complete or not at all. Throws IoError.
void write_npy(const Tensor& tensor, const std::filesystem::path& file);

}  // namespace amphora

AMPHORA_API_END
