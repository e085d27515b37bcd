#pragma once
// Read-only views of arrays and string lists stored in payload files, as
// ArtifactReader::read_array and read_strings return them. A view keeps the
// mapping of its files alive; copies share it.

#include <amphora/export.hpp>
#include <amphora/buffer.hpp>
#include <amphora/dtype.hpp>
#include <amphora/error.hpp>

#include <compare>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// A C-ordered array of one dtype: its shape and its element bytes. Thread-safe for reading.
class ArrayView {
 public:
  ArrayView() = default;
  /// `data` holds exactly the element bytes of `shape`; the constructor does
  /// not check (ArtifactReader::read_array does).
  ArrayView(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<const Buffer> data)
      : dtype_(dtype), shape_(std::move(shape)), data_(std::move(data)) {}

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  /// Number of elements.
  std::uint64_t size() const { return data_ ? data_->size() / dtype_size(dtype_) : 0; }
  ConstBytes bytes() const { return data_ ? data_->bytes() : ConstBytes{}; }
  /// The element bytes, keeping the mapping they live in alive.
  const std::shared_ptr<const Buffer>& buffer() const { return data_; }

  /// The elements as T; throws InvalidArgument when T is not the dtype.
  /// Not on a temporary view: the span would outlive the mapping.
  template <class T>
  std::span<const T> values() const&& = delete;
  template <class T>
  std::span<const T> values() const& {
    if (dtype_of<T>::value != dtype_)
      throw InvalidArgument("array holds " + std::string(dtype_name(dtype_)) + ", not " +
                            std::string(dtype_name(dtype_of<T>::value)));
    return {reinterpret_cast<const T*>(bytes().data()), static_cast<std::size_t>(size())};
  }

 private:
  DType dtype_ = DType::uint8;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<const Buffer> data_;
};

/// How merged strings and ragged columns delimit their entries: throws
/// CorruptData, starting with `where`, unless `offsets` is not empty, starts at
/// 0, never decreases and ends at `end` (`end_what` says what `end` counts,
/// e.g. "'names.bytes' holds 80 bytes").
void validate_offsets(std::span<const std::int64_t> offsets, std::uint64_t end, const std::string& where,
                      const std::string& end_what);

/// A list of byte strings stored merged: one offsets array and one bytes
/// file. Offsets were validated when the view was made, so element access
/// cannot leave the bytes. Thread-safe for reading.
class StringsView {
 public:
  StringsView() = default;
  /// `offsets` (size() + 1 of them, starting at 0, non-decreasing, the last
  /// equal to the size of `bytes`) must already be validated.
  StringsView(ArrayView offsets, std::shared_ptr<const Buffer> bytes)
      : offsets_(std::move(offsets)), bytes_(std::move(bytes)) {}

  std::size_t size() const { return offsets_.size() == 0 ? 0 : static_cast<std::size_t>(offsets_.size() - 1); }
  bool empty() const { return size() == 0; }
  std::string_view operator[](std::size_t i) const {
    auto o = offsets_.values<std::int64_t>();
    return {reinterpret_cast<const char*>(bytes_->data()) + o[i], static_cast<std::size_t>(o[i + 1] - o[i])};
  }
  /// Element `i`; throws InvalidArgument when `i` is out of range.
  std::string_view at(std::size_t i) const {
    if (i >= size()) throw InvalidArgument("string index " + std::to_string(i) + " is out of range (" + std::to_string(size()) + " strings)");
    return (*this)[i];
  }
  /// Total bytes of all strings.
  std::size_t total_bytes() const { return bytes_ ? bytes_->size() : 0; }
  /// The offsets array and the bytes it points into, keeping their mappings alive.
  const ArrayView& offsets() const { return offsets_; }
  const std::shared_ptr<const Buffer>& bytes_buffer() const { return bytes_; }
  std::vector<std::string> to_vector() const {
    std::vector<std::string> out;
    out.reserve(size());
    for (std::size_t i = 0; i < size(); ++i) out.emplace_back((*this)[i]);
    return out;
  }

  /// Random access over the strings, yielding string_views into the bytes.
  /// Points at this StringsView object: valid while it lives and is not
  /// moved; the string_views, while its buffers live. Unchecked, as
  /// operator[] is. A C++20 random-access iterator; its category says so to
  /// the classic algorithms too (std::lower_bound stays logarithmic), though
  /// it yields values, not references.
  class iterator {
   public:
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::random_access_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;
    iterator() = default;
    iterator(const StringsView* view, std::size_t i) : view_(view), i_(i) {}
    std::string_view operator*() const { return (*view_)[i_]; }
    std::string_view operator[](difference_type n) const { return *(*this + n); }
    iterator& operator++() { ++i_; return *this; }
    iterator operator++(int) { auto old = *this; ++i_; return old; }
    iterator& operator--() { --i_; return *this; }
    iterator operator--(int) { auto old = *this; --i_; return old; }
    iterator& operator+=(difference_type n) { i_ = static_cast<std::size_t>(static_cast<difference_type>(i_) + n); return *this; }
    iterator& operator-=(difference_type n) { return *this += -n; }
    friend iterator operator+(iterator it, difference_type n) { return it += n; }
    friend iterator operator+(difference_type n, iterator it) { return it += n; }
    friend iterator operator-(iterator it, difference_type n) { return it -= n; }
    difference_type operator-(const iterator& o) const { return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_); }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    std::strong_ordering operator<=>(const iterator& o) const { return i_ <=> o.i_; }

   private:
    const StringsView* view_ = nullptr;
    std::size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  ArrayView offsets_;
  std::shared_ptr<const Buffer> bytes_;
};

}  // namespace amphora

AMPHORA_API_END
