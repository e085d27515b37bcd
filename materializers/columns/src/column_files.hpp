#pragma once
// The column files tables and record collections share (docs/FORMAT.md §9.2,
// §10.2): validity bitmaps, and string columns stored merged or, when
// smaller, as a dictionary plus squeezed codes. Internal to the materializers.

#include <amphora/array_encoding.hpp>
#include <amphora/artifact.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amphora::detail {

/// `n` bits least significant first (bit i is bit i % 8 of byte i / 8, as
/// Arrow lays them out), bit i set when has(i).
template <class Has>
std::vector<std::uint8_t> pack_bits(std::size_t n, const Has& has) {
  std::vector<std::uint8_t> bits((n + 7) / 8, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (has(i)) bits[i / 8] = static_cast<std::uint8_t>(bits[i / 8] | (1u << (i % 8)));
  return bits;
}

/// Bytes each of `streams` payload streams open at once in one import
/// gathers before an append: an equal share of 32 MiB, within [256 bytes,
/// 256 KiB], so a wide import's buffers stay within 64 MiB in all (the
/// column caps allow at most 65,536 streams).
inline std::size_t batch_share(std::size_t streams) {
  constexpr std::size_t kBudget = std::size_t{32} << 20;
  return std::clamp<std::size_t>(kBudget / std::max<std::size_t>(streams, 1), std::size_t{256}, std::size_t{256} << 10);
}

/// Appends to an ArrayStream or FileStream in blocks of `batch` bytes
/// rather than per value (streaming imports). The buffer grows as bytes
/// come, so a stream that receives little holds little.
template <class Stream>
class Batched {
 public:
  explicit Batched(Stream stream, std::size_t batch = std::size_t{256} << 10)
      : stream_(std::move(stream)), batch_(std::max<std::size_t>(batch, 64)) {}
  void add(const void* bytes, std::size_t n) {
    if (pending_.size() + n > batch_) flush();
    const auto* b = static_cast<const std::byte*>(bytes);
    if (pending_.capacity() < pending_.size() + n)
      pending_.reserve(std::max(pending_.size() + n, std::min(batch_, std::max<std::size_t>(pending_.capacity() * 2, 256))));
    pending_.insert(pending_.end(), b, b + n);
  }
  template <class T>
  void add(T value) {
    add(&value, sizeof value);
  }
  void close() {
    flush();
    stream_.close();
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    stream_.append(ConstBytes(pending_.data(), pending_.size()));
    pending_.clear();
  }
  Stream stream_;
  std::size_t batch_;
  std::vector<std::byte> pending_;
};

/// A bitmap as pack_bits lays it out, appended one bit at a time.
class BitStream {
 public:
  explicit BitStream(ArrayStream stream, std::size_t batch = std::size_t{256} << 10) : bytes_(std::move(stream), batch) {}
  void add(bool bit) {
    if (bit) byte_ = static_cast<std::uint8_t>(byte_ | (1u << n_));
    if (++n_ == 8) bytes_.add(std::exchange(byte_, 0)), n_ = 0;
  }
  void close() {
    if (n_ != 0) bytes_.add(byte_);
    bytes_.close();
  }

 private:
  Batched<ArrayStream> bytes_;
  std::uint8_t byte_ = 0;
  unsigned n_ = 0;
};

/// Throws CorruptData starting with `where` unless the manifest lists `file`:
/// the metadata says which files exist, so one missing is damage.
void require_file(const ArtifactReader& in, const std::string& file, const std::string& where);

/// The bitmap `file` of `slots` bits, checked to be exactly ceil(slots / 8)
/// bytes. Throws CorruptData starting with `where`.
ArrayView read_bitmap(const ArtifactReader& in, const std::string& file, std::size_t slots, const std::string& where);

/// The recipe encode_array gives `count` dictionary codes squeezed (uint32
/// codes below `words`; docs/FORMAT.md §6.4), without reading them: squeeze
/// depends only on the largest.
nlohmann::json squeezed_codes_recipe(std::size_t count, std::size_t words);

/// Writes PATH as the codes squeezed, as write_array with {.squeeze = true}
/// writes them, narrowing on all cores.
void write_codes(ArtifactWriter& out, const std::string& path, std::span<const std::uint32_t> codes, std::size_t words);

/// How write_string_column stored a column, and its dictionary (which the
/// caller may use for statistics).
struct StringColumn {
  bool dictionary = false;  ///< PATH.dict + PATH.codes.npy rather than merged strings under PATH
  DictionaryStrings dict;
};

/// Writes string i = bytes [offsets[i], offsets[i+1]) under `path`: merged
/// (§6.3), or as a dictionary and squeezed codes where that is smaller.
StringColumn write_string_column(ArtifactWriter& out, const std::string& path, ConstBytes bytes,
                                 std::span<const std::int64_t> offsets);
/// The same with the strings' dictionary_encode already computed.
StringColumn write_string_column(ArtifactWriter& out, const std::string& path, ConstBytes bytes,
                                 std::span<const std::int64_t> offsets, DictionaryStrings dict);
/// The same for strings held as views.
StringColumn write_string_column(ArtifactWriter& out, const std::string& path, std::span<const std::string_view> values);

/// A dictionary-encoded string column as stored: the distinct strings and a
/// code per row, every code checked to be within the dictionary.
struct DictionaryColumn {
  StringsView words;
  ArrayView codes;  ///< uint32, `rows` of them
};
/// Reads PATH.dict and PATH.codes.npy, checking the codes of rows [begin,
/// end) (the ones a caller will use). Throws CorruptData starting with
/// `where` for a missing file, a code count other than `rows`, or a code
/// past the dictionary.
DictionaryColumn read_dictionary_column(const ArtifactReader& in, const std::string& path, std::size_t rows,
                                        std::size_t begin, std::size_t end, const std::string& where);
/// Rows [begin, end) of the same column read without the rest, for a
/// store that fetches what it reads (a remote): `codes` holds those rows'
/// codes only, renumbered into `words`, which holds the few words they use
/// (read together where they lie close) or, past 64 distinct, the whole
/// dictionary with the codes as stored. Throws as read_dictionary_column.
DictionaryColumn read_dictionary_rows(const ArtifactReader& in, const std::string& path, std::size_t rows,
                                      std::size_t begin, std::size_t end, const std::string& where);

}  // namespace amphora::detail
