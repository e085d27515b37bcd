#include "column_files.hpp"

#include <amphora/error.hpp>
#include <amphora/parallel.hpp>

#include <algorithm>

namespace amphora::detail {

void require_file(const ArtifactReader& in, const std::string& file, const std::string& where) {
  if (!in.has_file(file)) throw CorruptData(where + " lacks its file '" + file + "'");
}

ArrayView read_bitmap(const ArtifactReader& in, const std::string& file, std::size_t slots, const std::string& where) {
  require_file(in, file, where);
  ArrayView bits = in.read_array(file, DType::uint8, 1);
  if (bits.size() != (slots + 7) / 8)
    throw CorruptData(where + ": '" + file + "' holds " + std::to_string(bits.size()) + " bytes for " +
                      std::to_string(slots) + " slots");
  return bits;
}

nlohmann::json squeezed_codes_recipe(std::size_t count, std::size_t words) {
  const std::uint32_t bounds[] = {0, static_cast<std::uint32_t>(words == 0 ? 0 : words - 1)};
  nlohmann::json recipe =
      encode_array(DType::uint32, std::as_bytes(std::span<const std::uint32_t>(bounds)), {.squeeze = true}).recipe;
  recipe["count"] = count;
  return recipe;
}

void write_codes(ArtifactWriter& out, const std::string& path, std::span<const std::uint32_t> codes, std::size_t words) {
  nlohmann::json recipe = squeezed_codes_recipe(codes.size(), words);
  const std::size_t width = dtype_size(dtype_from_name(recipe["stored_dtype"].get<std::string>()));
  auto narrow = Buffer::allocate(codes.size() * width);
  std::byte* to = narrow->mutable_data();
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  parallel_for((codes.size() + kChunk - 1) / kChunk, [&](std::size_t c) {
    const std::size_t begin = c * kChunk, end = std::min(codes.size(), begin + kChunk);
    auto put = [&](auto tag) {
      using T = decltype(tag);
      T* dst = reinterpret_cast<T*>(to) + begin;
      for (std::size_t i = begin; i < end; ++i) *dst++ = static_cast<T>(codes[i]);
    };
    if (width == 1) put(std::uint8_t{});
    else if (width == 2) put(std::uint16_t{});
    else put(std::uint32_t{});
  });
  ArrayStream stream = out.open_encoded_array(path, std::move(recipe));
  stream.append(narrow->bytes());
  stream.close();
}

namespace {

// Writes the dictionary form when it is smaller, else calls write_plain.
template <class WritePlain>
StringColumn write_smaller(ArtifactWriter& out, const std::string& path, std::size_t count, std::uint64_t total_bytes,
                           DictionaryStrings dict, const WritePlain& write_plain) {
  StringColumn column{dictionary_is_smaller(count, total_bytes, dict), std::move(dict)};
  if (column.dictionary) {
    out.write_strings(path + ".dict", column.dict.dictionary);
    write_codes(out, path + ".codes.npy", column.dict.codes, column.dict.dictionary.size());
  } else {
    write_plain();
  }
  return column;
}

}  // namespace

StringColumn write_string_column(ArtifactWriter& out, const std::string& path, ConstBytes bytes,
                                 std::span<const std::int64_t> offsets) {
  return write_string_column(out, path, bytes, offsets, dictionary_encode(bytes, offsets));
}

StringColumn write_string_column(ArtifactWriter& out, const std::string& path, ConstBytes bytes,
                                 std::span<const std::int64_t> offsets, DictionaryStrings dict) {
  // The offsets may start past 0 (a slice of a loaded column).
  const std::size_t count = offsets.empty() ? 0 : offsets.size() - 1;
  const auto total = offsets.empty() ? 0 : static_cast<std::uint64_t>(offsets.back() - offsets.front());
  return write_smaller(out, path, count, total, std::move(dict), [&] { out.write_strings(path, bytes, offsets); });
}

StringColumn write_string_column(ArtifactWriter& out, const std::string& path, std::span<const std::string_view> values) {
  std::uint64_t total = 0;
  for (std::string_view v : values) total += v.size();
  return write_smaller(out, path, values.size(), total, dictionary_encode(values),
                       [&] { out.write_strings(path, values); });
}

DictionaryColumn read_dictionary_column(const ArtifactReader& in, const std::string& path, std::size_t rows,
                                        std::size_t begin, std::size_t end, const std::string& where) {
  for (const auto& file : {path + ".dict.offsets.npy", path + ".dict.bytes", path + ".codes.npy"})
    require_file(in, file, where);
  DictionaryColumn column{in.read_strings(path + ".dict"), in.read_array(path + ".codes.npy", DType::uint32, 1)};
  if (column.codes.size() != rows)
    throw CorruptData(where + " holds " + std::to_string(column.codes.size()) + " codes for " + std::to_string(rows) +
                      " rows");
  const auto codes = column.codes.values<std::uint32_t>();
  for (std::size_t i = begin; i < end; ++i)
    if (codes[i] >= column.words.size())
      throw CorruptData(where + ": row " + std::to_string(i) + " has code " + std::to_string(codes[i]) +
                        ", but the dictionary holds " + std::to_string(column.words.size()) + " strings");
  return column;
}

DictionaryColumn read_dictionary_rows(const ArtifactReader& in, const std::string& path, std::size_t rows,
                                      std::size_t begin, std::size_t end, const std::string& where) {
  constexpr std::size_t kFewWords = 64;
  const std::string dict = path + ".dict";
  for (const auto& file : {dict + ".offsets.npy", dict + ".bytes", path + ".codes.npy"}) require_file(in, file, where);
  ArrayView stored = in.read_array_range(path + ".codes.npy", DType::uint32, rows, begin, end);
  std::vector<std::uint32_t> codes(stored.values<std::uint32_t>().begin(), stored.values<std::uint32_t>().end());
  const std::uint64_t offsets = in.array_length(dict + ".offsets.npy");
  const std::uint64_t words = offsets == 0 ? 0 : offsets - 1;
  for (std::size_t i = 0; i < codes.size(); ++i)
    if (codes[i] >= words)
      throw CorruptData(where + ": row " + std::to_string(begin + i) + " has code " + std::to_string(codes[i]) +
                        ", but the dictionary holds " + std::to_string(words) + " strings");
  std::vector<std::uint64_t> used(codes.begin(), codes.end());
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  if (used.size() > kFewWords) {
    StringsView all = in.read_strings(dict);
    if (all.size() != words) throw CorruptData(where + ": '" + dict + "' changed while being read");
    return {std::move(all), std::move(stored)};
  }
  StringsView few = in.read_strings_at(dict, words, used);
  for (auto& c : codes) c = static_cast<std::uint32_t>(std::lower_bound(used.begin(), used.end(), c) - used.begin());
  const auto count = static_cast<std::int64_t>(codes.size());
  ArrayView renumbered(DType::uint32, {count}, Buffer::adopt(std::move(codes)));
  return {std::move(few), std::move(renumbered)};
}

}  // namespace amphora::detail
