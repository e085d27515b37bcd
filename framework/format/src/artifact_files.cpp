// The typed payload files of ArtifactWriter and ArtifactReader: JSON
// documents, .npy arrays and merged strings. Built on write_file and map
// only, so they add no path to storage.

#include <amphora/artifact.hpp>
#include <amphora/json.hpp>
#include <amphora/npy_format.hpp>

#include "artifact_context.hpp"
#include "json_text.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace amphora {

namespace {

constexpr std::size_t kArrayAlignment = 64;

void check_bools(ConstBytes bytes, const std::string& where) {
  auto bad = std::find_if(bytes.begin(), bytes.end(), [](std::byte b) { return static_cast<unsigned>(b) > 1; });
  if (bad != bytes.end())
    throw CorruptData(where + ": bool element " + std::to_string(bad - bytes.begin()) + " is byte " +
                      std::to_string(static_cast<unsigned>(*bad)) + ", not 0 or 1");
}

// Offsets of consecutive strings from index `first` on, as read from
// `where`: never decreasing, and within the `size` bytes of `bytes_path`.
void check_offsets_read(std::span<const std::int64_t> o, std::uint64_t first, std::uint64_t size,
                        const std::string& where, const std::string& bytes_path) {
  for (std::size_t i = 1; i < o.size(); ++i)
    if (o[i] < o[i - 1])
      throw CorruptData(where + ": offset " + std::to_string(first + i) + " (" + std::to_string(o[i]) +
                        ") is below offset " + std::to_string(first + i - 1) + " (" + std::to_string(o[i - 1]) + ")");
  if (!o.empty() && (o.front() < 0 || static_cast<std::uint64_t>(o.back()) > size))
    throw CorruptData(where + ": offsets " + std::to_string(o.front()) + " to " + std::to_string(o.back()) +
                      " lie outside '" + bytes_path + "' (" + std::to_string(size) + " bytes)");
}

std::string strings_offsets_path(std::string_view path) { return std::string(path) + ".offsets.npy"; }
std::string strings_bytes_path(std::string_view path) { return std::string(path) + ".bytes"; }

template <class String>
void write_merged(ArtifactWriter& out, std::string_view path, std::span<const String> values) {
  std::vector<std::int64_t> offsets(values.size() + 1, 0);
  std::size_t total = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    total += values[i].size();
    offsets[i + 1] = static_cast<std::int64_t>(total);
  }
  std::string bytes;
  bytes.reserve(total);
  for (const auto& v : values) bytes.append(v.data(), v.size());
  out.write_strings(path, std::as_bytes(std::span<const char>(bytes)), offsets);
}

}  // namespace

void ArtifactWriter::write_json(std::string_view path, const nlohmann::json& document) {
  // The text goes to the file and is dropped: a buffer kept per thread has
  // its pages already mapped, where a fresh megabyte-sized string would
  // fault in (and zero) every page it grows through, which took a third of
  // the time of writing a large config.
  constexpr std::size_t kKeptCapacity = 4u << 20;
  thread_local std::string text;
  text.clear();
  struct Trim {
    ~Trim() {
      if (text.capacity() > kKeptCapacity) std::string().swap(text);
    }
  } trim;
  detail::append_canonical_json(text, document, "JSON document '" + std::string(path) + "'");
  write_file(path, std::as_bytes(std::span<const char>(text)));
}

void ArtifactWriter::write_array(std::string_view path, DType dtype, std::span<const std::int64_t> shape,
                                 ConstBytes data, const ArrayEncoding& encoding) {
  const std::uint64_t count = checked_element_count(shape, dtype);
  if (count * dtype_size(dtype) != data.size())
    throw InvalidArgument("array '" + std::string(path) + "': " + std::to_string(data.size()) + " bytes given, but " +
                          std::to_string(count) + " " + std::string(dtype_name(dtype)) + " elements take " +
                          std::to_string(count * dtype_size(dtype)));
  if (dtype == DType::bool_) {
    auto bad = std::find_if(data.begin(), data.end(), [](std::byte b) { return static_cast<unsigned>(b) > 1; });
    if (bad != data.end())
      throw InvalidArgument("bool array '" + std::string(path) + "' holds byte " +
                            std::to_string(static_cast<unsigned>(*bad)) + " at element " +
                            std::to_string(bad - data.begin()) + "; a bool is 0 or 1");
  }
  if (!encoding.decimal && !encoding.delta && !encoding.squeeze && !encoding.shuffle) {
    std::string header = make_npy_header(dtype, shape, kArrayAlignment);
    write_file(path, {std::as_bytes(std::span<const char>(header)), data});
    return;
  }
  EncodedArray encoded = encode_array(dtype, data, encoding);
  encoded.recipe["shape"] = std::vector<std::int64_t>(shape.begin(), shape.end());
  const std::int64_t stored_count = static_cast<std::int64_t>(count);
  std::string header = make_npy_header(encoded.stored_dtype, std::span<const std::int64_t>(&stored_count, 1), kArrayAlignment);
  write_file(path, {std::as_bytes(std::span<const char>(header)), ConstBytes(encoded.bytes.data(), encoded.bytes.size())});
  detail::ArtifactAccess::record_encoding(*this, path, std::move(encoded.recipe));
}

ArrayStream::ArrayStream(FileStream file, std::string path, DType dtype, std::uint64_t count, nlohmann::json recipe,
                         ArtifactWriter* writer)
    : file_(std::move(file)), path_(std::move(path)), dtype_(dtype), count_(count), recipe_(std::move(recipe)),
      writer_(writer) {}

void ArrayStream::append(ConstBytes elements) {
  const std::size_t width = dtype_size(dtype_);
  if (elements.size() % width != 0)
    throw InvalidArgument("array stream '" + path_ + "': " + std::to_string(elements.size()) +
                          " bytes are not whole " + std::string(dtype_name(dtype_)) + " elements");
  const std::uint64_t n = elements.size() / width;
  if (n > count_ - written_)
    throw InvalidArgument("array stream '" + path_ + "' was opened for " + std::to_string(count_) + " elements; " +
                          std::to_string(written_ + n) + " would be more");
  if (dtype_ == DType::bool_)
    if (auto bad = std::find_if(elements.begin(), elements.end(), [](std::byte b) { return static_cast<unsigned>(b) > 1; });
        bad != elements.end())
      throw InvalidArgument("bool array stream '" + path_ + "' got byte " + std::to_string(static_cast<unsigned>(*bad)) +
                            "; a bool is 0 or 1");
  file_.append(elements);
  written_ += n;
}

void ArrayStream::close() {
  if (written_ != count_)
    throw InvalidArgument("array stream '" + path_ + "' was opened for " + std::to_string(count_) + " elements but got " +
                          std::to_string(written_));
  file_.close();
  if (!recipe_.is_null()) detail::ArtifactAccess::record_encoding(*writer_, path_, std::move(recipe_));
}

ArrayStream ArtifactWriter::open_array(std::string_view path, DType dtype, std::uint64_t count) {
  const std::int64_t n = static_cast<std::int64_t>(count);
  if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / dtype_size(dtype))
    throw InvalidArgument("array stream '" + std::string(path) + "': " + std::to_string(count) + " elements are too many");
  const std::string header = make_npy_header(dtype, std::span<const std::int64_t>(&n, 1), kArrayAlignment);
  FileStream file = open_stream(path, header.size() + count * dtype_size(dtype));
  file.append(std::as_bytes(std::span<const char>(header)));
  return ArrayStream(std::move(file), std::string(path), dtype, count, nullptr, this);
}

ArrayStream ArtifactWriter::open_encoded_array(std::string_view path, nlohmann::json recipe) {
  const std::string where = "encoded array stream '" + std::string(path) + "'";
  if (!recipe.is_object() || !recipe.contains("stored_dtype") || !recipe["stored_dtype"].is_string() ||
      !recipe.contains("count") || !recipe["count"].is_number_unsigned())
    throw InvalidArgument(where + ": the recipe lacks a stored_dtype or a count");
  DType stored;
  try {
    stored = dtype_from_name(recipe["stored_dtype"].get<std::string>());
  } catch (const Unsupported& e) {
    throw InvalidArgument(where + ": " + e.what());
  }
  const auto count = recipe["count"].get<std::uint64_t>();
  recipe["shape"] = std::vector<std::uint64_t>{count};
  ArrayStream stream = open_array(path, stored, count);
  stream.recipe_ = std::move(recipe);
  return stream;
}

void ArtifactWriter::write_strings(std::string_view path, std::span<const std::string> values) {
  write_merged(*this, path, values);
}

void ArtifactWriter::write_strings(std::string_view path, std::span<const std::string_view> values) {
  write_merged(*this, path, values);
}

void ArtifactWriter::write_strings(std::string_view path, ConstBytes bytes, std::span<const std::int64_t> offsets) {
  const std::string where = "strings '" + std::string(path) + "'";
  if (offsets.empty()) throw InvalidArgument(where + ": no offsets (there is one more than there are strings)");
  if (offsets.front() < 0 || static_cast<std::uint64_t>(offsets.back()) > bytes.size())
    throw InvalidArgument(where + ": offsets " + std::to_string(offsets.front()) + " to " + std::to_string(offsets.back()) +
                          " lie outside the " + std::to_string(bytes.size()) + " bytes given");
  for (std::size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      throw InvalidArgument(where + ": offset " + std::to_string(i) + " (" + std::to_string(offsets[i]) +
                            ") is below offset " + std::to_string(i - 1) + " (" + std::to_string(offsets[i - 1]) + ")");
  const std::int64_t first = offsets.front();
  const ConstBytes used = bytes.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(offsets.back() - first));
  if (first == 0) {
    write_array<std::int64_t>(strings_offsets_path(path), offsets);
  } else {  // a slice of a longer list: the file's offsets start at 0
    std::vector<std::int64_t> rebased(offsets.begin(), offsets.end());
    for (auto& o : rebased) o -= first;
    write_array<std::int64_t>(strings_offsets_path(path), rebased);
  }
  write_file(strings_bytes_path(path), used);
}

void validate_offsets(std::span<const std::int64_t> offsets, std::uint64_t end, const std::string& where,
                      const std::string& end_what) {
  if (offsets.empty()) throw CorruptData(where + " is empty; it holds at least the offset 0");
  if (offsets[0] != 0) throw CorruptData(where + ": the first offset is " + std::to_string(offsets[0]) + ", not 0");
  for (std::size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      throw CorruptData(where + ": offset " + std::to_string(i) + " (" + std::to_string(offsets[i]) +
                        ") is below offset " + std::to_string(i - 1) + " (" + std::to_string(offsets[i - 1]) + ")");
  if (static_cast<std::uint64_t>(offsets.back()) != end)
    throw CorruptData(where + ": the last offset is " + std::to_string(offsets.back()) + ", but " + end_what);
}

// ---------------------------------------------------------------------------

nlohmann::json ArtifactReader::read_json(std::string_view path) const {
  auto file = map(path);
  try {
    return parse_untrusted_json(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()));
  } catch (const CorruptData& e) {
    throw CorruptData(label_ + ": '" + std::string(path) + "' is not valid JSON (" + e.what() + ")");
  }
}

ArrayView ArtifactReader::read_array(std::string_view path) const {
  const std::string where = label_ + ": '" + std::string(path) + "'";
  if (auto encodings = manifest_->meta.find(detail::kEncodingsKey); encodings != manifest_->meta.end()) {
    if (!encodings->is_object()) throw CorruptData(label_ + ": metadata 'encodings' is not an object");
    if (auto recipe = encodings->find(path); recipe != encodings->end()) return read_encoded(path, *recipe, where);
  }
  return read_stored_array(path, where);
}

ArrayView ArtifactReader::read_stored_array(std::string_view path, const std::string& where) const {
  auto file = map(path);
  NpyHeader header = parse_npy_header(file->bytes(), where);
  DType dtype;
  bool big_endian;
  try {
    std::tie(dtype, big_endian) = dtype_from_descr(header.descr, where);
  } catch (const Unsupported& e) {
    throw CorruptData(e.what());
  }
  if (big_endian || header.fortran_order)
    throw CorruptData(where + " is " + (big_endian ? "big-endian" : "in Fortran order") +
                      "; arrays are stored C-ordered and little-endian");
  std::uint64_t count;
  try {
    count = checked_element_count(header.shape, dtype);
  } catch (const InvalidArgument& e) {
    throw CorruptData(where + ": " + e.what());
  }
  const std::size_t item = dtype_size(dtype);
  if (header.data_offset % std::min<std::size_t>(item, 16) != 0)
    throw CorruptData(where + ": data starts at byte " + std::to_string(header.data_offset) +
                      ", not aligned for " + std::string(dtype_name(dtype)) + " elements");
  const std::uint64_t have = file->size() - header.data_offset, want = count * item;
  if (have != want)
    throw CorruptData(where + " holds " + std::to_string(have) + " bytes of data, but its shape needs " +
                      std::to_string(want) + (have < want ? " (truncated)" : " (trailing bytes)"));
  auto data = Buffer::slice(file, header.data_offset, static_cast<std::size_t>(want));
  if (dtype == DType::bool_) check_bools(data->bytes(), where);
  return ArrayView(dtype, std::move(header.shape), std::move(data));
}

ArrayView ArtifactReader::read_encoded(std::string_view path, const nlohmann::json& recipe,
                                       const std::string& where) const {
  // The stored file is checked as any array; the recipe says what it becomes.
  ArrayView stored = read_stored_array(path, where);
  if (stored.shape().size() != 1) throw CorruptData(where + ": an encoded array is stored 1-d");
  std::vector<std::byte> bytes = decode_array(recipe, stored.bytes(), where);
  const DType dtype = dtype_from_name(recipe.at("dtype").get<std::string>());  // checked by decode_array
  std::vector<std::int64_t> shape;
  auto s = recipe.find("shape");
  if (s == recipe.end() || !s->is_array()) throw CorruptData(where + ": the encoding recipe has no shape");
  for (const auto& d : *s) {
    if (!d.is_number_integer()) throw CorruptData(where + ": the encoding recipe's shape is not integers");
    shape.push_back(d.get<std::int64_t>());
  }
  try {
    if (checked_element_count(shape, dtype) * dtype_size(dtype) != bytes.size())
      throw CorruptData(where + ": the recipe's shape does not match its element count");
  } catch (const InvalidArgument& e) {
    throw CorruptData(where + ": " + e.what());
  }
  if (dtype == DType::bool_) check_bools(bytes, where);
  return ArrayView(dtype, std::move(shape), Buffer::adopt(std::move(bytes)));
}

ArrayView ArtifactReader::read_array(std::string_view path, DType dtype, int ndim) const {
  ArrayView array = read_array(path);
  // .npy has no bfloat16: it is written as uint16 words (as numpy sees them).
  if (dtype == DType::bfloat16 && array.dtype() == DType::uint16)
    array = ArrayView(DType::bfloat16, array.shape(), array.buffer());
  if (array.dtype() != dtype)
    throw CorruptData(label_ + ": '" + std::string(path) + "' holds " + std::string(dtype_name(array.dtype())) +
                      " elements, expected " + std::string(dtype_name(dtype)));
  if (ndim >= 0 && array.shape().size() != static_cast<std::size_t>(ndim))
    throw CorruptData(label_ + ": '" + std::string(path) + "' has " + std::to_string(array.shape().size()) +
                      " dimensions, expected " + std::to_string(ndim));
  return array;
}

// The header of .npy file `path` and, in `head`, the bytes read for it:
// its first 512 (the headers Amphora writes take 128), or as many as a
// longer header says it takes, up to 64 KiB. nullopt when the header is
// malformed or longer, which the caller leaves to read_array to name.
std::optional<NpyHeader> ArtifactReader::read_npy_head(std::string_view path, std::shared_ptr<const Buffer>& head) const {
  const std::uint64_t size = file_size(path);
  head = read(path, 0, static_cast<std::size_t>(std::min<std::uint64_t>(size, 512)));
  if (head->size() >= 12 && static_cast<unsigned char>(head->data()[6]) >= 1) {
    const auto* b = reinterpret_cast<const unsigned char*>(head->data());
    const std::uint64_t declared = b[6] == 1 ? 10u + (b[8] | b[9] << 8)
                                             : 12u + (b[8] | b[9] << 8 | b[10] << 16 | std::uint64_t{b[11]} << 24);
    if (declared > head->size() && declared <= std::min<std::uint64_t>(size, 64u << 10))
      head = read(path, 0, static_cast<std::size_t>(declared));
  }
  try {
    NpyHeader header = parse_npy_header(head->bytes(), path);
    if (header.data_offset > head->size()) return std::nullopt;
    return header;
  } catch (const CorruptData&) {
    return std::nullopt;
  }
}

std::uint64_t ArtifactReader::array_length(std::string_view path) const {
  if (auto encodings = manifest_->meta.find(detail::kEncodingsKey); encodings != manifest_->meta.end() && encodings->is_object())
    if (auto recipe = encodings->find(path); recipe != encodings->end()) {
      if (recipe->is_object() && recipe->contains("count") && (*recipe)["count"].is_number_unsigned())
        return (*recipe)["count"].get<std::uint64_t>();
      return read_array(path).size();  // names what is wrong
    }
  std::shared_ptr<const Buffer> head;
  auto header = read_npy_head(path, head);
  const std::size_t ndim = header ? header->shape.size() : read_array(path).shape().size();  // a long header read whole
  if (ndim != 1)
    throw CorruptData(label_ + ": '" + std::string(path) + "' has " + std::to_string(ndim) + " dimensions, expected 1");
  return header ? static_cast<std::uint64_t>(header->shape[0]) : read_array(path).size();
}

ArrayView ArtifactReader::read_array_range(std::string_view path, DType dtype, std::uint64_t count, std::uint64_t begin,
                                           std::uint64_t end) const {
  const std::pair<std::uint64_t, std::uint64_t> range{begin, end};
  return std::move(read_array_ranges(path, dtype, count, std::span(&range, 1)).front());
}

std::vector<ArrayView> ArtifactReader::read_array_ranges(std::string_view path, DType dtype, std::uint64_t count,
                                                         std::span<const std::pair<std::uint64_t, std::uint64_t>> ranges) const {
  const std::string where = label_ + ": '" + std::string(path) + "'";
  for (const auto& [begin, end] : ranges)
    if (begin > end || end > count)
      throw InvalidArgument(where + ": elements [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") lie outside its " + std::to_string(count));
  const nlohmann::json* recipe = nullptr;
  if (auto encodings = manifest_->meta.find(detail::kEncodingsKey); encodings != manifest_->meta.end()) {
    if (!encodings->is_object()) throw CorruptData(label_ + ": metadata 'encodings' is not an object");
    if (auto r = encodings->find(path); r != encodings->end()) recipe = &*r;
  }
  const std::size_t item = dtype_size(dtype);
  auto whole = [&] {
    ArrayView all = read_array(path, dtype, 1);
    if (all.size() != count)
      throw CorruptData(where + " holds " + std::to_string(all.size()) + " elements where " + std::to_string(count) +
                        " belong");
    std::vector<ArrayView> parts;
    for (const auto& [begin, end] : ranges)
      parts.emplace_back(dtype, std::vector<std::int64_t>{static_cast<std::int64_t>(end - begin)},
                         Buffer::slice(all.buffer(), static_cast<std::size_t>(begin * item),
                                       static_cast<std::size_t>((end - begin) * item)));
    return parts;
  };
  bool elementwise = true;
  if (recipe) {
    if (!recipe->is_object()) return whole();  // read_array names the damage
    auto t = recipe->find("transforms");
    auto shape = recipe->find("shape");
    if (t == recipe->end() || !t->is_array() || shape == recipe->end() || *shape != nlohmann::json::array({count}))
      return whole();  // the same, or an array of other dimensions
    for (const auto& name : *t) elementwise = elementwise && (name == "decimal" || name == "squeeze");
    if (!elementwise) return whole();
  }
  const std::uint64_t size = file_size(path);
  std::shared_ptr<const Buffer> head;
  auto header = read_npy_head(path, head);
  if (!header) return whole();
  DType stored;
  bool big_endian;
  try {
    std::tie(stored, big_endian) = dtype_from_descr(header->descr, where);
  } catch (const Unsupported& e) {
    throw CorruptData(e.what());
  }
  if (big_endian || header->fortran_order || header->shape.size() != 1) return whole();  // read_array names it
  const std::size_t stored_item = dtype_size(stored);
  const auto stored_count = static_cast<std::uint64_t>(header->shape[0]);
  if (recipe ? stored_count != count : stored_count != count || (stored != dtype && !(dtype == DType::bfloat16 && stored == DType::uint16)))
    return whole();  // read_array and the count check name what is wrong
  if (header->data_offset % std::min<std::size_t>(stored_item, 16) != 0 ||
      stored_count > (size - header->data_offset) / stored_item || size - header->data_offset != stored_count * stored_item)
    return whole();
  std::vector<ArrayView> parts;
  for (const auto& [begin, end] : ranges) {
    const std::uint64_t at = header->data_offset + begin * stored_item, n = (end - begin) * stored_item;
    // A small file's data came with its header.
    auto bytes = at + n <= head->size() ? Buffer::slice(head, static_cast<std::size_t>(at), static_cast<std::size_t>(n))
                                        : read(path, at, static_cast<std::size_t>(n));
    if (recipe) {
      nlohmann::json part = *recipe;
      part["count"] = end - begin;
      part["shape"] = {end - begin};
      std::vector<std::byte> decoded = decode_array(part, bytes->bytes(), where);
      if (dtype_from_name(part.at("dtype").get<std::string>()) != dtype)
        throw CorruptData(where + " is encoded as " + part.at("dtype").get<std::string>() + ", expected " +
                          std::string(dtype_name(dtype)));
      bytes = Buffer::adopt(std::move(decoded));
    }
    if (dtype == DType::bool_) check_bools(bytes->bytes(), where);
    parts.emplace_back(dtype, std::vector<std::int64_t>{static_cast<std::int64_t>(end - begin)}, std::move(bytes));
  }
  return parts;
}

StringsView ArtifactReader::read_strings_range(std::string_view path, std::uint64_t count, std::uint64_t begin,
                                               std::uint64_t end) const {
  const std::string offsets_path = strings_offsets_path(path), bytes_path = strings_bytes_path(path);
  const std::string where = label_ + ": strings '" + std::string(path) + "': '" + offsets_path + "'";
  ArrayView offsets = read_array_range(offsets_path, DType::int64, count + 1, begin, end + 1);
  auto o = offsets.values<std::int64_t>();
  check_offsets_read(o, begin, file_size(bytes_path), where, bytes_path);
  std::vector<std::int64_t> rebased(o.begin(), o.end());
  for (auto& v : rebased) v -= o.front();
  auto bytes = read(bytes_path, static_cast<std::uint64_t>(o.front()), static_cast<std::size_t>(rebased.back()));
  const auto entries = static_cast<std::int64_t>(rebased.size());
  ArrayView view(DType::int64, {entries}, Buffer::adopt(std::move(rebased)));
  return StringsView(std::move(view), std::move(bytes));
}

StringsView ArtifactReader::read_strings_at(std::string_view path, std::uint64_t count,
                                            std::span<const std::uint64_t> indices) const {
  // Indices this close share one read of offsets, and strings whose bytes lie
  // this close share one read of bytes: on an object store a request costs
  // more than the bytes skipped.
  constexpr std::uint64_t kNearOffsets = 8192, kNearBytes = 64u << 10;
  const std::string offsets_path = strings_offsets_path(path), bytes_path = strings_bytes_path(path);
  const std::string where = label_ + ": strings '" + std::string(path) + "': '" + offsets_path + "'";
  for (std::size_t i = 0; i < indices.size(); ++i)
    if (indices[i] >= count || (i > 0 && indices[i] <= indices[i - 1]))
      throw InvalidArgument(label_ + ": strings '" + std::string(path) + "': index " + std::to_string(indices[i]) +
                            (indices[i] >= count ? " lies outside its " + std::to_string(count)
                                                 : " does not follow " + std::to_string(indices[i - 1])));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;  // offsets [first, last + 2) of each run of indices
  for (std::uint64_t i : indices)
    if (!runs.empty() && i - (runs.back().second - 2) <= kNearOffsets)
      runs.back().second = i + 2;
    else
      runs.emplace_back(i, i + 2);
  const std::vector<ArrayView> parts = read_array_ranges(offsets_path, DType::int64, count + 1, runs);
  const std::uint64_t size = file_size(bytes_path);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // bytes of each string, in index order
  for (std::size_t r = 0, i = 0; r < runs.size(); ++r) {
    auto o = parts[r].values<std::int64_t>();
    check_offsets_read(o, runs[r].first, size, where, bytes_path);
    // Runs follow one another in the file too, so the strings read never
    // overlap and never add up to more than the bytes file holds.
    if (r > 0 && o.front() < parts[r - 1].values<std::int64_t>().back())
      throw CorruptData(where + ": offset " + std::to_string(runs[r].first) + " (" + std::to_string(o.front()) +
                        ") is below offset " + std::to_string(runs[r - 1].second - 1) + " (" +
                        std::to_string(parts[r - 1].values<std::int64_t>().back()) + ")");
    for (; i < indices.size() && indices[i] + 2 <= runs[r].second; ++i) {
      const std::size_t k = static_cast<std::size_t>(indices[i] - runs[r].first);
      spans.emplace_back(static_cast<std::uint64_t>(o[k]), static_cast<std::uint64_t>(o[k + 1]));
    }
  }
  std::vector<std::int64_t> offsets{0};
  std::vector<char> merged;
  for (std::size_t first = 0; first < spans.size();) {
    std::size_t last = first;  // spans [first, last] are read at once
    while (last + 1 < spans.size() && spans[last + 1].first >= spans[last].second &&
           spans[last + 1].first - spans[last].second <= kNearBytes)
      ++last;
    const std::uint64_t from = spans[first].first, n = spans[last].second - from;
    auto bytes = n == 0 ? nullptr : read(bytes_path, from, static_cast<std::size_t>(n));
    for (std::size_t k = first; k <= last; ++k) {
      if (spans[k].second > spans[k].first) {
        const char* text = reinterpret_cast<const char*>(bytes->data()) + (spans[k].first - from);
        merged.insert(merged.end(), text, text + (spans[k].second - spans[k].first));
      }
      offsets.push_back(static_cast<std::int64_t>(merged.size()));
    }
    first = last + 1;
  }
  const auto entries = static_cast<std::int64_t>(offsets.size());
  ArrayView view(DType::int64, {entries}, Buffer::adopt(std::move(offsets)));
  return StringsView(std::move(view), Buffer::adopt(std::move(merged)));
}

StringsView ArtifactReader::read_strings(std::string_view path) const {
  const std::string offsets_path = strings_offsets_path(path), bytes_path = strings_bytes_path(path);
  ArrayView offsets = read_array(offsets_path, DType::int64, 1);
  auto bytes = map(bytes_path);
  validate_offsets(offsets.values<std::int64_t>(), bytes->size(),
                   label_ + ": strings '" + std::string(path) + "': '" + offsets_path + "'",
                   "'" + bytes_path + "' holds " + std::to_string(bytes->size()) + " bytes");
  return StringsView(std::move(offsets), std::move(bytes));
}

}  // namespace amphora
