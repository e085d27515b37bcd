#include <amphora/array_encoding.hpp>
#include <amphora/error.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace amphora {

namespace {

template <class T>
struct Tag {
  using type = T;
};

bool is_integer(DType d) {
  switch (d) {
    case DType::int8: case DType::int16: case DType::int32: case DType::int64:
    case DType::uint8: case DType::uint16: case DType::uint32: case DType::uint64: return true;
    default: return false;
  }
}

// Calls f(Tag<T>{}) with the C++ type of integer dtype `d`.
template <class F>
decltype(auto) visit_integer(DType d, F&& f) {
  switch (d) {
    case DType::int8: return f(Tag<std::int8_t>{});
    case DType::int16: return f(Tag<std::int16_t>{});
    case DType::int32: return f(Tag<std::int32_t>{});
    case DType::int64: return f(Tag<std::int64_t>{});
    case DType::uint8: return f(Tag<std::uint8_t>{});
    case DType::uint16: return f(Tag<std::uint16_t>{});
    case DType::uint32: return f(Tag<std::uint32_t>{});
    case DType::uint64: return f(Tag<std::uint64_t>{});
    default: throw InvalidArgument(std::string(dtype_name(d)) + " is not an integer dtype");
  }
}

DType unsigned_of(DType d) {
  switch (d) {
    case DType::int8: return DType::uint8;
    case DType::int16: return DType::uint16;
    case DType::int32: return DType::uint32;
    case DType::int64: return DType::uint64;
    default: return d;
  }
}

template <class T>
std::vector<T> load_values(ConstBytes data) {
  std::vector<T> v(data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), data.data(), v.size() * sizeof(T));
  return v;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// The narrowest integer dtype holding every value in [lo, hi].
template <class T>
DType narrowest(T lo, T hi) {
  if constexpr (std::is_signed_v<T>) {
    if (lo < 0) {
      for (auto [d, min, max] : {std::tuple{DType::int8, std::int64_t{INT8_MIN}, std::int64_t{INT8_MAX}},
                                 {DType::int16, std::int64_t{INT16_MIN}, std::int64_t{INT16_MAX}},
                                 {DType::int32, std::int64_t{INT32_MIN}, std::int64_t{INT32_MAX}}})
        if (lo >= min && hi <= max) return d;
      return DType::int64;
    }
  }
  const auto top = static_cast<std::uint64_t>(hi);
  if (top <= UINT8_MAX) return DType::uint8;
  if (top <= UINT16_MAX) return DType::uint16;
  if (top <= UINT32_MAX) return DType::uint32;
  return DType::uint64;
}

// Converts every element of `data` (of type From) to To, which holds them all.
template <class From, class To>
std::vector<std::byte> convert(ConstBytes data) {
  const auto in = load_values<From>(data);
  std::vector<To> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<To>(in[i]);
  return bytes_of(out);
}

// The same when decoding: a value that does not fit To is damage.
template <class From, class To>
std::vector<std::byte> widen_checked(ConstBytes data, std::string_view where) {
  const auto in = load_values<From>(data);
  std::vector<To> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!std::in_range<To>(in[i]))
      throw CorruptData(std::string(where) + ": squeezed element " + std::to_string(i) + " (" +
                        std::to_string(in[i]) + ") does not fit the dtype it widens to");
    out[i] = static_cast<To>(in[i]);
  }
  return bytes_of(out);
}

// Element bytes to byte planes (shuffle) or back: byte b of element i sits
// at i * width + b in elements and at b * n + i in planes.
std::vector<std::byte> transpose_bytes(ConstBytes data, std::size_t width, bool to_planes) {
  std::vector<std::byte> out(data.size());
  const std::size_t n = width ? data.size() / width : 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t b = 0; b < width; ++b) {
      const std::size_t element = i * width + b, plane = b * n + i;
      out[to_planes ? plane : element] = data[to_planes ? element : plane];
    }
  return out;
}

[[noreturn]] void bad_recipe(std::string_view where, const std::string& why) {
  throw CorruptData(std::string(where) + ": invalid encoding recipe: " + why);
}

DType recipe_dtype(const nlohmann::json& recipe, const char* key, std::string_view where) {
  auto it = recipe.find(key);
  if (it == recipe.end() || !it->is_string()) bad_recipe(where, std::string("'") + key + "' is missing or not a string");
  try {
    return dtype_from_name(it->get<std::string>());
  } catch (const Unsupported&) {
    bad_recipe(where, std::string("'") + key + "' names no dtype ('" + it->get<std::string>() + "')");
  }
}

}  // namespace

EncodedArray encode_array(DType dtype, ConstBytes data, const ArrayEncoding& encoding) {
  const std::size_t width = dtype_size(dtype);
  if (data.size() % width != 0)
    throw InvalidArgument("encode_array: " + std::to_string(data.size()) + " bytes are not a whole number of " +
                          std::string(dtype_name(dtype)) + " elements");
  const std::size_t count = data.size() / width;
  if ((encoding.delta || encoding.squeeze) && !is_integer(dtype))
    throw InvalidArgument(std::string(encoding.delta ? "delta coding" : "squeezing") + " needs an integer dtype, not " +
                          std::string(dtype_name(dtype)));
  EncodedArray out;
  out.recipe = {{"dtype", dtype_name(dtype)}, {"count", count}, {"transforms", nlohmann::json::array()}};
  out.bytes.assign(data.begin(), data.end());
  out.stored_dtype = dtype;

  if (encoding.delta) {
    visit_integer(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using U = std::make_unsigned_t<T>;
      const auto v = load_values<T>(data);
      std::vector<U> diff(v.size());
      for (std::size_t i = 1; i < v.size(); ++i) {
        if (v[i] < v[i - 1])
          throw InvalidArgument("delta coding needs values that never decrease: element " + std::to_string(i) + " (" +
                                std::to_string(v[i]) + ") is less than element " + std::to_string(i - 1) + " (" +
                                std::to_string(v[i - 1]) + ")");
        diff[i] = static_cast<U>(static_cast<U>(v[i]) - static_cast<U>(v[i - 1]));
      }
      out.recipe["first"] = v.empty() ? T{0} : v[0];
      out.bytes = bytes_of(diff);
    });
    out.stored_dtype = unsigned_of(dtype);
    out.recipe["transforms"].push_back("delta");
  }
  if (encoding.squeeze) {
    visit_integer(out.stored_dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const auto v = load_values<T>(out.bytes);
      const auto [lo, hi] = v.empty() ? std::pair{T{0}, T{0}} : std::pair{*std::min_element(v.begin(), v.end()),
                                                                          *std::max_element(v.begin(), v.end())};
      const DType narrow = narrowest<T>(lo, hi);
      if (dtype_size(narrow) < sizeof(T) || narrow != out.stored_dtype)
        out.bytes = visit_integer(narrow, [&](auto to) { return convert<T, typename decltype(to)::type>(out.bytes); });
      out.stored_dtype = narrow;
    });
    out.recipe["transforms"].push_back("squeeze");
  }
  if (encoding.shuffle) {
    out.bytes = transpose_bytes(out.bytes, dtype_size(out.stored_dtype), true);
    out.recipe["transforms"].push_back("shuffle");
  }
  out.recipe["stored_dtype"] = dtype_name(out.stored_dtype);
  return out;
}

std::vector<std::byte> decode_array(const nlohmann::json& recipe, ConstBytes stored, std::string_view where) {
  if (!recipe.is_object()) bad_recipe(where, "not a JSON object");
  const DType dtype = recipe_dtype(recipe, "dtype", where);
  const DType stored_dtype = recipe_dtype(recipe, "stored_dtype", where);
  auto count_it = recipe.find("count");
  if (count_it == recipe.end() || !count_it->is_number_integer() ||
      (!count_it->is_number_unsigned() && count_it->get<std::int64_t>() < 0))
    bad_recipe(where, "'count' is not a count");
  const auto count = count_it->get<std::uint64_t>();
  if (count > stored.size() || stored.size() / dtype_size(stored_dtype) != count ||
      stored.size() % dtype_size(stored_dtype) != 0)
    throw CorruptData(std::string(where) + ": " + std::to_string(stored.size()) + " stored bytes are not " +
                      std::to_string(count) + " " + std::string(dtype_name(stored_dtype)) + " elements");
  auto t = recipe.find("transforms");
  if (t == recipe.end() || !t->is_array()) bad_recipe(where, "'transforms' is not a list");
  bool delta = false, squeeze = false, shuffled = false;
  int last = -1;
  for (const auto& name : *t) {
    const int rank = !name.is_string() ? -1 : name == "delta" ? 0 : name == "squeeze" ? 1 : name == "shuffle" ? 2 : -1;
    if (rank < 0) bad_recipe(where, "unknown transform " + name.dump());
    if (rank <= last) bad_recipe(where, "transforms repeated or out of order (delta, squeeze, shuffle)");
    last = rank;
    (rank == 0 ? delta : rank == 1 ? squeeze : shuffled) = true;
  }
  if ((delta || squeeze) && !is_integer(dtype))
    bad_recipe(where, "delta and squeeze apply to integers, not " + std::string(dtype_name(dtype)));
  const DType before_squeeze = delta ? unsigned_of(dtype) : dtype;
  if (squeeze ? !is_integer(stored_dtype) || dtype_size(stored_dtype) > dtype_size(before_squeeze)
              : stored_dtype != before_squeeze)
    bad_recipe(where, "stored dtype " + std::string(dtype_name(stored_dtype)) + " does not follow from " +
                          std::string(dtype_name(dtype)) + " and the transforms");

  std::vector<std::byte> bytes =
      shuffled ? transpose_bytes(stored, dtype_size(stored_dtype), false) : std::vector<std::byte>(stored.begin(), stored.end());
  if (squeeze && stored_dtype != before_squeeze)
    bytes = visit_integer(stored_dtype, [&](auto from) {
      return visit_integer(before_squeeze, [&](auto to) {
        return widen_checked<typename decltype(from)::type, typename decltype(to)::type>(bytes, where);
      });
    });
  if (delta)
    visit_integer(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using U = std::make_unsigned_t<T>;
      auto first = recipe.find("first");
      if (first == recipe.end() || !first->is_number_integer()) bad_recipe(where, "'first' is missing");
      const bool fits = first->is_number_unsigned() ? std::in_range<T>(first->get<std::uint64_t>())
                                                    : std::in_range<T>(first->get<std::int64_t>());
      if (!fits) bad_recipe(where, "'first' " + first->dump() + " does not fit " + std::string(dtype_name(dtype)));
      auto diff = load_values<U>(bytes);
      std::vector<T> out(diff.size());
      U acc = first->is_number_unsigned() ? static_cast<U>(first->get<std::uint64_t>())
                                          : static_cast<U>(first->get<std::int64_t>());
      for (std::size_t i = 0; i < diff.size(); ++i) {
        acc = static_cast<U>(acc + diff[i]);
        out[i] = static_cast<T>(acc);
      }
      bytes = bytes_of(out);
    });
  return bytes;
}

DictionaryStrings dictionary_encode(std::span<const std::string_view> values) {
  DictionaryStrings out;
  out.codes.reserve(values.size());
  std::unordered_map<std::string_view, std::uint32_t> index;
  for (std::string_view v : values) {
    auto [it, added] = index.try_emplace(v, static_cast<std::uint32_t>(out.dictionary.size()));
    if (added) {
      if (out.dictionary.size() == std::numeric_limits<std::uint32_t>::max())
        throw InvalidArgument("dictionary encoding holds fewer than 2^32 distinct strings");
      out.dictionary.push_back(v);
    }
    out.codes.push_back(it->second);
  }
  return out;
}

bool dictionary_is_smaller(std::span<const std::string_view> values, const DictionaryStrings& encoded) {
  std::uint64_t merged = 8 * (values.size() + 1), dictionary = 8 * (encoded.dictionary.size() + 1);
  for (std::string_view v : values) merged += v.size();
  for (std::string_view v : encoded.dictionary) dictionary += v.size();
  const std::size_t d = encoded.dictionary.size();
  const std::uint64_t code_width = d <= 256 ? 1 : d <= 65536 ? 2 : 4;
  // The dictionary form has one more file (its codes), so one more header.
  return dictionary + code_width * values.size() + 128 < merged;
}

}  // namespace amphora
