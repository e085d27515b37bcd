#pragma once
// Lossless transforms of numeric arrays and string lists that make payloads
// smaller or more compressible (docs/FORMAT.md §6.4): delta coding of sorted
// integers, squeezing integers into the narrowest width that holds them, byte
// shuffling, and dictionary encoding of repeated strings. Each encoded array
// carries a recipe, a small JSON object that decode_array() follows back to
// the original bytes. Pure functions: no store access, thread-safe.

#include <amphora/export.hpp>
#include <amphora/buffer.hpp>
#include <amphora/dtype.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// Which transforms to apply, in this order: decimal, delta, squeeze,
/// shuffle. All off leaves the bytes as they are.
struct ArrayEncoding {
  /// float64 values that are all short decimals: stored as the int64 `d` with
  /// v == d / 10^k (correctly rounded, so bit for bit) for the smallest k ≤ 15
  /// that works for every value, |d| < 2^53. 473.07 becomes 47307 with k = 2,
  /// which squeeze then stores in 2 bytes. Refused (InvalidArgument) when no
  /// such k exists; decimal_digits() says beforehand.
  bool decimal = false;
  /// Integers, best when mostly increasing: the first value goes into the
  /// recipe and each element is stored as its difference from the one before
  /// (as an unsigned integer of the same width, so no difference overflows
  /// and decreasing values come back exactly too).
  bool delta = false;
  /// Integers: stored in the narrowest integer dtype that holds every value
  /// (unsigned when none is negative).
  bool squeeze = false;
  /// Elements wider than a byte: stored as byte planes (every element's
  /// byte 0, then every byte 1, ...), which LZ4 and zstd compress far better
  /// for floating point. A tensor saved with the lz4 or zstd compression
  /// shuffles chunk by chunk inside the codec instead (docs/FORMAT.md §5.6).
  bool shuffle = false;
};

/// An array after encode_array().
struct EncodedArray {
  DType stored_dtype = DType::uint8;  ///< the dtype of `bytes` after squeeze (before shuffle)
  std::vector<std::byte> bytes;       ///< what to store
  /// What decode_array() needs: {"dtype", "count", "transforms": [...], and
  /// per transform its parameters}; hashed wherever it is stored.
  nlohmann::json recipe;
};

/// Encodes the `data` of `dtype` (count = size / element size); a delta of
/// values that decrease is stored exactly too (differences wrap). Throws
/// InvalidArgument naming the problem when a transform does not apply: delta
/// or squeeze of a non-integer dtype, decimal of anything but float64,
/// decimal with delta, data not a whole number of elements.
EncodedArray encode_array(DType dtype, ConstBytes data, const ArrayEncoding& encoding);

/// The dtype encode_array stores `data`'s differences in under delta +
/// squeeze: the unsigned dtype of `dtype`'s width when some difference needs
/// every byte (values that fall wrap around), where squeeze narrows nothing.
/// One pass on all cores. Throws InvalidArgument as encode_array does for a
/// non-integer dtype or data not a whole number of elements.
DType delta_squeeze_dtype(DType dtype, ConstBytes data);

/// The smallest k for which every value is d / 10^k as `decimal` requires,
/// or -1 when there is none (a value with more digits, -0.0, NaN, infinity or
/// |d| ≥ 2^53).
int decimal_digits(std::span<const double> values);

/// The decimal coding's scan of float64 values given one at a time (what
/// encode_array and decimal_digits run), for writers that stream an array:
/// the smallest k so far, and the least and greatest integer d at that k.
class DecimalScan {
 public:
  /// Takes in one value; once a value fits no k, digits() stays -1.
  void add(double v);
  /// Takes in every value `other` took in, as if they had been added here
  /// (so scans of parts of an array, merged in any order, give the scan of
  /// the whole).
  void merge(const DecimalScan& other);
  /// The smallest k for every value so far (0 for none), or -1.
  int digits() const { return digits_; }
  std::int64_t lo() const { return lo_; }
  std::int64_t hi() const { return hi_; }
  /// The integer d with v == d / 10^k, or false when there is none.
  static bool scaled(double v, int k, std::int64_t& d);

 private:
  bool raise_to(int digits);

  int digits_ = 0;
  bool any_ = false;
  std::int64_t lo_ = 0, hi_ = 0;
};

/// The shuffle transform alone: `elements` (each `width` bytes, 1 to 16)
/// as byte planes in `planes` (the same size): byte b of element i goes to
/// planes[b * n + i], n = elements.size() / width. Spread over the cores
/// from a few MiB up. For codecs that shuffle chunk by chunk. Throws
/// InvalidArgument for sizes that do not match or are not whole elements.
void shuffle_bytes(ConstBytes elements, std::size_t width, MutableBytes planes);
/// The inverse of shuffle_bytes; throws as it does.
void unshuffle_bytes(ConstBytes planes, std::size_t width, MutableBytes elements);

/// Chunk delta, for codecs that delta-code chunk by chunk: each of a run of
/// integers `width` bytes wide (1, 2, 4 or 8) goes to `differences` (the
/// same size, not overlapping it) as its difference from the one
/// before (0 before the first), taken in the unsigned integer of that width
/// (wrapping) and zigzag-coded: read as signed, 0, -1, 1, -2, 2, ... become
/// 0, 1, 2, 3, 4, ..., so values that fall a little make small numbers too.
/// Throws InvalidArgument for sizes that do not match or are not whole
/// elements, another width, or `differences` that is `elements`.
void delta_bytes(ConstBytes elements, std::size_t width, MutableBytes differences);
/// The inverse of delta_bytes, in place: each element becomes the wrapping
/// sum of the decoded differences up to it. Throws as delta_bytes does.
void undelta_bytes(MutableBytes differences, std::size_t width);

/// The original bytes of an encoded array. `stored` holds what encode_array
/// returned as `bytes`. Throws CorruptData starting with `where` when the
/// recipe is malformed or names an unknown transform or dtype, when `stored`
/// is not the size the recipe implies, or when a squeezed value does not fit
/// the dtype it is widened back to.
std::vector<std::byte> decode_array(const nlohmann::json& recipe, ConstBytes stored, std::string_view where);

/// A list of strings as the distinct strings, in order of first appearance,
/// and for each string its index among them.
struct DictionaryStrings {
  std::vector<std::string_view> dictionary;  ///< views into the input
  std::vector<std::uint32_t> codes;          ///< one per input string
  /// False when the distinct strings pass kMaxDictionaryWords or
  /// kMaxDictionaryBytes: encoding stopped there (the dictionary form is
  /// never chosen past them), and `dictionary` and `codes` are empty.
  bool within_limits = true;
};

/// Dictionary encoding is chosen only for lists with at most this many
/// distinct strings, of at most kMaxDictionaryBytes in all: within them a
/// streaming import builds the same dictionary in bounded memory (about
/// 64 bytes per distinct string plus the strings), so a file imported in
/// pieces is stored exactly as the same values saved whole.
inline constexpr std::size_t kMaxDictionaryWords = std::size_t{1} << 18;
inline constexpr std::uint64_t kMaxDictionaryBytes = std::uint64_t{16} << 20;

/// Dictionary-encodes `values`, on all cores for long lists, stopping as
/// soon as the distinct strings pass the limits above (within_limits false).
DictionaryStrings dictionary_encode(std::span<const std::string_view> values);
/// The same for merged strings: string i is bytes [offsets[i], offsets[i+1]),
/// offsets already validated; the dictionary's views point into `bytes`.
DictionaryStrings dictionary_encode(ConstBytes bytes, std::span<const std::int64_t> offsets);

/// Whether `encoded` is within kMaxDictionaryWords and kMaxDictionaryBytes.
bool dictionary_within_limits(const DictionaryStrings& encoded);
/// Whether storing `values` as a dictionary plus squeezed codes takes fewer
/// bytes than storing them merged (offsets plus bytes, docs/FORMAT.md §6.3);
/// always false for a dictionary beyond the limits.
bool dictionary_is_smaller(std::span<const std::string_view> values, const DictionaryStrings& encoded);
/// The same for `count` strings of `total_bytes` in all.
bool dictionary_is_smaller(std::size_t count, std::uint64_t total_bytes, const DictionaryStrings& encoded);

/// Estimates how many distinct strings it was given (HyperLogLog, 2^14
/// one-byte registers, a standard error of about 0.8%), in 16 KiB whatever
/// their number. Deterministic: the same strings in any order give the same
/// estimate.
class DistinctEstimator {
 public:
  void add(std::string_view s);
  std::uint64_t estimate() const;

 private:
  friend class StreamingDictionary;
  void add_hash(std::uint64_t hash);
  std::vector<std::uint8_t> registers_;  // allocated by the first add: wide imports hold one per column
};

/// The dictionary of a list of strings given one at a time, for imports that
/// read their input twice in bounded memory: the first pass add()s every
/// string, which copies each new one into the dictionary's own storage until
/// the limits above are passed (then only the estimate goes on); the second
/// asks code_of() for each. The words, codes and decision equal those of
/// dictionary_encode and dictionary_is_smaller on the whole list. One thread
/// at a time.
class StreamingDictionary {
 public:
  StreamingDictionary();
  ~StreamingDictionary();
  StreamingDictionary(StreamingDictionary&&) noexcept;
  StreamingDictionary& operator=(StreamingDictionary&&) noexcept;

  void add(std::string_view s);
  /// Still within kMaxDictionaryWords and kMaxDictionaryBytes.
  bool within_limits() const;
  /// The distinct strings in order of first appearance (within limits only).
  std::span<const std::string_view> words() const;
  /// The code of `s`, which add() was given. Throws InvalidArgument for a
  /// string it was not given, or beyond the limits.
  std::uint32_t code_of(std::string_view s) const;
  /// The number of distinct strings: exact within limits, else estimated.
  std::uint64_t distinct() const;
  std::uint64_t count() const { return count_; }
  std::uint64_t total_bytes() const { return total_bytes_; }
  /// dictionary_is_smaller for the whole list.
  bool dictionary_is_smaller() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint64_t count_ = 0, total_bytes_ = 0;
};

}  // namespace amphora

AMPHORA_API_END
