#pragma once
// Reading and writing NumPy .npy files.

#include <amphora/tensor.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace amphora {

/// What a .npy header says.
struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  std::string descr;        ///< e.g. "<f4", ">i8", "|b1"
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;  ///< bytes before the array data
};

/// Parses and validates the header at the start of `file` (versions 1.0, 2.0
/// and 3.0). `where` names the file in errors. Throws CorruptData for a
/// malformed header and Unsupported for a dtype Amphora does not handle.
NpyHeader parse_npy_header(ConstBytes file, std::string_view where);

/// The dtype a descr denotes and whether its bytes are big-endian.
/// Throws Unsupported naming the descr.
std::pair<DType, bool> dtype_from_descr(std::string_view descr, std::string_view where);
/// The little-endian descr of `dtype` (bfloat16 is "<u2": .npy has no bfloat16).
std::string_view descr_of(DType dtype);

/// A version 1.0 header for a C-ordered little-endian array, padded with
/// spaces so the data starts at a multiple of `alignment` bytes.
std::string make_npy_header(DType dtype, std::span<const std::int64_t> shape, std::size_t alignment = 4096);

/// The header Amphora writes before a tensor's data (payloads and exports):
/// data at byte 4096, or at the next multiple of 64 when the tensor has no
/// elements (docs/FORMAT.md section 5.4). Throws InvalidArgument for a shape
/// checked_element_count refuses.
std::string make_tensor_npy_header(DType dtype, std::span<const std::int64_t> shape);

/// Reads a .npy file into fresh memory (read on all cores, never mapped, so
/// another program truncating the file cannot crash this one) as a writable
/// C-ordered little-endian tensor, converting byte order and Fortran order.
/// Throws InvalidArgument if `file` is not a regular file (a FIFO is refused
/// at once, not waited on), NotFound if it is missing, IoError if it cannot
/// be read, and CorruptData naming the file for truncated or malformed input,
/// a bool element other than 0 or 1, or a file that shrank while being read.
Tensor read_npy(const std::filesystem::path& file);
/// The same on bytes already in memory: the result shares `file` when its
/// data is already C-ordered, little-endian and aligned, and is converted
/// into fresh memory otherwise. `where` names the bytes in errors.
Tensor read_npy(std::shared_ptr<const Buffer> file, std::string_view where);

/// Writes `tensor` as a .npy file with the header of make_tensor_npy_header,
/// atomically: the file appears complete or not at all. Throws IoError.
void write_npy(const Tensor& tensor, const std::filesystem::path& file);

}  // namespace amphora
