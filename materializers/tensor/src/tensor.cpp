#include <amphora/array_encoding.hpp>
#include <amphora/error.hpp>
#include <amphora/npy.hpp>
#include <amphora/parallel.hpp>
#include <amphora/tensor.hpp>

#include "lz4_frames.hpp"
#include "zstd_frames.hpp"
#include "tensor_checks.hpp"
#include "tensor_stats.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace amphora {

std::string_view to_string(Compression c) {
  switch (c) {
    case Compression::none: return "none";
    case Compression::lz4: return "lz4";
    case Compression::zstd: return "zstd";
    case Compression::automatic: return "auto";
  }
  return "?";
}

Compression parse_compression(std::string_view text) {
  if (text == "none") return Compression::none;
  if (text == "lz4") return Compression::lz4;
  if (text == "zstd") return Compression::zstd;
  if (text == "auto") return Compression::automatic;
  throw InvalidArgument("unknown compression '" + std::string(text) + "': expected none, lz4, zstd or auto");
}


namespace detail {

std::optional<std::uint64_t> find_invalid_bool(ConstBytes data) {
  constexpr std::size_t kBlock = 1u << 20;
  constexpr std::uint64_t kHighBits = 0xfefefefefefefefeull;
  const std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  std::atomic<std::uint64_t> first{none};
  parallel_for((data.size() + kBlock - 1) / kBlock, [&](std::size_t b) {
    std::size_t i = b * kBlock;
    if (i >= first.load(std::memory_order_relaxed)) return;  // an earlier block already failed
    const std::size_t end = std::min(data.size(), i + kBlock);
    for (; i + 8 <= end; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, data.data() + i, 8);
      if (word & kHighBits) break;
    }
    for (; i < end; ++i) {
      if (static_cast<unsigned>(data[i]) > 1) {
        std::uint64_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
    }
  });
  std::uint64_t at = first.load();
  return at == none ? std::nullopt : std::optional<std::uint64_t>(at);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Tensor

Tensor::Tensor() : shape_{0}, buffer_(Buffer::allocate(0)) {}

Tensor Tensor::Make(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<const Buffer> data) {
  if (!data) throw InvalidArgument("Tensor::Make: no buffer");
  std::uint64_t count = checked_element_count(shape, dtype);
  if (count * dtype_size(dtype) != data->size())
    throw InvalidArgument("Tensor::Make: shape needs " + std::to_string(count * dtype_size(dtype)) + " bytes of " +
                          std::string(dtype_name(dtype)) + " but the buffer holds " + std::to_string(data->size()));
  // values<T>() hands out T pointers into the buffer; a misaligned one is
  // undefined behaviour. Empty buffers are exempt: no element is ever read.
  const std::size_t alignment = std::min<std::size_t>(dtype_size(dtype), 16);
  if (data->size() && reinterpret_cast<std::uintptr_t>(data->data()) % alignment != 0)
    throw InvalidArgument("Tensor::Make: the buffer's data is not aligned to " + std::to_string(alignment) +
                          " bytes, as " + std::string(dtype_name(dtype)) + " elements need");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.elements_ = count;
  t.buffer_ = std::move(data);
  return t;
}

Tensor Tensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  std::uint64_t count = checked_element_count(shape, dtype);
  return Make(dtype, std::move(shape), Buffer::allocate(static_cast<std::size_t>(count * dtype_size(dtype))));
}

std::size_t Tensor::row_bytes() const {
  if (shape_.empty()) return nbytes();
  if (shape_[0] == 0)  // cannot overflow: checked_element_count checks the non-zero dimensions' product too
    return static_cast<std::size_t>(checked_element_count(std::span(shape_).subspan(1), dtype_) * dtype_size(dtype_));
  return nbytes() / static_cast<std::size_t>(shape_[0]);
}

std::byte* Tensor::mutable_data() {
  if (!buffer_->writable())
    throw InvalidArgument("tensor is read-only (it maps a stored payload file, or wraps memory read-only); "
                          "tensor.copy() gives a writable copy");
  return const_cast<std::byte*>(buffer_->data());
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t end) const {
  if (shape_.empty()) throw InvalidArgument("cannot take rows of a 0-d tensor");
  if (begin < 0 || end < begin || end > shape_[0])
    throw InvalidArgument("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") are outside [0, " +
                          std::to_string(shape_[0]) + ")");
  auto shape = shape_;
  shape[0] = end - begin;
  std::size_t rb = row_bytes();
  return Make(dtype_, std::move(shape),
              Buffer::slice(buffer_, static_cast<std::size_t>(begin) * rb, static_cast<std::size_t>(end - begin) * rb));
}

Tensor Tensor::copy() const {
  auto fresh = Buffer::allocate(nbytes());
  constexpr std::size_t kBlock = 4u << 20;
  std::byte* dst = fresh->mutable_data();
  parallel_for((nbytes() + kBlock - 1) / kBlock, [&](std::size_t b) {
    std::size_t begin = b * kBlock;
    std::memcpy(dst + begin, data() + begin, std::min(kBlock, nbytes() - begin));
  });
  return Make(dtype_, shape_, std::move(fresh));
}

bool Tensor::bit_equal(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && nbytes() == other.nbytes() &&
         (nbytes() == 0 || std::memcmp(data(), other.data(), nbytes()) == 0);
}

namespace {

// Elements of a floating type T equal as numbers (NaN unequal, -0 == +0).
template <class T>
bool numbers_equal(const std::byte* a, const std::byte* b, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      if (!(x.to_float() == y.to_float())) return false;  // exact: every half is a float
    } else if (!(x == y)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool operator==(const Tensor& a, const Tensor& b) {
  if (a.dtype_ != b.dtype_ || a.shape_ != b.shape_) return false;
  const std::byte *x = a.data(), *y = b.data();
  switch (a.dtype_) {
    case DType::float16: return numbers_equal<float16>(x, y, a.elements_);
    case DType::bfloat16: return numbers_equal<bfloat16>(x, y, a.elements_);
    case DType::float32: return numbers_equal<float>(x, y, a.elements_);
    case DType::float64: return numbers_equal<double>(x, y, a.elements_);
    case DType::complex64: return numbers_equal<float>(x, y, a.elements_ * 2);
    case DType::complex128: return numbers_equal<double>(x, y, a.elements_ * 2);
    default: return a.nbytes() == b.nbytes() && (a.nbytes() == 0 || std::memcmp(x, y, a.nbytes()) == 0);
  }
}

void Tensor::check_type(DType requested) const {
  if (requested != dtype_)
    throw InvalidArgument("tensor holds " + std::string(dtype_name(dtype_)) + ", not " +
                          std::string(dtype_name(requested)));
}

void Tensor::throw_size_mismatch(std::size_t got, std::uint64_t want) {
  throw InvalidArgument("shape needs " + std::to_string(want) + " values but " + std::to_string(got) + " were given");
}

// ---------------------------------------------------------------------------
// Payload encodings

namespace {

constexpr std::string_view kRawFile = "tensor.npy";
constexpr std::string_view kIndexFile = "tensor.chunks.npy";
// An encoded tensor's "encoding" is this prefix and the payload's own encoding.
constexpr std::string_view kEncodedPrefix = "encoded.";
// A chunked payload whose data chunks hold their elements' byte planes
// (shuffled chunk by chunk) is this prefix and the codec's encoding.
constexpr std::string_view kShuffledPrefix = "shuffled.";
// One whose data chunks hold their integers' differences (delta-coded chunk
// by chunk, before any shuffle) is this prefix and the rest of its name.
constexpr std::string_view kDeltaPrefix = "delta.";
constexpr std::size_t kHeaderBytes = 4096;
// The chunk sizes a reader accepts (docs/FORMAT.md §5.1): powers of two, so
// every chunk holds whole elements of any dtype.
constexpr std::size_t kMinChunkBytes = 64u << 10, kMaxChunkBytes = detail::kMaxFrameContent;
constexpr std::size_t kWindowBytes = 32u << 20;      // of input in flight at most
constexpr std::size_t kAutoMinBytes = 64u << 10;     // smaller tensors are never worth compressing
// auto compresses a tensor, and LZ4 a shuffled chunk, only to save at least this fraction.
constexpr double kAutoMinSaving = 0.10;

// A chunked payload's codec: the .npy cut into 1 MiB chunks, one frame of
// the codec's standard format each, frames concatenated (§5.6, §5.7).
struct ChunkCodec {
  std::string_view encoding;  // meta "encoding" of an unencoded tensor
  std::string_view file;      // the frames' payload file
  std::size_t chunk_bytes;    // what this build cuts the data into
  std::size_t min_frame;      // the fewest bytes a frame of ours takes
  // The most content bytes a frame of `n` bytes can restore, so a claimed
  // size the payload cannot hold is refused before it drives an allocation.
  std::uint64_t max_expansion;
  // Replaces `out` with the frame of `raw`; returns whether it stores the
  // chunk no smaller than it came.
  bool (*encode)(ConstBytes raw, int level, std::vector<std::byte>& out);
  // The same for a chunk of byte planes (shuffled) of elements `width` bytes wide.
  bool (*encode_planes)(ConstBytes raw, std::size_t width, int level, std::vector<std::byte>& out);
  std::size_t (*frame_bound)(std::size_t content);
  void (*decode)(ConstBytes frame, MutableBytes dst, std::string_view where);
};

const ChunkCodec kLz4Codec{
    "npy.lz4", "tensor.npy.lz4", kMaxChunkBytes, detail::kFrameOverhead,
    255,  // LZ4 cannot expand more than 255:1
    [](ConstBytes raw, int, std::vector<std::byte>& out) { return !detail::encode_frame(raw, true, out); },
    // A plane that hardly shrinks (an exponent plane of floats without
    // repeats) takes LZ4 15 times its usual time per byte; when samples of
    // the planes say the chunk would shrink by less than a tenth, the shuffle
    // did not help and the planes are stored as they are.
    [](ConstBytes raw, std::size_t, int, std::vector<std::byte>& out) {
      return !detail::encode_frame(raw, detail::lz4_worth_trying(raw, kAutoMinSaving), out);
    },
    [](std::size_t content) { return content + detail::kFrameOverhead; }, detail::decode_frame};

bool encode_zstd_planes(ConstBytes raw, std::size_t width, int level, std::vector<std::byte>& out) {
  detail::encode_zstd_frame(raw, level, out, width);
  return out.size() >= raw.size();
}

bool encode_zstd(ConstBytes raw, int level, std::vector<std::byte>& out) { return encode_zstd_planes(raw, 1, level, out); }

// Chunks of 256 KiB: a row read decodes whole chunks, and zstd decodes
// about a byte a nanosecond here, so 1 MiB chunks made reading 10 rows of a
// compressed tensor take 1.2-1.3 ms (docs/FORMAT.md §5.6); the bytes grow by
// 0-4%.
const ChunkCodec kZstdCodec{
    "npy.zst", "tensor.npy.zst", 256u << 10, detail::kMinZstdFrame,
    // Bounded by the frame count, not by the codec: a chunk of 1 MiB in a
    // frame of the fewest bytes.
    detail::kMaxFrameContent / detail::kMinZstdFrame,
    encode_zstd, encode_zstd_planes, detail::zstd_frame_bound, detail::decode_zstd_frame};

const ChunkCodec* codec_named(std::string_view encoding) {
  for (const ChunkCodec* c : {&kLz4Codec, &kZstdCodec})
    if (c->encoding == encoding) return c;
  return nullptr;
}

ConstBytes data_chunk(const Tensor& t, std::size_t k, std::size_t chunk_bytes) {  // k >= 1
  std::size_t begin = (k - 1) * chunk_bytes;
  return {t.data() + begin, std::min(chunk_bytes, t.nbytes() - begin)};
}

std::size_t data_chunks(std::uint64_t nbytes, std::size_t chunk_bytes) {
  return static_cast<std::size_t>((nbytes + chunk_bytes - 1) / chunk_bytes);
}

// What `auto` learns from a sample: 8 evenly spaced windows of 64 KiB
// (LZ4's own window, so a window sees every match LZ4 could use), each
// compressed as it is and, for elements wider than a byte, as byte planes.
// Sampling a fixed amount keeps the probe at a fraction of the cost of
// hashing, whatever the tensor's size; sizes alone decide, so the choice
// (and the digest) is the same on every run.
struct AutoSample {
  std::uint64_t raw = 0, lz4 = 0;
  std::uint64_t shuffled_lz4 = 0;  // byte planes; 0 for 1-byte elements
  std::uint64_t delta_lz4 = 0;     // chunk delta (then planes when wider than a byte); 0 unless sampled

  // The fewest bytes the sample took without delta.
  std::uint64_t best_without_delta() const { return shuffle() ? shuffled_lz4 : lz4; }
  // Chunk delta where it takes at most 19/20 of the best without it: the
  // 64 KiB windows understate what it saves on whole chunks (smooth uint8
  // images: 0.93 sampled, 0.78 in all), and LZ4 runs faster the more it
  // finds, so on images it saved faster than LZ4 alone; on mostly rising
  // ids a little slower than planes alone, for 0.6x their bytes
  // (docs/FORMAT.md §5.7).
  bool delta() const { return delta_lz4 && 20 * delta_lz4 <= 19 * best_without_delta(); }
  // LZ4 only where the sample shrinks by more than 10%: where it does not,
  // raw is faster to save than any codec.
  bool compress() const {
    return static_cast<double>(delta() ? delta_lz4 : lz4) < (1.0 - kAutoMinSaving) * static_cast<double>(raw);
  }
  // Byte planes only where they take at most 3/4 of LZ4's bytes: LZ4 runs
  // faster the more it finds to compress, which pays for the shuffle, so
  // the save is no slower than LZ4 alone (docs/FORMAT.md §5.7).
  bool shuffle() const { return shuffled_lz4 && 4 * shuffled_lz4 <= 3 * lz4; }

  nlohmann::json describe() const {
    nlohmann::json out = {{"sample_bytes", raw}, {"lz4", lz4}};
    if (shuffled_lz4) out["shuffled_lz4"] = shuffled_lz4;
    if (delta_lz4) out["delta_lz4"] = delta_lz4;
    return out;
  }
};

// `with_delta`: also try chunk delta (integers only).
AutoSample sample_for_auto(const Tensor& t, bool with_delta) {
  constexpr std::size_t kSamples = 8, kWindow = 64u << 10;
  const std::size_t n = t.nbytes(), width = dtype_size(t.dtype());
  const std::size_t windows = std::min(kSamples, std::max<std::size_t>(1, n / kWindow));
  std::vector<AutoSample> parts(windows);
  parallel_for(windows, [&](std::size_t s) {
    // Window starts on an element, so its byte planes are whole.
    const std::size_t size = std::min(kWindow, n) / width * width;
    const std::size_t begin = windows == 1 ? 0 : s * (n - size) / (windows - 1) / width * width;
    const ConstBytes window(t.data() + begin, size);
    parts[s].raw = size;
    parts[s].lz4 = detail::lz4_block_size(window);
    thread_local std::vector<std::byte> planes, differences;
    planes.resize(size);
    if (width > 1) {
      shuffle_bytes(window, width, planes);
      parts[s].shuffled_lz4 = detail::lz4_block_size(planes);
    }
    if (with_delta) {
      differences.resize(size);
      delta_bytes(window, width, differences);
      if (width > 1) shuffle_bytes(differences, width, planes);
      parts[s].delta_lz4 = detail::lz4_block_size(width > 1 ? planes : differences);
    }
  });
  AutoSample total;
  for (const auto& p : parts)
    total.raw += p.raw, total.lz4 += p.lz4, total.shuffled_lz4 += p.shuffled_lz4, total.delta_lz4 += p.delta_lz4;
  return total;
}

// What is done to each data chunk before its codec: its integers' differences
// (`delta`), then its elements' byte planes (`shuffle`).
struct ChunkFilters {
  bool delta = false, shuffle = false;
  std::string prefix() const {
    return std::string(delta ? kDeltaPrefix : "") + std::string(shuffle ? kShuffledPrefix : "");
  }
};

void save_packed(const Tensor& t, const std::string& header, const ChunkCodec& codec, int level, ChunkFilters filters,
                 ArtifactWriter& out) {
  const std::size_t chunk_bytes = codec.chunk_bytes;
  const std::size_t chunks = 1 + data_chunks(t.nbytes(), chunk_bytes);
  std::vector<std::uint64_t> index;
  index.reserve(2 * (chunks + 1));
  FileStream stream = out.open_stream(codec.file, codec.frame_bound(header.size()) +
                                                      (chunks - 1) * codec.frame_bound(chunk_bytes));
  std::vector<std::vector<std::byte>> frames(std::min(kWindowBytes / chunk_bytes, chunks));
  std::uint64_t stored_raw = 0;
  std::uint64_t raw_offset = 0;
  for (std::size_t first = 0; first < chunks; first += frames.size()) {
    std::size_t count = std::min(frames.size(), chunks - first);
    std::vector<char> stored(count);
    parallel_for(count, [&](std::size_t i) {
      std::size_t k = first + i;
      ConstBytes raw = k == 0 ? ConstBytes(reinterpret_cast<const std::byte*>(header.data()), header.size())
                              : data_chunk(t, k, chunk_bytes);
      const std::size_t width = dtype_size(t.dtype());
      if (filters.delta && k > 0) {
        thread_local std::vector<std::byte> differences;
        differences.resize(raw.size());
        delta_bytes(raw, width, differences);
        raw = differences;
      }
      if (filters.shuffle && k > 0) {
        thread_local std::vector<std::byte> planes;
        planes.resize(raw.size());
        shuffle_bytes(raw, width, planes);
        raw = planes;
      }
      stored[i] = filters.shuffle && k > 0 ? codec.encode_planes(raw, width, level, frames[i]) : codec.encode(raw, level, frames[i]);
    });
    std::vector<ConstBytes> parts;
    std::uint64_t packed_offset = stream.size();
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t k = first + i;
      index.push_back(packed_offset);
      index.push_back(raw_offset);
      packed_offset += frames[i].size();
      raw_offset += k == 0 ? header.size() : data_chunk(t, k, chunk_bytes).size();
      stored_raw += stored[i];
      parts.emplace_back(frames[i].data(), frames[i].size());
    }
    stream.append(parts);
    out.report_progress(raw_offset);  // in .npy bytes consumed: what the user's file holds, not what was written
  }
  index.push_back(stream.size());
  index.push_back(raw_offset);
  stream.close();

  std::vector<std::int64_t> index_shape = {static_cast<std::int64_t>(chunks + 1), 2};
  std::string index_header = make_npy_header(DType::uint64, index_shape, 64);
  out.write_file(kIndexFile, {ConstBytes(reinterpret_cast<const std::byte*>(index_header.data()), index_header.size()),
                              ConstBytes(reinterpret_cast<const std::byte*>(index.data()), index.size() * 8)});
  out.meta()["chunk_bytes"] = chunk_bytes;
  out.meta()["chunks"] = chunks;
  out.meta()["stored_chunks"] = stored_raw;
}

struct Layout {
  // The payload's array: the tensor itself, or for an encoded tensor the
  // 1-d array of its encoded elements.
  DType dtype;
  std::vector<std::int64_t> shape;
  // An encoded tensor's recipe (docs/FORMAT.md §6.4) and what it decodes to.
  std::optional<nlohmann::json> recipe;
  DType value_dtype;
  std::vector<std::int64_t> value_shape;
  std::uint64_t nbytes;
  std::string header;         // the header this build writes
  std::string legacy_header;  // for a tensor under 64 KiB, the 4096-byte header of earlier builds; else empty
  const ChunkCodec* codec;  // null for a plain tensor.npy
  std::size_t chunk_bytes = 0;  // the data chunks' size, with a codec
  bool shuffled = false;    // data chunks hold byte planes (§5.6)
  bool delta = false;       // data chunks hold differences of integers (§5.6)

  // The header a payload starts with when its data starts at `offset`, or
  // null when no header of this tensor is that long.
  const std::string* header_ending_at(std::uint64_t offset) const {
    if (offset == header.size()) return &header;
    if (!legacy_header.empty() && offset == legacy_header.size()) return &legacy_header;
    return nullptr;
  }
};

Layout read_layout(const ArtifactReader& in) {
  const auto& meta = in.meta();
  auto bad = [&](const std::string& why) { throw CorruptData(in.label() + ": tensor metadata " + why); };
  if (in.manifest().materializer != materializer<Tensor>::name)
    throw TypeMismatch(in.label() + " is a '" + in.manifest().materializer + "' artifact, not a tensor");
  in.require_version(materializer<Tensor>::version);
  Layout l;
  if (!meta.contains("dtype") || !meta["dtype"].is_string()) bad("has no dtype");
  try {
    l.dtype = dtype_from_name(meta["dtype"].get<std::string>());
  } catch (const Unsupported& e) {
    throw Unsupported(in.label() + ": " + e.what());
  }
  if (!meta.contains("shape") || !meta["shape"].is_array()) bad("has no shape");
  for (const auto& d : meta["shape"]) {
    if (!d.is_number_integer()) bad("shape holds a non-integer");
    // JSON integers above 2^63 - 1 arrive unsigned; read as int64 they would
    // wrap to a negative number and be reported as one.
    if (d.is_number_unsigned() && d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      bad("shape dimension " + std::to_string(d.get<std::uint64_t>()) + " is out of range");
    l.shape.push_back(d.get<std::int64_t>());
  }
  try {
    l.nbytes = checked_element_count(l.shape, l.dtype) * dtype_size(l.dtype);
  } catch (const InvalidArgument& e) {
    throw CorruptData(in.label() + ": " + e.what());
  }
  if (!meta.contains("encoding") || !meta["encoding"].is_string()) bad("has no encoding");
  std::string encoding = meta["encoding"].get<std::string>();
  l.value_dtype = l.dtype;
  l.value_shape = l.shape;
  if (encoding.starts_with(kEncodedPrefix)) {
    // The payload holds the encoded elements: check the recipe describes this
    // tensor, then lay the payload out as its stored 1-d array.
    encoding.erase(0, kEncodedPrefix.size());
    if (!meta.contains("recipe") || !meta["recipe"].is_object()) bad("has no recipe for its encoding");
    const auto& recipe = meta["recipe"];
    if (recipe.value("dtype", nlohmann::json()) != meta["dtype"] ||
        recipe.value("count", nlohmann::json()) != nlohmann::json(l.nbytes / dtype_size(l.dtype)))
      bad("recipe does not describe this tensor's dtype and element count");
    const auto stored = recipe.value("stored_dtype", nlohmann::json());
    try {
      l.dtype = dtype_from_name(stored.is_string() ? stored.get<std::string>() : std::string());
    } catch (const Unsupported&) {
      bad("recipe names no stored dtype");
    }
    l.shape = {static_cast<std::int64_t>(l.nbytes / dtype_size(l.value_dtype))};
    l.nbytes = static_cast<std::uint64_t>(l.shape[0]) * dtype_size(l.dtype);
    l.recipe = recipe;
  }
  // Only chunked payloads are delta-coded or shuffled chunk by chunk.
  std::string_view codec_name = encoding;
  auto strip = [&](std::string_view prefix) {
    const bool has = codec_name.starts_with(prefix);
    if (has) codec_name.remove_prefix(prefix.size());
    return has;
  };
  const bool delta = strip(kDeltaPrefix), shuffled = strip(kShuffledPrefix);
  l.codec = codec_named(codec_name);
  l.shuffled = shuffled && l.codec;
  l.delta = delta && l.codec;
  if (encoding != "npy" && !l.codec)
    throw Unsupported(in.label() + ": unknown tensor encoding '" + encoding +
                      "' (this reader knows npy, npy.lz4 and npy.zst, the last two also after delta., shuffled. "
                      "or both): written by a newer Amphora, or damaged");
  if (l.delta && !is_integer(l.dtype))
    bad("encoding '" + encoding + "' delta-codes " + std::string(dtype_name(l.dtype)) + " chunks; only integers are");
  if (l.codec) {
    const auto& c = meta.contains("chunk_bytes") ? meta["chunk_bytes"] : nlohmann::json();
    const std::uint64_t n = c.is_number_unsigned() ? c.get<std::uint64_t>() : 0;
    if (n < kMinChunkBytes || n > kMaxChunkBytes || (n & (n - 1)) != 0)
      bad("has an unsupported chunk_bytes " + (c.is_null() ? std::string("(none)") : c.dump()) + " (a power of two from " +
          std::to_string(kMinChunkBytes) + " to " + std::to_string(kMaxChunkBytes) + ")");
    l.chunk_bytes = static_cast<std::size_t>(n);
  }
  l.header = make_tensor_npy_header(l.dtype, l.shape);
  if (l.header.size() != kHeaderBytes) l.legacy_header = make_npy_header(l.dtype, l.shape, kHeaderBytes);
  return l;
}

void check_header(const Layout& l, const std::string& expected, ConstBytes bytes, const ArtifactReader& in,
                  std::string_view file) {
  if (bytes.size() < expected.size() || std::memcmp(bytes.data(), expected.data(), expected.size()) != 0)
    throw CorruptData(in.label() + ": " + std::string(file) + " header does not match its manifest (" +
                      std::string(dtype_name(l.dtype)) + ", " + std::to_string(l.shape.size()) + "-d)");
}

void check_bools(const Layout& l, ConstBytes data, std::uint64_t first_element, const ArtifactReader& in,
                 std::string_view file) {
  if (l.dtype != DType::bool_) return;
  if (auto bad = detail::find_invalid_bool(data))
    throw CorruptData(in.label() + ": " + std::string(file) + ": bool element " + std::to_string(first_element + *bad) +
                      " holds the byte " + std::to_string(static_cast<unsigned>(data[*bad])) +
                      "; a bool must be 0 or 1");
}

// tensor.npy of `size` bytes holds exactly a header of `header_size` and the data.
void check_raw_size(const ArtifactReader& in, const Layout& l, std::uint64_t size, std::uint64_t header_size) {
  if (size != header_size + l.nbytes)
    throw CorruptData(in.label() + ": " + std::string(kRawFile) + " is " + std::to_string(size) +
                      " bytes; its shape needs " + std::to_string(header_size + l.nbytes));
}

// How a check reaches the payload. Loads map it (zero-copy); validation
// reads it with pread, so a stored file truncated by someone else while it is
// checked is reported as damage instead of raising SIGBUS.
enum class Access { map, read };

// tensor.npy checked against the manifest: header and exact size.
struct RawPayload {
  std::shared_ptr<const Buffer> file;  // mapped; null with Access::read
  std::uint64_t size = 0;
  std::size_t data_offset = kHeaderBytes;
  ConstBytes data() const { return file->bytes().subspan(data_offset); }
};

RawPayload open_raw(const ArtifactReader& in, const Layout& l, Access access) {
  RawPayload p;
  if (access == Access::map) {
    p.file = in.load_file(kRawFile);
    p.size = p.file->size();
  } else {
    p.size = in.file_size(kRawFile);
  }
  // The payload starts with one of the headers the tensor accepts (§5.4):
  // this build's, or the 4096-byte one of earlier builds. A read reads this
  // build's first, and the longer one only when that does not match.
  auto read_head = [&](const std::string& h) {
    return p.file ? p.file : in.read(kRawFile, 0, static_cast<std::size_t>(std::min<std::uint64_t>(p.size, h.size())));
  };
  auto starts_with = [](const std::shared_ptr<const Buffer>& head, const std::string& h) {
    return !h.empty() && head->size() >= h.size() && std::memcmp(head->data(), h.data(), h.size()) == 0;
  };
  auto head = read_head(l.header);
  bool legacy = false;
  if (!starts_with(head, l.header) && !l.legacy_header.empty()) {
    auto longer = read_head(l.legacy_header);
    if (starts_with(longer, l.legacy_header)) legacy = true, head = std::move(longer);
  }
  const std::string& expected = legacy ? l.legacy_header : l.header;
  check_header(l, expected, head->bytes(), in, kRawFile);
  p.data_offset = expected.size();
  check_raw_size(in, l, p.size, p.data_offset);
  return p;
}

// The chunk index of a packed tensor, validated against the file it indexes.
struct ChunkIndex {
  const ChunkCodec* codec = nullptr;
  std::size_t shuffle_width = 0;  // data chunks hold byte planes of elements this wide; 0: as they are
  std::size_t delta_width = 0;    // and differences of integers this wide; 0: the values
  std::shared_ptr<const Buffer> file;  // mapped; null with Access::read
  std::uint64_t file_size = 0;
  std::vector<std::uint64_t> packed;  // frame k is [packed[k], packed[k+1])
  std::vector<std::uint64_t> raw;     // and restores .npy bytes [raw[k], raw[k+1])
  std::size_t data_offset = kHeaderBytes;  // raw[1]: where the array data starts in the .npy
};

ChunkIndex read_index(const ArtifactReader& in, const Layout& l, Access access) {
  ChunkIndex ix;
  ix.codec = l.codec;
  ix.shuffle_width = l.shuffled ? dtype_size(l.dtype) : 0;
  ix.delta_width = l.delta ? dtype_size(l.dtype) : 0;
  const std::string_view file = l.codec->file;
  if (access == Access::map) {
    ix.file = in.map(file);
    ix.file_size = ix.file->size();
  } else {
    ix.file_size = in.file_size(file);
  }
  std::string where = in.label() + ": " + std::string(kIndexFile);
  // The index is small: read, not mapped, whatever the access.
  Tensor table = read_npy(in.read(kIndexFile, 0, static_cast<std::size_t>(in.file_size(kIndexFile))), where);
  std::size_t chunks = 1 + data_chunks(l.nbytes, l.chunk_bytes);
  if (table.dtype() != DType::uint64 || table.shape() != std::vector<std::int64_t>{std::int64_t(chunks + 1), 2})
    throw CorruptData(where + " should be uint64 of shape (" + std::to_string(chunks + 1) + ", 2)");
  auto v = table.values<std::uint64_t>();
  for (std::size_t k = 0; k <= chunks; ++k) {
    ix.packed.push_back(v[2 * k]);
    ix.raw.push_back(v[2 * k + 1]);
  }
  // Chunk 0 restores the header, in either length the tensor accepts (§5.4).
  if (!l.header_ending_at(ix.raw[1])) throw CorruptData(where + ": chunk 1 has a wrong raw offset");
  ix.data_offset = static_cast<std::size_t>(ix.raw[1]);
  for (std::size_t k = 0; k <= chunks; ++k) {
    std::uint64_t expect_raw =
        k == 0 ? 0 : std::min<std::uint64_t>(ix.data_offset + (k - 1) * l.chunk_bytes, ix.data_offset + l.nbytes);
    if (ix.raw[k] != expect_raw) throw CorruptData(where + ": chunk " + std::to_string(k) + " has a wrong raw offset");
    // Written without additions, which a hostile offset near 2^64 would wrap.
    if (ix.packed[k] > ix.file_size ||
        (k > 0 && (ix.packed[k] < ix.packed[k - 1] || ix.packed[k] - ix.packed[k - 1] < l.codec->min_frame)))
      throw CorruptData(where + ": chunk " + std::to_string(k == 0 ? 0 : k - 1) + " has an impossible packed offset or size");
  }
  if (ix.packed.front() != 0 || ix.packed.back() != ix.file_size)
    throw CorruptData(where + " does not cover " + std::string(file) + " (" + std::to_string(ix.file_size) +
                      " bytes) exactly");
  return ix;
}

// Frame k's bytes: a view of the mapping, or read into this thread's
// reusable buffer (valid until the thread's next call).
ConstBytes frame_bytes(const ArtifactReader& in, const ChunkIndex& ix, std::size_t k) {
  auto length = static_cast<std::size_t>(ix.packed[k + 1] - ix.packed[k]);
  if (ix.file) return {ix.file->data() + ix.packed[k], length};
  thread_local std::vector<std::byte> frame;
  frame.resize(length);
  in.read_into(ix.codec->file, ix.packed[k], length, frame.data());
  return frame;
}

std::string chunk_where(const ArtifactReader& in, const ChunkIndex& ix, std::size_t k) {
  return in.label() + ": " + std::string(ix.codec->file) + " chunk " + std::to_string(k);
}

// Decodes chunk k into dst (its whole content); only dst's first `used`
// bytes need to hold the data (delta chunks sum no further).
void decode_chunk(const ArtifactReader& in, const ChunkIndex& ix, std::size_t k, MutableBytes dst,
                  std::size_t used = std::numeric_limits<std::size_t>::max()) {
  if (k == 0 || ix.shuffle_width == 0) {
    ix.codec->decode(frame_bytes(in, ix, k), dst, chunk_where(in, ix, k));
  } else {
    thread_local std::vector<std::byte> planes;
    planes.resize(dst.size());
    ix.codec->decode(frame_bytes(in, ix, k), planes, chunk_where(in, ix, k));
    unshuffle_bytes(planes, ix.shuffle_width, dst);
  }
  if (k > 0 && ix.delta_width) {
    const std::size_t elements = (std::min(dst.size(), used) + ix.delta_width - 1) / ix.delta_width;
    undelta_bytes(dst.first(elements * ix.delta_width), ix.delta_width);
  }
}

// Decodes data bytes [begin, end) (offsets into the array data) into dst.
void decode_range(const ArtifactReader& in, const ChunkIndex& ix, std::uint64_t begin, std::uint64_t end,
                  std::byte* dst) {
  if (begin >= end) return;
  std::uint64_t lo = ix.data_offset + begin, hi = ix.data_offset + end;
  std::size_t first = static_cast<std::size_t>(std::upper_bound(ix.raw.begin(), ix.raw.end(), lo) - ix.raw.begin()) - 1;
  std::size_t last = static_cast<std::size_t>(std::lower_bound(ix.raw.begin(), ix.raw.end(), hi) - ix.raw.begin());
  parallel_for(last - first, [&](std::size_t i) {
    std::size_t k = first + i;
    std::uint64_t c_lo = ix.raw[k], c_hi = ix.raw[k + 1];
    if (c_lo >= lo && c_hi <= hi) {
      decode_chunk(in, ix, k, {dst + (c_lo - lo), c_hi - c_lo});
      return;
    }
    thread_local std::vector<std::byte> scratch;
    scratch.resize(c_hi - c_lo);
    std::uint64_t from = std::max(lo, c_lo), to = std::min(hi, c_hi);
    decode_chunk(in, ix, k, scratch, static_cast<std::size_t>(to - c_lo));
    std::memcpy(dst + (from - lo), scratch.data() + (from - c_lo), to - from);
  });
}

// The index, expansion bound and header frame of a packed tensor: every
// check that comes before decoding its data.
ChunkIndex open_packed(const ArtifactReader& in, const Layout& l, Access access) {
  ChunkIndex ix = read_index(in, l, access);
  // A claim beyond the codec's expansion bound is a lie about the payload and
  // must not drive an allocation.
  if (l.nbytes / l.codec->max_expansion > ix.file_size)
    throw CorruptData(in.label() + ": " + std::to_string(ix.file_size) + " packed bytes cannot hold " +
                      std::to_string(l.nbytes) + " bytes of tensor data");
  std::vector<std::byte> header(ix.data_offset);
  decode_chunk(in, ix, 0, header);
  check_header(l, *l.header_ending_at(ix.data_offset), header, in, l.codec->file);
  return ix;
}

}  // namespace

namespace {

// Writes `payload` (the tensor, or its encoded elements) as tensor.npy or
// frames of a codec, as the options say; `observe` sees tensor.npy's ranges
// as they are hashed. Returns the payload's encoding name.
std::string write_payload(const Tensor& payload, const TensorOptions& options, ChunkFilters filters,
                          ArtifactWriter& out, const ArtifactWriter::Observer& observe) {
  // `auto` may shuffle chunks on its own (sample_for_auto).
  std::string header = make_tensor_npy_header(payload.dtype(), payload.shape());
  const Compression policy = options.compression;
  const ChunkCodec* codec = policy == Compression::zstd ? &kZstdCodec : policy == Compression::lz4 ? &kLz4Codec : nullptr;
  if (policy == Compression::automatic && payload.nbytes() >= kAutoMinBytes) {
    // Not over a payload a recipe already transformed.
    const ArrayEncoding& e = options.encoding;
    const bool untransformed = !e.decimal && !e.delta && !e.squeeze && !e.shuffle;
    const AutoSample sample = sample_for_auto(payload, untransformed && is_integer(payload.dtype()));
    out.meta()["auto"] = sample.describe();
    if (sample.compress()) {
      codec = &kLz4Codec;
      filters.delta = sample.delta();
      filters.shuffle = !e.shuffle && (sample.delta() ? dtype_size(payload.dtype()) > 1 : sample.shuffle());
    }
  }
  if (codec) {
    const int level = options.level ? options.level : kDefaultZstdLevel;
    save_packed(payload, header, *codec, level, filters, out);
    if (codec == &kZstdCodec) out.meta()["zstd_level"] = level;
    return filters.prefix() + std::string(codec->encoding);
  }
  const ConstBytes parts[] = {ConstBytes(reinterpret_cast<const std::byte*>(header.data()), header.size()),
                              ConstBytes(payload.data(), payload.nbytes())};
  out.write_file(kRawFile, parts, observe);
  return "npy";
}

// The payload array of `l`, mapped or decompressed, checked (defined below load).
Tensor load_payload(const ArtifactReader& in, const Layout& l);

// A decoded tensor from the payload `stored` of an encoded one.
Tensor decode_tensor(const ArtifactReader& in, const Layout& l, const Tensor& stored) {
  std::vector<std::byte> bytes =
      decode_array(*l.recipe, ConstBytes(stored.data(), stored.nbytes()), in.label() + ": tensor payload");
  if (l.value_dtype == DType::bool_)
    if (auto bad = detail::find_invalid_bool(bytes))
      throw CorruptData(in.label() + ": decoded bool element " + std::to_string(*bad) + " is not 0 or 1");
  return Tensor::Make(l.value_dtype, l.value_shape, Buffer::adopt(std::move(bytes)));
}

}  // namespace

void materializer<Tensor>::save(const Tensor& t, ArtifactWriter& out) {
  if (t.dtype() == DType::bool_)
    if (auto bad = detail::find_invalid_bool({t.data(), t.nbytes()}))
      throw InvalidArgument("cannot save a bool tensor whose element " + std::to_string(*bad) + " holds the byte " +
                            std::to_string(static_cast<unsigned>(t.data()[*bad])) + ": a bool must be 0 or 1");
  auto& meta = out.meta();
  meta["dtype"] = dtype_name(t.dtype());
  meta["shape"] = t.shape();
  const TensorOptions options = out.options().options.get<TensorOptions>();
  if (options.level != 0) {
    if (options.compression != Compression::zstd)
      throw InvalidArgument("a compression level applies to zstd only, not to compression '" +
                            std::string(to_string(options.compression)) + "'");
    if (options.level < kMinZstdLevel || options.level > kMaxZstdLevel)
      throw InvalidArgument("zstd level " + std::to_string(options.level) + " is outside " +
                            std::to_string(kMinZstdLevel) + ".." + std::to_string(kMaxZstdLevel));
  }
  // A chunked codec shuffles chunk by chunk (so a row read decodes only its
  // chunks, and every chunk is shuffled on its own core), and delta-codes
  // integers chunk by chunk unless squeeze needs the differences of the
  // whole; the other transforms, and these without such a codec, go through
  // encode_array.
  const bool chunked = options.compression == Compression::lz4 || options.compression == Compression::zstd;
  ArrayEncoding encoding = options.encoding;
  // Squeeze after delta narrows nothing when some difference needs every
  // byte (values that fall wrap around): the differences are then taken
  // chunk by chunk inside the codec, as for delta alone, and the stored form
  // is delta's (one pass to find out, instead of a whole encoded copy).
  if (chunked && encoding.delta && encoding.squeeze && !encoding.decimal && is_integer(t.dtype()) &&
      dtype_size(delta_squeeze_dtype(t.dtype(), ConstBytes(t.data(), t.nbytes()))) == dtype_size(t.dtype()))
    encoding.squeeze = false;
  ChunkFilters filters;
  filters.shuffle = chunked && encoding.shuffle;
  filters.delta = chunked && encoding.delta && !encoding.squeeze && !encoding.decimal && is_integer(t.dtype());
  if (filters.shuffle) encoding.shuffle = false;
  if (filters.delta) encoding.delta = false;
  if (encoding.decimal || encoding.delta || encoding.squeeze || encoding.shuffle) {
    EncodedArray encoded = encode_array(t.dtype(), ConstBytes(t.data(), t.nbytes()), encoding);
    const auto count = static_cast<std::int64_t>(encoded.bytes.size() / dtype_size(encoded.stored_dtype));
    Tensor stored = Tensor::Make(encoded.stored_dtype, {count}, Buffer::adopt(std::move(encoded.bytes)));
    detail::TensorStats stats(t, 0);  // of the values, not of their encoding
    meta["encoding"] = std::string(kEncodedPrefix) + write_payload(stored, options, filters, out, {});
    meta["recipe"] = std::move(encoded.recipe);
    meta["stats"] = stats.finish();
    return;
  }
  detail::TensorStats stats(t, make_tensor_npy_header(t.dtype(), t.shape()).size());
  // Summarised while the hashing threads have each range in cache.
  meta["encoding"] = write_payload(t, options, filters, out,
                                   [&](std::uint64_t at, ConstBytes bytes) { stats.observe(at, bytes); });
  meta["stats"] = stats.finish();
}

Tensor materializer<Tensor>::load(const ArtifactReader& in) {
  Layout l = read_layout(in);
  if (l.recipe) return decode_tensor(in, l, load_payload(in, l));
  return load_payload(in, l);
}

namespace {

Tensor load_payload(const ArtifactReader& in, const Layout& l) {
  if (!l.codec) {
    RawPayload raw = open_raw(in, l, Access::map);
    check_bools(l, raw.data(), 0, in, kRawFile);
    return Tensor::Make(l.dtype, l.shape, Buffer::slice(raw.file, raw.data_offset, static_cast<std::size_t>(l.nbytes)));
  }
  // Compressed data is decoded into fresh memory anyway: read each frame with
  // pread rather than map the file, so a truncated file cannot raise SIGBUS
  // and the compressed bytes are not all resident beside the result.
  ChunkIndex ix = open_packed(in, l, Access::read);
  auto data = Buffer::allocate(static_cast<std::size_t>(l.nbytes));
  decode_range(in, ix, 0, l.nbytes, data->mutable_data());
  check_bools(l, data->bytes(), 0, in, l.codec->file);
  return Tensor::Make(l.dtype, l.shape, std::move(data));
}

}  // namespace

ValueIdentity materializer<Tensor>::identity(const Tensor& tensor) {
  std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(tensor.data())) + ' ' +
                    std::to_string(tensor.nbytes()) + ' ' + std::string(dtype_name(tensor.dtype()));
  for (auto d : tensor.shape()) key += ' ' + std::to_string(d);
  return {tensor.buffer(), std::move(key)};
}

void materializer<Tensor>::validate(const ArtifactReader& in) {
  Layout l = read_layout(in);
  if (l.recipe) {  // the recipe is only checked by following it
    (void)load(in);
    return;
  }
  if (!l.codec) {
    RawPayload raw = open_raw(in, l, Access::read);
    if (l.dtype == DType::bool_) {
      constexpr std::size_t kBlock = 4u << 20;
      std::size_t blocks = static_cast<std::size_t>((l.nbytes + kBlock - 1) / kBlock);
      std::vector<std::exception_ptr> failures(blocks);
      parallel_for(blocks, [&](std::size_t b) {
        try {
          std::uint64_t at = static_cast<std::uint64_t>(b) * kBlock;
          auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, l.nbytes - at));
          check_bools(l, in.read(kRawFile, raw.data_offset + at, n)->bytes(), at, in, kRawFile);
        } catch (...) {
          failures[b] = std::current_exception();
        }
      });
      for (const auto& failure : failures)
        if (failure) std::rethrow_exception(failure);
    }
    return;
  }
  ChunkIndex ix = open_packed(in, l, Access::read);
  // Every data frame is decoded, one at a time per thread, so damage is
  // found without holding the whole tensor. Failures are kept per chunk and
  // the first in file order is reported, whichever thread met it first.
  const std::size_t chunks = ix.raw.size() - 1;
  std::vector<std::exception_ptr> failures(chunks);
  parallel_for(chunks - 1, [&](std::size_t i) {
    const std::size_t k = i + 1;
    try {
      thread_local std::vector<std::byte> scratch;
      scratch.resize(ix.raw[k + 1] - ix.raw[k]);
      decode_chunk(in, ix, k, scratch);
      check_bools(l, scratch, ix.raw[k] - ix.data_offset, in, l.codec->file);
    } catch (...) {
      failures[k] = std::current_exception();
    }
  });
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

namespace {

// Whether every transform of `recipe` maps each element on its own (decimal,
// squeeze), so any run of stored elements decodes without the rest.
bool elementwise(const nlohmann::json& recipe) {
  const auto transforms = recipe.value("transforms", nlohmann::json::array());
  return transforms.is_array() && std::all_of(transforms.begin(), transforms.end(), [](const nlohmann::json& t) {
           return t == "decimal" || t == "squeeze";
         });
}

// Bytes [lo, hi) of the payload array's data: read with the header in one
// open from tensor.npy (mapped for a small tensor with the header of
// earlier builds), or decoded from the chunks that hold them; checked as a
// whole load checks them.
std::shared_ptr<const Buffer> payload_bytes(const ArtifactReader& in, const Layout& l, std::uint64_t lo,
                                            std::uint64_t hi) {
  auto data = Buffer::allocate(static_cast<std::size_t>(hi - lo));
  if (l.codec) {
    ChunkIndex ix = open_packed(in, l, Access::read);
    decode_range(in, ix, lo, hi, data->mutable_data());
  } else if (!l.legacy_header.empty()) {
    RawPayload raw = open_raw(in, l, Access::map);
    if (hi > lo) std::memcpy(data->mutable_data(), raw.data().data() + lo, static_cast<std::size_t>(hi - lo));
  } else {
    // Mapping a large file to take a few rows costs more than reading them
    // (and a remote file would be fetched whole). The checks are
    // open_raw's: the exact size, then the header.
    check_raw_size(in, l, in.file_size(kRawFile), l.header.size());
    std::vector<std::byte> head(l.header.size());
    const ArtifactReader::Range ranges[] = {{0, head.size(), head.data()},
                                            {l.header.size() + lo, data->size(), data->mutable_data()}};
    in.read_ranges(kRawFile, ranges);
    check_header(l, l.header, head, in, kRawFile);
  }
  check_bools(l, data->bytes(), lo, in, l.codec ? l.codec->file : kRawFile);
  return data;
}

}  // namespace

Tensor load_tensor_rows(const ArtifactReader& in, std::int64_t begin, std::int64_t end) {
  Layout l = read_layout(in);
  const auto& shape = l.value_shape;  // the tensor's, not its encoded payload's
  if (shape.empty()) throw InvalidArgument(in.label() + " is a 0-d tensor; it has no rows");
  if (begin < 0 || end < begin || end > shape[0])
    throw InvalidArgument(in.label() + ": rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") are outside [0, " + std::to_string(shape[0]) + ")");
  std::uint64_t per_row = 1;  // elements
  for (std::size_t k = 1; k < shape.size(); ++k) per_row *= static_cast<std::uint64_t>(shape[k]);
  auto rows_shape = shape;
  rows_shape[0] = end - begin;
  const std::uint64_t first = per_row * static_cast<std::uint64_t>(begin), count = per_row * static_cast<std::uint64_t>(end - begin);
  if (!l.recipe) {
    const std::uint64_t width = dtype_size(l.dtype);
    return Tensor::Make(l.dtype, std::move(rows_shape), payload_bytes(in, l, first * width, (first + count) * width));
  }
  // A delta needs every element before the rows: decoded whole.
  if (!elementwise(*l.recipe)) return materializer<Tensor>::load(in).rows(begin, end);
  const std::uint64_t width = dtype_size(l.dtype);  // the stored elements'
  auto stored = payload_bytes(in, l, first * width, (first + count) * width);
  nlohmann::json recipe = *l.recipe;
  recipe["count"] = count;
  std::vector<std::byte> bytes = decode_array(recipe, stored->bytes(),
                                              in.label() + ": tensor payload, rows " + std::to_string(begin) + " to " +
                                                  std::to_string(end));
  if (l.value_dtype == DType::bool_)
    if (auto bad = detail::find_invalid_bool(bytes))
      throw CorruptData(in.label() + ": decoded bool element " + std::to_string(first + *bad) + " is not 0 or 1");
  return Tensor::Make(l.value_dtype, std::move(rows_shape), Buffer::adopt(std::move(bytes)));
}

}  // namespace amphora
