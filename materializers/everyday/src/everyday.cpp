#include <amphora/describe.hpp>
#include <amphora/everyday.hpp>
#include <amphora/record_list.hpp>

#include <amphora/npy_format.hpp>

#include <charconv>

namespace amphora {

namespace detail {

namespace {

// Throws TypeMismatch unless a tensor of `has` and `shape` is `ndim`-d of `dtype`.
void require_tensor_as(const ArtifactReader& in, DType has, std::span<const std::int64_t> shape, DType dtype, int ndim) {
  if (has == dtype && shape.size() == static_cast<std::size_t>(ndim)) return;
  std::string dims;
  for (std::size_t k = 0; k < shape.size(); ++k) dims += (k ? "x" : "") + std::to_string(shape[k]);
  throw TypeMismatch(in.label() + " holds a " + std::to_string(shape.size()) + "-d " + std::string(dtype_name(has)) +
                    " tensor" + (dims.empty() ? "" : " of shape " + dims) + ", not " +
                    (ndim == 0 ? "a single " : "a 1-d ") + std::string(dtype_name(dtype)) +
                    (ndim == 0 ? " value" : " vector"));
}

}  // namespace

Tensor load_tensor_as(const ArtifactReader& in, DType dtype, int ndim) {
  Tensor t = materializer<Tensor>::load(in);
  require_tensor_as(in, t.dtype(), t.shape(), dtype, ndim);
  return t;
}

namespace {

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string dims;
  for (std::size_t k = 0; k < shape.size(); ++k) dims += (k ? "x" : "") + (shape[k] < 0 ? std::string("n") : std::to_string(shape[k]));
  return dims.empty() ? "()" : dims;
}

// Throws TypeMismatch unless a tensor of `has` and `shape` is of `dtype` in `want` (-1: any length).
void require_tensor_shaped(const ArtifactReader& in, DType has, std::span<const std::int64_t> shape, DType dtype,
                           std::span<const std::int64_t> want, const std::type_info& declared) {
  bool fits = has == dtype && shape.size() == want.size();
  for (std::size_t k = 0; fits && k < want.size(); ++k) fits = want[k] < 0 || want[k] == shape[k];
  if (fits) return;
  throw TypeMismatch(in.label() + " holds a " + std::string(dtype_name(has)) + " tensor of shape " + shape_text(shape) +
                     ", which " + type_display_name(declared) + " cannot hold (it needs " +
                     std::string(dtype_name(dtype)) + " elements in shape " + shape_text(want) + ")");
}

}  // namespace

Tensor load_tensor_shaped(const ArtifactReader& in, DType dtype, std::span<const std::int64_t> shape,
                          const std::type_info& declared) {
  Tensor t = materializer<Tensor>::load(in);
  require_tensor_shaped(in, t.dtype(), t.shape(), dtype, shape, declared);
  return t;
}

void accept_tensor_shaped(const ArtifactReader& in, DType dtype, std::span<const std::int64_t> shape,
                          const std::type_info& declared) {
  // An unknown dtype is Unsupported (a newer build's), as the tensor's own load says.
  require_tensor_shaped(in, dtype_from_name(in.meta<std::string>("dtype")), in.meta<std::vector<std::int64_t>>("shape"),
                        dtype, shape, declared);
}

void accept_tensor_as(const ArtifactReader& in, DType dtype, int ndim) {
  require_tensor_as(in, dtype_from_name(in.meta<std::string>("dtype")), in.meta<std::vector<std::int64_t>>("shape"), dtype,
                    ndim);
}

std::string child_role(std::string_view prefix, std::size_t index) { return std::string(prefix) + std::to_string(index); }

std::size_t checked_count(const ArtifactReader& in, std::string_view prefix) {
  auto count = in.meta<std::uint64_t>("count");
  if (count > in.children().size())
    throw CorruptData(in.label() + ": meta says " + std::to_string(count) + " items but it lists " +
                      std::to_string(in.children().size()) + " children");
  for (std::uint64_t i = 0; i < count; ++i)
    if (!in.has_child(child_role(prefix, i)))
      throw CorruptData(in.label() + " lists no child '" + child_role(prefix, i) + "' of its " +
                        std::to_string(count) + " items");
  return static_cast<std::size_t>(count);
}

namespace {

// A lower bound of the text's size, accumulated until it passes `limit`.
bool add_size(const nlohmann::json& v, std::size_t limit, std::size_t& total) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      total += 2;
      for (auto it = v.begin(); it != v.end() && total <= limit; ++it) {
        total += it.key().size() + 4;
        if (add_size(it.value(), limit, total)) return true;
      }
      break;
    case nlohmann::json::value_t::array:
      total += 2;
      for (const auto& e : v) {
        total += 1;
        if (add_size(e, limit, total)) return true;
      }
      break;
    case nlohmann::json::value_t::string:
      total += v.get_ref<const std::string&>().size() + 2;
      break;
    default:
      total += 1;
  }
  return total > limit;
}

}  // namespace

bool json_longer_than(const nlohmann::json& value, std::size_t limit) {
  std::size_t total = 0;
  return add_size(value, limit, total);
}

bool check_optional(const ArtifactReader& in) {
  bool engaged = in.meta<bool>("engaged");
  if (engaged != in.has_child("value") || in.children().size() != (engaged ? 1u : 0u))
    throw CorruptData(in.label() + ": an optional that is " + (engaged ? "" : "not ") + "engaged must list exactly " +
                      (engaged ? "the child 'value'" : "no child"));
  return engaged;
}

std::string stored_value_text(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  switch (value.type()) {
    case nlohmann::json::value_t::string: return "a string " + text;
    case nlohmann::json::value_t::boolean: return "a bool " + text;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer " + text;
    case nlohmann::json::value_t::number_float: return "a number " + text;
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::array: return "a JSON array " + text;
    default: return "a JSON object " + text;
  }
}

ArrayView read_member_array(const ArtifactReader& in, const std::string& file, std::string_view field, DType dtype,
                            std::span<const std::int64_t> shape, const std::type_info& declared) {
  ArrayView array = in.read_array(file);
  const bool dtype_fits = array.dtype() == dtype || (dtype == DType::bfloat16 && array.dtype() == DType::uint16);
  bool shape_fits = array.shape().size() == shape.size();
  for (std::size_t k = 0; shape_fits && k < shape.size(); ++k) shape_fits = shape[k] < 0 || shape[k] == array.shape()[k];
  if (!dtype_fits || !shape_fits)
    throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' is stored in '" + file + "' as " +
                       std::string(dtype_name(array.dtype())) + " elements in shape " + shape_text(array.shape()) +
                       ", which the declared member type " + type_display_name(declared) + " cannot hold (it needs " +
                       std::string(dtype_name(dtype)) + " elements in shape " + shape_text(shape) + ")");
  if (dtype == DType::bfloat16) array = in.read_array(file, dtype, static_cast<int>(shape.size()));
  return array;
}

const nlohmann::json& struct_fields(const ArtifactReader& in) {
  auto it = in.meta().find("fields");
  if (it == in.meta().end() || !it->is_object())
    throw CorruptData(in.label() + ": metadata key 'fields' is " + (it == in.meta().end() ? "missing" : "not an object") +
                      " (materializer " + in.manifest().materializer + ")");
  return *it;
}

std::uint64_t offsets_end(const ArrayView& offsets) {
  if (offsets.size() == 0) return 0;
  const std::int64_t last = offsets.values<std::int64_t>().back();
  return last < 0 ? 0 : static_cast<std::uint64_t>(last);
}

bool column_stored(const ArtifactReader& in, const std::string& path) {
  // Files are sorted by path: '.' and '/' sort after nothing a column path
  // may continue with that matters here, so look at the first file from
  // PATH. and from PATH/.
  const auto& files = in.manifest().files;
  for (const std::string& prefix : {path + ".", path + "/"}) {
    auto it = std::lower_bound(files.begin(), files.end(), prefix,
                               [](const FileEntry& f, const std::string& p) { return f.path < p; });
    if (it != files.end() && it->path.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

ArrayView read_column_array(const ArtifactReader& in, const std::string& file, DType dtype,
                            std::span<const std::int64_t> row_shape, std::size_t rows, const std::type_info& declared) {
  if (!in.has_file(file))
    throw NotFound(in.label() + ": no payload file '" + file + "'");
  ArrayView array = in.read_array(file);
  const bool dtype_fits = array.dtype() == dtype || (dtype == DType::bfloat16 && array.dtype() == DType::uint16);
  bool shape_fits = array.shape().size() == row_shape.size() + 1;
  for (std::size_t k = 0; shape_fits && k < row_shape.size(); ++k) shape_fits = array.shape()[k + 1] == row_shape[k];
  if (!dtype_fits || !shape_fits) {
    std::vector<std::int64_t> want(row_shape.begin(), row_shape.end());
    want.insert(want.begin(), static_cast<std::int64_t>(rows));
    throw TypeMismatch(in.label() + ": column file '" + file + "' holds " + std::string(dtype_name(array.dtype())) +
                       " elements in shape " + shape_text(array.shape()) + ", but the member type " +
                       type_display_name(declared) + " is stored as " + std::string(dtype_name(dtype)) +
                       " elements in shape " + shape_text(want));
  }
  if (dtype == DType::bfloat16) array = in.read_array(file, dtype, static_cast<int>(row_shape.size()) + 1);
  check_rows(in, file, array.shape().empty() ? 0 : static_cast<std::uint64_t>(array.shape()[0]), rows);
  return array;
}

int stored_struct_version(const ArtifactReader& in, const std::string& path, int declared) {
  auto versions = in.meta().find("struct_versions");
  if (versions != in.meta().end() && versions->is_object()) {
    auto it = versions->find(path);
    if (it != versions->end()) {
      if (!json_holds<int>(*it))
        throw CorruptData(in.label() + ": metadata 'struct_versions' gives column '" + path + "' a version that is not an integer");
      return it->get<int>();
    }
  }
  if (path.empty()) return in.meta<int>("element_version");
  return declared;
}

void newer_struct_version(const ArtifactReader& in, const std::string& path, int stored, int declared) {
  throw Unsupported(in.label() + ": the struct at column '" + (path.empty() ? std::string("(the records)") : path) +
                    "' was saved by its version " + std::to_string(stored) + ", newer than the version " +
                    std::to_string(declared) + " this program reads");
}

void column_type_mismatch(const ArtifactReader& in, const std::string& path, const std::type_info& declared,
                          const std::string& why) {
  std::string stored;
  std::size_t listed = 0;
  for (const auto& f : in.manifest().files) {
    if (f.path.rfind(path, 0) != 0 || f.path.size() == path.size() || (f.path[path.size()] != '.' && f.path[path.size()] != '/'))
      continue;
    if (++listed <= 4) stored += (stored.empty() ? "'" : ", '") + f.path + "'";
  }
  if (listed > 4) stored += ", ...";
  throw TypeMismatch(in.label() + ": record list column '" + path + "' is stored (" + stored +
                     "), but not as its declared type " + type_display_name(declared) + " is stored (" + why + ")");
}

void check_map_column_keys(const ArtifactReader& in, const std::string& path, std::span<const std::int64_t> offsets,
                           const StringsView& keys) {
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
    for (auto k = offsets[i] + 1; k < offsets[i + 1]; ++k)
      if (!(keys[static_cast<std::size_t>(k - 1)] < keys[static_cast<std::size_t>(k)]))
        throw CorruptData(in.label() + ": the keys of record " + std::to_string(i) + " in map column '" + path +
                          "' are not sorted and unique");
}

void check_rows(const ArtifactReader& in, const std::string& where, std::uint64_t have, std::size_t rows) {
  if (have != rows)
    throw CorruptData(in.label() + ": column '" + where + "' holds " + std::to_string(have) + " entries, expected " +
                      std::to_string(rows));
}

void check_offsets(const ArtifactReader& in, const std::string& where, std::span<const std::int64_t> offsets,
                   std::size_t rows, std::uint64_t values) {
  const std::string what = in.label() + ": column '" + where + "'";
  if (offsets.size() != rows + 1)
    throw CorruptData(what + " holds " + std::to_string(offsets.size()) + " offsets, expected " + std::to_string(rows + 1));
  validate_offsets(offsets, values, what, "there are " + std::to_string(values) + " values");
}

std::size_t check_record_list(const ArtifactReader& in, std::string_view name, int version) {
  auto element = in.meta<std::string>("element");
  if (element != name)
    throw TypeMismatch(in.label() + " holds records of '" + element + "', not of '" + std::string(name) + "'");
  auto element_version = in.meta<int>("element_version");
  if (element_version > version)
    throw Unsupported(in.label() + " holds '" + element + "' records of format version " +
                      std::to_string(element_version) + ", newer than the version " + std::to_string(version) +
                      " this program reads");
  return in.meta<std::size_t>("count");
}

void check_tuple_size(const ArtifactReader& in, std::size_t size, const std::type_info& declared) {
  const auto count = in.meta<std::uint64_t>("count");
  if (count != size)
    throw TypeMismatch(in.label() + " holds a tuple of " + std::to_string(count) + " elements, not the " +
                       std::to_string(size) + " of " + type_display_name(declared));
  auto fields = in.meta().find("fields");
  if (fields == in.meta().end() || !fields->is_object())
    throw CorruptData(in.label() + ": metadata key 'fields' is missing or not an object");
  auto is_element = [&](const std::string& key) {
    std::uint64_t index = 0;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
    return ec == std::errc{} && end == key.data() + key.size() && index < count && std::to_string(index) == key;
  };
  for (const auto& item : fields->items())
    if (!is_element(item.key()) || in.has_child(item.key()))
      throw CorruptData(in.label() + ": tuple field '" + item.key() + "' is not one of its " + std::to_string(count) +
                        " elements, stored once");
  for (const auto& child : in.children())
    if (!is_element(child.role))
      throw CorruptData(in.label() + ": tuple child '" + child.role + "' is not one of its " + std::to_string(count) +
                        " elements");
}

std::size_t check_variant(const ArtifactReader& in, std::size_t alternatives, const std::type_info& declared,
                          const nlohmann::json** inline_value) {
  const auto index = in.meta<std::uint64_t>("index");
  if (index >= alternatives)
    throw TypeMismatch(in.label() + " holds alternative " + std::to_string(index) + " of a variant, but " +
                       type_display_name(declared) + " has " + std::to_string(alternatives));
  auto it = in.meta().find("value");
  *inline_value = it == in.meta().end() ? nullptr : &*it;
  const bool child = in.has_child("value");
  if ((*inline_value && child) || in.children().size() != (child ? 1u : 0u))
    throw CorruptData(in.label() + ": a variant stores its value inline or as the child 'value', once");
  return static_cast<std::size_t>(index);
}

void save_map_keys(ArtifactWriter& out, std::span<const std::string_view> keys, std::string_view values_encoding) {
  out.meta()["count"] = keys.size();
  out.meta()["values"] = values_encoding;
  out.write_strings("keys", keys);
}

MapLayout check_map(const ArtifactReader& in) {
  MapLayout layout;
  layout.count = in.meta<std::size_t>("count");
  layout.values = in.meta<std::string>("values");
  layout.keys = in.read_strings("keys");
  const StringsView& keys = layout.keys;
  if (keys.size() != layout.count)
    throw CorruptData(in.label() + ": meta says " + std::to_string(layout.count) + " entries but 'keys' holds " +
                      std::to_string(keys.size()));
  for (std::size_t i = 1; i < keys.size(); ++i)
    if (!(keys[i - 1] < keys[i]))
      throw CorruptData(in.label() + ": map keys are not sorted and unique at key " + std::to_string(i));
  if (layout.values == "children") {
    if (checked_count(in, "values/") != layout.count) throw CorruptData(in.label() + ": map children disagree with its keys");
  } else if (layout.values != "array" && layout.values != "strings" && layout.values != "json") {
    throw Unsupported(in.label() + ": unknown map value encoding '" + layout.values + "'");
  }
  return layout;
}

}  // namespace detail

// ---------------------------------------------------------------------------

void materializer<std::string>::save(const std::string& value, ArtifactWriter& out) {
  out.meta()["bytes"] = value.size();
  out.meta()["utf8"] = is_valid_utf8(value);
  out.write_file("string.bin", std::as_bytes(std::span<const char>(value)));
}

std::string materializer<std::string>::load(const ArtifactReader& in) {
  auto bytes = in.load_file("string.bin");
  if (in.meta<std::uint64_t>("bytes") != bytes->size())
    throw CorruptData(in.label() + ": meta says " + std::to_string(in.meta<std::uint64_t>("bytes")) +
                      " bytes, 'string.bin' holds " + std::to_string(bytes->size()));
  return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

void materializer<nlohmann::json>::save(const nlohmann::json& value, ArtifactWriter& out) {
  out.meta()["type"] = value.type_name();
  if (value.is_object() || value.is_array()) out.meta()["size"] = value.size();
  out.write_json("value.json", value);
}

nlohmann::json materializer<nlohmann::json>::load(const ArtifactReader& in) { return in.read_json("value.json"); }

void materializer<std::vector<std::string>>::save(const std::vector<std::string>& values, ArtifactWriter& out) {
  std::size_t bytes = 0;
  for (const auto& v : values) bytes += v.size();
  out.meta()["count"] = values.size();
  out.meta()["bytes"] = bytes;
  out.write_strings("strings", values);
}

StringsView load_strings_view(const ArtifactReader& in) {
  StringsView view = in.read_strings("strings");
  if (in.meta<std::uint64_t>("count") != view.size())
    throw CorruptData(in.label() + ": meta says " + std::to_string(in.meta<std::uint64_t>("count")) +
                      " strings, the payload holds " + std::to_string(view.size()));
  return view;
}

std::vector<std::string> materializer<std::vector<std::string>>::load(const ArtifactReader& in) {
  return load_strings_view(in).to_vector();
}

void materializer<std::vector<std::string>>::validate(const ArtifactReader& in) { (void)load_strings_view(in); }

// ---------------------------------------------------------------------------
// Tensor items: PREFIXdata.bin holds the items back to back, each starting
// at a multiple of 64 bytes; PREFIXindex.json lists [dtype, shape, offset]
// per item. amphora.tensor_list is this with an empty prefix; a Tensor
// column of a record list with the prefix "COLUMN.".

namespace detail {

namespace {

constexpr std::uint64_t kItemAlignment = 64;

bool has_non_bool_byte(ConstBytes bytes) {
  return std::any_of(bytes.begin(), bytes.end(), [](std::byte b) { return static_cast<unsigned>(b) > 1; });
}

}  // namespace

std::uint64_t write_tensor_items(ArtifactWriter& out, const std::string& prefix, std::size_t count,
                                 const std::function<const Tensor&(std::size_t)>& item) {
  static const std::byte zeros[kItemAlignment] = {};
  nlohmann::json index = nlohmann::json::array();
  std::vector<ConstBytes> parts;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Tensor& t = item(i);
    if (t.dtype() == DType::bool_ && has_non_bool_byte(ConstBytes(t.data(), t.nbytes())))
      throw InvalidArgument("bool tensor " + std::to_string(i) + " of '" + prefix + "data.bin' holds a byte other than 0 or 1");
    index.push_back({dtype_name(t.dtype()), t.shape(), at});
    parts.emplace_back(t.data(), t.nbytes());
    at += t.nbytes();
    if (std::uint64_t pad = (kItemAlignment - at % kItemAlignment) % kItemAlignment; pad) {
      parts.emplace_back(zeros, static_cast<std::size_t>(pad));
      at += pad;
    }
  }
  out.write_file(prefix + "data.bin", parts);
  out.write_json(prefix + "index.json", index);
  return at;
}

TensorItems read_tensor_items(const ArtifactReader& in, const std::string& prefix, std::size_t count) {
  const std::string index_path = prefix + "index.json", data_path = prefix + "data.bin";
  nlohmann::json index = in.read_json(index_path);
  const std::uint64_t data_size = in.file_size(data_path);
  auto bad = [&](std::size_t i, const std::string& why) -> CorruptData {
    return CorruptData(in.label() + ": '" + index_path + "' item " + std::to_string(i) + " " + why);
  };
  if (!index.is_array()) throw CorruptData(in.label() + ": '" + index_path + "' is not an array");
  if (index.size() != count)
    throw CorruptData(in.label() + ": " + std::to_string(count) + " items expected, '" + index_path + "' lists " +
                      std::to_string(index.size()));
  TensorItems out;
  out.label = in.label();
  out.path = data_path;
  out.items.reserve(index.size());
  for (std::size_t i = 0; i < index.size(); ++i) {
    const auto& e = index[i];
    if (!e.is_array() || e.size() != 3 || !e[0].is_string() || !e[1].is_array() || !e[2].is_number_unsigned())
      throw bad(i, "is not [dtype, shape, offset]");
    TensorItem item;
    try {
      item.dtype = dtype_from_name(e[0].get<std::string>());
    } catch (const Unsupported&) {
      throw bad(i, "has unknown dtype '" + e[0].get<std::string>() + "'");
    }
    for (const auto& d : e[1]) {
      if (!d.is_number_integer()) throw bad(i, "has a dimension that is not an integer");
      item.shape.push_back(d.get<std::int64_t>());
    }
    try {
      item.bytes = checked_element_count(item.shape, item.dtype) * dtype_size(item.dtype);
    } catch (const InvalidArgument& ex) {
      throw bad(i, ex.what());
    }
    item.offset = e[2].get<std::uint64_t>();
    if (item.offset % kItemAlignment != 0) throw bad(i, "starts at byte " + std::to_string(item.offset) + ", not a multiple of 64");
    if (item.offset > data_size || item.bytes > data_size - item.offset)
      throw bad(i, "spans bytes [" + std::to_string(item.offset) + ", +" + std::to_string(item.bytes) + ") past the end of '" +
                       data_path + "' (" + std::to_string(data_size) + " bytes)");
    out.items.push_back(std::move(item));
  }
  out.data = in.load_file(data_path);
  return out;
}

Tensor TensorItems::get(std::size_t i) const {
  const TensorItem& item = items[i];
  auto bytes = Buffer::slice(data, static_cast<std::size_t>(item.offset), static_cast<std::size_t>(item.bytes));
  if (item.dtype == DType::bool_ && has_non_bool_byte(bytes->bytes()))
    throw CorruptData(label + ": bool item " + std::to_string(i) + " of '" + path + "' holds a byte other than 0 or 1");
  return Tensor::Make(item.dtype, item.shape, std::move(bytes));
}

}  // namespace detail

void materializer<std::vector<Tensor>>::save(const std::vector<Tensor>& items, ArtifactWriter& out) {
  out.meta()["count"] = items.size();
  out.meta()["data_bytes"] = detail::write_tensor_items(out, "", items.size(), [&](std::size_t i) -> const Tensor& { return items[i]; });
}

std::vector<Tensor> materializer<std::vector<Tensor>>::load(const ArtifactReader& in) {
  auto items = detail::read_tensor_items(in, "", in.meta<std::size_t>("count"));
  std::vector<Tensor> out;
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) out.push_back(items.get(i));
  return out;
}

void materializer<std::vector<Tensor>>::validate(const ArtifactReader& in) {
  (void)detail::read_tensor_items(in, "", in.meta<std::size_t>("count"));
}

}  // namespace amphora
