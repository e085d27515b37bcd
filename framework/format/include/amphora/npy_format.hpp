#pragma once
// The NumPy .npy header: parsing (versions 1.0, 2.0, 3.0) and writing
// (version 1.0, C order, little-endian). Arrays written by any materializer
// are .npy files, so NumPy opens every one of them.

#include <amphora/export.hpp>
#include <amphora/buffer.hpp>
#include <amphora/dtype.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

AMPHORA_API_BEGIN

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
/// The same for any NumPy `descr` (say "|S3", a byte string of 3), written
/// as given: the caller vouches that it is a descr NumPy knows.
std::string make_npy_header(std::string_view descr, std::span<const std::int64_t> shape, std::size_t alignment = 4096);

}  // namespace amphora

AMPHORA_API_END
