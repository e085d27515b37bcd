#include <amphora/error.hpp>
#include <amphora/npy.hpp>
#include <amphora/parallel.hpp>

#include "tensor_checks.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace amphora {

namespace {

void byteswap_elements(std::byte* data, std::uint64_t count, std::size_t word) {
  parallel_for(static_cast<std::size_t>((count + (1u << 20) - 1) >> 20), [&](std::size_t block) {
    std::uint64_t begin = static_cast<std::uint64_t>(block) << 20, end = std::min(count, begin + (1u << 20));
    for (std::uint64_t i = begin; i < end; ++i) std::reverse(data + i * word, data + (i + 1) * word);
  });
}

// Copies a Fortran-ordered array into C order, one element at a time with an
// odometer over the C index.
void fortran_to_c(const std::byte* src, std::byte* dst, const std::vector<std::int64_t>& shape, std::size_t item) {
  const std::size_t nd = shape.size();
  std::vector<std::uint64_t> fstride(nd, 1);
  for (std::size_t k = 1; k < nd; ++k) fstride[k] = fstride[k - 1] * static_cast<std::uint64_t>(shape[k - 1]);
  std::vector<std::int64_t> index(nd, 0);
  std::uint64_t total = 1;
  for (auto d : shape) total *= static_cast<std::uint64_t>(d);
  std::uint64_t offset = 0;  // Fortran element offset of `index`
  for (std::uint64_t c = 0; c < total; ++c) {
    std::memcpy(dst + c * item, src + offset * item, item);
    for (std::size_t k = nd; k-- > 0;) {
      if (++index[k] < shape[k]) {
        offset += fstride[k];
        break;
      }
      offset -= fstride[k] * static_cast<std::uint64_t>(index[k] - 1);
      index[k] = 0;
    }
  }
}

}  // namespace

std::string make_tensor_npy_header(DType dtype, std::span<const std::int64_t> shape) {
  // Page-aligned data lets a mapped tensor of any size be used in place; a
  // tensor under 64 KiB gains nothing measurable from it (it is read or
  // mapped whole in a page or few either way) and would pay a 4 KiB header,
  // 512 times the size of a double. 64 bytes is numpy's own alignment.
  const std::uint64_t nbytes = checked_element_count(shape, dtype) * dtype_size(dtype);
  return make_npy_header(dtype, shape, nbytes < kPageAlignedTensorBytes ? 64 : 4096);
}

Tensor read_npy(std::shared_ptr<const Buffer> file, std::string_view where) {
  NpyHeader h = parse_npy_header(file->bytes(), where);
  auto [dtype, swap] = dtype_from_descr(h.descr, where);
  std::uint64_t count = 0;
  try {
    count = checked_element_count(h.shape, dtype);
  } catch (const InvalidArgument& e) {
    throw CorruptData(std::string(where) + ": " + e.what());
  }
  std::uint64_t nbytes = count * dtype_size(dtype);
  std::uint64_t available = file->size() - h.data_offset;
  if (nbytes > available)
    throw CorruptData(std::string(where) + ": header claims " + std::to_string(nbytes) + " bytes of data but the file holds only " +
                      std::to_string(available));
  if (nbytes < available)
    throw CorruptData(std::string(where) + ": " + std::to_string(available - nbytes) +
                      " unexpected bytes after the array data (NumPy would ignore them; Amphora refuses them so a "
                      "damaged or concatenated file is not taken for a valid one)");
  bool fortran = h.fortran_order && h.shape.size() > 1;
  auto data = Buffer::slice(file, h.data_offset, static_cast<std::size_t>(nbytes));
  // Typed access needs element alignment, which a hand-made header may not give.
  bool aligned = reinterpret_cast<std::uintptr_t>(data->data()) % std::min<std::size_t>(dtype_size(dtype), 16) == 0;
  if (swap || fortran || !aligned) {
    auto converted = Buffer::allocate(static_cast<std::size_t>(nbytes));
    if (fortran)
      fortran_to_c(data->data(), converted->mutable_data(), h.shape, dtype_size(dtype));
    else if (nbytes)
      std::memcpy(converted->mutable_data(), data->data(), static_cast<std::size_t>(nbytes));
    if (swap) {
      bool is_complex = dtype == DType::complex64 || dtype == DType::complex128;
      std::size_t word = is_complex ? dtype_size(dtype) / 2 : dtype_size(dtype);
      byteswap_elements(converted->mutable_data(), is_complex ? count * 2 : count, word);
    }
    data = std::move(converted);
  }
  // Checked in C order, so the index is the element's flat index in the array.
  if (dtype == DType::bool_)
    if (auto bad = detail::find_invalid_bool(data->bytes()))
      throw CorruptData(std::string(where) + ": bool element " + std::to_string(*bad) + " holds the byte " +
                        std::to_string(static_cast<unsigned>(data->data()[*bad])) + "; a bool must be 0 or 1");
  return Tensor::Make(dtype, std::move(h.shape), std::move(data));
}

Tensor read_npy(const std::filesystem::path& file) {
  // Read rather than mapped: the private copy is what import must store, and
  // a program truncating the file meanwhile cannot crash this one.
  return read_npy(Buffer::read_file(file), file.string());
}

void write_npy(const Tensor& tensor, const std::filesystem::path& file) {
  std::string header = make_tensor_npy_header(tensor.dtype(), tensor.shape());
  const ConstBytes parts[] = {ConstBytes(reinterpret_cast<const std::byte*>(header.data()), header.size()),
                              ConstBytes(tensor.data(), tensor.nbytes())};
  write_file_atomically(file, parts);
}

}  // namespace amphora
