#include <amphora/parallel.hpp>
#include <amphora/table.hpp>

#include "column_files.hpp"
#include "table_columns.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace amphora {

namespace detail {

// Builds columns from parts already checked (by the factories or by load).
struct ColumnAccess {
  static Column make(ColumnType type, std::size_t rows, Tensor values, std::shared_ptr<const Buffer> bytes,
                     std::shared_ptr<const Buffer> valid) {
    return Column(type, rows, std::move(values), std::move(bytes), std::move(valid));
  }
  static const Tensor& raw_values(const Column& c) { return c.values_; }
  static const std::shared_ptr<const Buffer>& bytes(const Column& c) { return c.bytes_; }
  static const std::shared_ptr<const Buffer>& valid(const Column& c) { return c.valid_; }
};

DType dtype_of_column(ColumnType t) {
  switch (t) {
    case ColumnType::int8: return DType::int8;
    case ColumnType::int16: return DType::int16;
    case ColumnType::int32: return DType::int32;
    case ColumnType::int64: return DType::int64;
    case ColumnType::uint8: return DType::uint8;
    case ColumnType::uint16: return DType::uint16;
    case ColumnType::uint32: return DType::uint32;
    case ColumnType::uint64: return DType::uint64;
    case ColumnType::float32: return DType::float32;
    case ColumnType::float64: return DType::float64;
    case ColumnType::boolean: return DType::bool_;
    case ColumnType::timestamp: case ColumnType::naive_timestamp: return DType::int64;
    case ColumnType::string: break;
  }
  throw InvalidArgument("a string column has no dtype");
}

}  // namespace detail

namespace {

using detail::ColumnAccess;
using detail::dtype_of_column;
using detail::column_path;

constexpr ColumnType kFixedTypes[] = {ColumnType::int8,   ColumnType::int16,   ColumnType::int32,  ColumnType::int64,
                                      ColumnType::uint8,  ColumnType::uint16,  ColumnType::uint32, ColumnType::uint64,
                                      ColumnType::float32, ColumnType::float64};


std::shared_ptr<const Buffer> validity(const std::vector<bool>& valid, std::size_t rows) {
  if (valid.empty()) return nullptr;
  if (valid.size() != rows)
    throw InvalidArgument("the validity list has " + std::to_string(valid.size()) + " entries for " +
                          std::to_string(rows) + " rows");
  auto b = Buffer::allocate(rows);
  for (std::size_t i = 0; i < rows; ++i) b->mutable_data()[i] = std::byte{static_cast<unsigned char>(valid[i])};
  return b;
}

Tensor check_1d(Tensor t, const char* what) {
  if (t.ndim() != 1) throw InvalidArgument(std::string(what) + " come from a 1-d tensor, not " + std::to_string(t.ndim()) + "-d");
  return t;
}

template <class S>
Column make_strings(std::span<const S> values, std::vector<bool> valid) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!is_valid_utf8(values[i]))
      throw InvalidArgument("string column row " + std::to_string(i) + " is not valid UTF-8");
    total += values[i].size();
  }
  Tensor offsets = Tensor::zeros(DType::int64, {static_cast<std::int64_t>(values.size() + 1)});
  auto o = offsets.mutable_values<std::int64_t>();
  auto bytes = Buffer::allocate(total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!values[i].empty()) std::memcpy(bytes->mutable_data() + at, values[i].data(), values[i].size());
    at += values[i].size();
    o[i + 1] = static_cast<std::int64_t>(at);
  }
  auto v = validity(valid, values.size());
  return ColumnAccess::make(ColumnType::string, values.size(), std::move(offsets), std::move(bytes), std::move(v));
}

void check_rows(std::size_t begin, std::size_t end, std::size_t rows, const std::string& who) {
  if (begin > end || end > rows)
    throw InvalidArgument(who + "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") are outside [0, " +
                          std::to_string(rows) + ")");
}

}  // namespace

std::string_view to_string(ColumnType type) {
  switch (type) {
    case ColumnType::boolean: return "bool";
    case ColumnType::string: return "string";
    case ColumnType::timestamp: return "timestamp[ns]";
    case ColumnType::naive_timestamp: return "naive_timestamp[ns]";
    default: return dtype_name(dtype_of_column(type));
  }
}

ColumnType parse_column_type(std::string_view text) {
  for (ColumnType t : kFixedTypes)
    if (text == to_string(t)) return t;
  if (text == "bool") return ColumnType::boolean;
  if (text == "string") return ColumnType::string;
  if (text == "timestamp[ns]") return ColumnType::timestamp;
  if (text == "naive_timestamp[ns]") return ColumnType::naive_timestamp;
  throw InvalidArgument("unknown column type '" + std::string(text) +
                        "' (int8-64, uint8-64, float32, float64, bool, string, timestamp[ns], naive_timestamp[ns])");
}

Column Column::numbers(Tensor values, std::vector<bool> valid) {
  check_1d(values, "numbers");
  ColumnType type = ColumnType::boolean;
  if (values.dtype() != DType::bool_) {
    auto it = std::find_if(std::begin(kFixedTypes), std::end(kFixedTypes),
                           [&](ColumnType t) { return dtype_of_column(t) == values.dtype(); });
    if (it == std::end(kFixedTypes))
      throw InvalidArgument("a table column cannot hold " + std::string(dtype_name(values.dtype())) +
                            " (int8-64, uint8-64, float32, float64 or bool)");
    type = *it;
  }
  const auto rows = static_cast<std::size_t>(values.num_elements());
  auto v = validity(valid, rows);
  return ColumnAccess::make(type, rows, std::move(values), nullptr, std::move(v));
}

namespace {

Column make_timestamps(ColumnType type, Tensor nanoseconds, const std::vector<bool>& valid) {
  check_1d(nanoseconds, "timestamps");
  if (nanoseconds.dtype() != DType::int64)
    throw InvalidArgument("timestamps are int64 nanoseconds, not " + std::string(dtype_name(nanoseconds.dtype())));
  const auto rows = static_cast<std::size_t>(nanoseconds.num_elements());
  auto v = validity(valid, rows);
  return ColumnAccess::make(type, rows, std::move(nanoseconds), nullptr, std::move(v));
}

}  // namespace

Column Column::timestamps(Tensor nanoseconds, std::vector<bool> valid) {
  return make_timestamps(ColumnType::timestamp, std::move(nanoseconds), valid);
}

Column Column::naive_timestamps(Tensor nanoseconds, std::vector<bool> valid) {
  return make_timestamps(ColumnType::naive_timestamp, std::move(nanoseconds), valid);
}

Column Column::strings(std::span<const std::string> values, std::vector<bool> valid) {
  return make_strings(values, std::move(valid));
}
Column Column::strings(std::span<const std::string_view> values, std::vector<bool> valid) {
  return make_strings(values, std::move(valid));
}

namespace {
// Made once: a copy allocates only its shape.
const Tensor& empty_int64() {
  static const Tensor empty = Tensor::zeros(DType::int64, {0});
  return empty;
}
}  // namespace

Column::Column() : values_(empty_int64()) {}

Column::Column(ColumnType type, std::size_t rows, Tensor values, std::shared_ptr<const Buffer> bytes,
               std::shared_ptr<const Buffer> valid)
    : type_(type), rows_(rows), values_(std::move(values)), bytes_(std::move(bytes)), valid_(std::move(valid)) {
  if (valid_) null_count_ = static_cast<std::size_t>(std::count(valid_->data(), valid_->data() + rows, std::byte{0}));
}

const Tensor& Column::values() const {
  if (type_ == ColumnType::string) throw InvalidArgument("a string column has no values tensor; use string(row)");
  return values_;
}

std::string_view Column::string(std::size_t row) const {
  if (type_ != ColumnType::string)
    throw InvalidArgument("string(row) of a " + std::string(to_string(type_)) + " column");
  const auto* o = reinterpret_cast<const std::int64_t*>(values_.data());
  return {reinterpret_cast<const char*>(bytes_->data()) + o[row], static_cast<std::size_t>(o[row + 1] - o[row])};
}

Column Column::slice(std::size_t begin, std::size_t end) const {
  check_rows(begin, end, rows_, "");
  Tensor values = type_ == ColumnType::string
                      ? values_.rows(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end + 1))
                      : values_.rows(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end));
  auto valid = valid_ ? Buffer::slice(valid_, begin, end - begin) : nullptr;
  return ColumnAccess::make(type_, end - begin, std::move(values), bytes_, std::move(valid));
}

bool Column::equals(const Column& other) const {
  if (type_ != other.type_ || rows_ != other.rows_ || nullable() != other.nullable()) return false;
  const std::size_t width = type_ == ColumnType::string ? 0 : dtype_size(dtype_of_column(type_));
  for (std::size_t i = 0; i < rows_; ++i) {
    if (is_null(i) != other.is_null(i)) return false;
    if (is_null(i)) continue;
    if (type_ == ColumnType::string) {
      if (string(i) != other.string(i)) return false;
    } else if (std::memcmp(values_.data() + i * width, other.values_.data() + i * width, width) != 0) {
      return false;
    }
  }
  return true;
}

void detail::check_column_name(std::unordered_set<std::string_view>& seen, std::string_view name, std::size_t k) {
  if (name.empty()) throw InvalidArgument("column " + std::to_string(k) + " has an empty name");
  if (!is_valid_utf8(name)) throw InvalidArgument("the name of column " + std::to_string(k) + " is not valid UTF-8");
  if (!seen.insert(name).second) throw InvalidArgument("two columns are named '" + std::string(name) + "'");
}

Table Table::make(std::vector<std::pair<std::string, Column>> columns) {
  Table t;
  std::unordered_set<std::string_view> seen;
  for (std::size_t k = 0; k < columns.size(); ++k) {
    auto& [name, column] = columns[k];
    detail::check_column_name(seen, name, k);
    if (k > 0 && column.size() != t.rows_)
      throw InvalidArgument("column '" + name + "' has " + std::to_string(column.size()) + " rows, column '" +
                            t.names_.front() + "' " + std::to_string(t.rows_));
    t.rows_ = column.size();
    t.names_.push_back(name);
    t.columns_.push_back(std::move(column));
  }
  return t;
}

const Column& Table::column(std::size_t i) const {
  if (i >= columns_.size())
    throw InvalidArgument("column index " + std::to_string(i) + " is out of range (" + std::to_string(columns_.size()) +
                          " columns)");
  return columns_[i];
}

const Column& Table::column(std::string_view name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) {
    std::string have;
    for (const auto& n : names_) have += (have.empty() ? "" : ", ") + n;
    throw NotFound("no column '" + std::string(name) + "' (columns: " + (have.empty() ? "none" : have) + ")");
  }
  return columns_[static_cast<std::size_t>(it - names_.begin())];
}

Table Table::select(std::span<const std::string> names) const {
  std::vector<std::pair<std::string, Column>> picked;
  for (const auto& n : names) picked.emplace_back(n, column(n));
  Table t = make(std::move(picked));
  t.rows_ = rows_;
  return t;
}

Table Table::slice(std::size_t begin, std::size_t end) const {
  check_rows(begin, end, rows_, "");
  Table t = *this;
  for (auto& c : t.columns_) c = c.slice(begin, end);
  t.rows_ = end - begin;
  return t;
}

bool Table::equals(const Table& other) const {
  if (names_ != other.names_ || rows_ != other.rows_) return false;
  for (std::size_t k = 0; k < columns_.size(); ++k)
    if (!columns_[k].equals(other.columns_[k])) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Saving

namespace {

template <class T>
void add_range(nlohmann::json& meta, const Column& c) {
  const T* v = reinterpret_cast<const T*>(ColumnAccess::raw_values(c).data());
  detail::ValueRange<T> range;
  if (c.nullable()) {
    for (std::size_t i = 0; i < c.size(); ++i)
      if (!c.is_null(i)) range.add(v[i]);
  } else {
    range.add_all(std::span<const T>(v, c.size()));
  }
  range.write(meta);
}

void add_stats(nlohmann::json& meta, const Column& c) {
  switch (c.type()) {
    case ColumnType::int8: return add_range<std::int8_t>(meta, c);
    case ColumnType::int16: return add_range<std::int16_t>(meta, c);
    case ColumnType::int32: return add_range<std::int32_t>(meta, c);
    case ColumnType::int64: case ColumnType::timestamp: case ColumnType::naive_timestamp:
      return add_range<std::int64_t>(meta, c);
    case ColumnType::uint8: case ColumnType::boolean: return add_range<std::uint8_t>(meta, c);
    case ColumnType::uint16: return add_range<std::uint16_t>(meta, c);
    case ColumnType::uint32: return add_range<std::uint32_t>(meta, c);
    case ColumnType::uint64: return add_range<std::uint64_t>(meta, c);
    case ColumnType::float32: return add_range<float>(meta, c);
    case ColumnType::float64: return add_range<double>(meta, c);
    case ColumnType::string: return;
  }
}

// The column with every null row's slot zeroed (or emptied): what a null
// row held is not part of the value, so it must not reach the digest.
Column without_hidden_values(const Column& c) {
  if (c.null_count() == 0) return c;
  if (c.type() == ColumnType::string) {
    std::vector<std::string_view> values(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) values[i] = c.is_null(i) ? std::string_view() : c.string(i);
    Column built = make_strings(std::span<const std::string_view>(values), {});
    return ColumnAccess::make(c.type(), c.size(), ColumnAccess::raw_values(built), ColumnAccess::bytes(built),
                              ColumnAccess::valid(c));
  }
  Tensor values = ColumnAccess::raw_values(c).copy();
  const std::size_t width = dtype_size(values.dtype());
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c.is_null(i)) std::memset(values.mutable_data() + i * width, 0, width);
  return ColumnAccess::make(c.type(), c.size(), std::move(values), nullptr, ColumnAccess::valid(c));
}

// `dict`: a string column's dictionary, computed beforehand.
void save_column(const Column& c, DictionaryStrings* dict, std::size_t k, ArtifactWriter& out, nlohmann::json& meta) {
  const std::string path = column_path(k);
  meta["type"] = to_string(c.type());
  meta["nullable"] = c.nullable();
  meta["null_count"] = c.null_count();
  if (c.nullable()) {
    const std::byte* valid = ColumnAccess::valid(c)->data();
    out.write_array<std::uint8_t>(path + ".valid.npy",
                                  detail::pack_bits(c.size(), [&](std::size_t i) { return valid[i] != std::byte{0}; }));
  }
  if (c.type() != ColumnType::string) {
    const Tensor& v = ColumnAccess::raw_values(c);
    out.write_array(path + ".npy", v.dtype(), v.shape(), ConstBytes(v.data(), v.nbytes()));
    add_stats(meta, c);
    return;
  }
  const detail::StringColumn strings = detail::write_string_column(
      out, path, ColumnAccess::bytes(c)->bytes(), ColumnAccess::raw_values(c).values<std::int64_t>(), std::move(*dict));
  if (dictionary_within_limits(strings.dict)) {
    meta["distinct"] = strings.dict.dictionary.size();
  } else {
    DistinctEstimator distinct;
    for (std::size_t i = 0; i < c.size(); ++i) distinct.add(c.string(i));
    meta["distinct"] = distinct.estimate();
  }
  meta["encoding"] = strings.dictionary ? "dictionary" : "plain";
}

}  // namespace

void materializer<Table>::save(const Table& table, ArtifactWriter& out) {
  const std::size_t n = table.num_columns();
  // First the string columns' dictionaries, each encoded on every core: the
  // longest task, which alone beside the others would run on one.
  std::vector<Column> columns(n);
  std::vector<DictionaryStrings> dicts(n);
  for (std::size_t k = 0; k < n; ++k) {
    columns[k] = without_hidden_values(table.column(k));
    if (columns[k].type() == ColumnType::string)
      dicts[k] = dictionary_encode(ColumnAccess::bytes(columns[k])->bytes(),
                                   ColumnAccess::raw_values(columns[k]).values<std::int64_t>());
  }
  // Then each column's files: written, hashed and summarised in parallel.
  std::vector<nlohmann::json> metas(n, nlohmann::json::object());
  std::vector<std::exception_ptr> failures(n);
  parallel_for(n, [&](std::size_t k) {
    try {
      metas[k]["name"] = table.names()[k];
      save_column(columns[k], &dicts[k], k, out, metas[k]);
    } catch (...) {
      failures[k] = std::current_exception();
    }
  });
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
  out.meta()["rows"] = table.rows();
  out.meta()["columns"] = metas;
}

// ---------------------------------------------------------------------------
// Loading

namespace {

struct Schema {
  std::size_t rows = 0;
  std::vector<std::string> names;
  std::vector<ColumnType> types;
  std::vector<bool> nullable;
  std::vector<std::string> encodings;  // strings: plain or dictionary
};

Schema read_schema(const ArtifactReader& in) {
  in.require_materializer(materializer<Table>::name, materializer<Table>::version, "a table");
  Schema s;
  s.rows = in.meta<std::size_t>("rows");
  const auto columns = in.meta<nlohmann::json>("columns");
  auto bad = [&](std::size_t k, const std::string& why) {
    throw CorruptData(in.label() + ": column " + std::to_string(k) + " of the schema " + why);
  };
  if (!columns.is_array()) throw CorruptData(in.label() + ": metadata 'columns' is not a list");
  std::set<std::string, std::less<>> seen;
  for (std::size_t k = 0; k < columns.size(); ++k) {
    const auto& c = columns[k];
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("type") ||
        !c["type"].is_string() || !c.contains("nullable") || !c["nullable"].is_boolean())
      bad(k, "lacks a name, type or nullable flag");
    const auto name = c["name"].get<std::string>();
    if (name.empty() || !seen.insert(name).second) bad(k, "has an empty or repeated name");
    s.names.push_back(name);
    try {
      s.types.push_back(parse_column_type(c["type"].get<std::string>()));
    } catch (const InvalidArgument& e) {
      throw Unsupported(in.label() + ": column '" + name + "': " + e.what());
    }
    s.nullable.push_back(c["nullable"].get<bool>());
    std::string encoding;
    if (s.types.back() == ColumnType::string) {
      encoding = c.value("encoding", std::string());
      if (encoding != "plain" && encoding != "dictionary")
        throw Unsupported(in.label() + ": column '" + name + "' has unknown string encoding '" + encoding + "'");
    }
    s.encodings.push_back(encoding);
  }
  return s;
}

std::shared_ptr<const Buffer> read_validity(const ArtifactReader& in, const std::string& path, std::size_t rows,
                                            std::size_t begin, std::size_t end, const std::string& where) {
  const ArrayView bits = detail::read_bitmap(in, path + ".valid.npy", rows, where);
  auto out = Buffer::allocate(end - begin);
  auto b = bits.values<std::uint8_t>();
  for (std::size_t i = begin; i < end; ++i)
    out->mutable_data()[i - begin] = std::byte{static_cast<unsigned char>((b[i / 8] >> (i % 8)) & 1u)};
  return out;
}

Column load_column(const ArtifactReader& in, const Schema& s, std::size_t k, std::size_t begin, std::size_t end) {
  const std::string path = column_path(k), &name = s.names[k];
  const std::string where = in.label() + ": column '" + name + "'";
  auto valid = s.nullable[k] ? read_validity(in, path, s.rows, begin, end, where) : nullptr;
  const ColumnType type = s.types[k];
  // Where mapping a file would fetch it whole (a remote store), only the
  // rows' part of each file is read.
  const bool ranged = !in.maps_in_place() && (begin != 0 || end != s.rows);
  if (type != ColumnType::string && ranged) {
    ArrayView a = in.read_array_range(path + ".npy", dtype_of_column(type), s.rows, begin, end);
    return ColumnAccess::make(type, end - begin, Tensor::Make(a.dtype(), {static_cast<std::int64_t>(end - begin)}, a.buffer()),
                              nullptr, std::move(valid));
  }
  if (type != ColumnType::string) {
    ArrayView a = in.read_array(path + ".npy", dtype_of_column(type), 1);
    if (a.size() != s.rows)
      throw CorruptData(where + " holds " + std::to_string(a.size()) + " values for " + std::to_string(s.rows) + " rows");
    const std::size_t width = dtype_size(a.dtype());
    Tensor values = Tensor::Make(a.dtype(), {static_cast<std::int64_t>(end - begin)},
                                 Buffer::slice(a.buffer(), begin * width, (end - begin) * width));
    if (in.load_options().eager) values = values.copy();
    return ColumnAccess::make(type, end - begin, std::move(values), nullptr, std::move(valid));
  }
  if (s.encodings[k] == "plain" && ranged) {
    StringsView strings = in.read_strings_range(path, s.rows, begin, end);
    const ArrayView& offsets = strings.offsets();
    Tensor o = Tensor::Make(DType::int64, {static_cast<std::int64_t>(end - begin + 1)}, offsets.buffer());
    return ColumnAccess::make(type, end - begin, std::move(o), strings.bytes_buffer(), std::move(valid));
  }
  if (s.encodings[k] == "plain") {
    StringsView strings = in.read_strings(path);
    if (strings.size() != s.rows)
      throw CorruptData(where + " holds " + std::to_string(strings.size()) + " strings for " + std::to_string(s.rows) + " rows");
    const ArrayView& offsets = strings.offsets();
    Tensor o = Tensor::Make(DType::int64, {static_cast<std::int64_t>(end - begin + 1)},
                            Buffer::slice(offsets.buffer(), begin * 8, (end - begin + 1) * 8));
    return ColumnAccess::make(type, end - begin, std::move(o), strings.bytes_buffer(), std::move(valid));
  }
  // Dictionary: the strings of the rows asked for, gathered from the dictionary.
  const detail::DictionaryColumn dict = ranged ? detail::read_dictionary_rows(in, path, s.rows, begin, end, where)
                                               : detail::read_dictionary_column(in, path, s.rows, begin, end, where);
  auto c = dict.codes.values<std::uint32_t>();
  const std::size_t first = ranged ? 0 : begin;  // a ranged read holds only the rows' codes
  std::vector<std::string_view> values(end - begin);
  for (std::size_t i = 0; i < end - begin; ++i) values[i] = dict.words[c[first + i]];
  Column built = make_strings(std::span<const std::string_view>(values), {});
  return ColumnAccess::make(type, end - begin, ColumnAccess::raw_values(built), ColumnAccess::bytes(built),
                            std::move(valid));
}

}  // namespace

Table load_table(const ArtifactReader& in, const TableSelection& selection) {
  const Schema s = read_schema(in);
  std::vector<std::size_t> picked;
  if (selection.columns.empty()) {
    for (std::size_t k = 0; k < s.names.size(); ++k) picked.push_back(k);
  } else {
    for (const auto& n : selection.columns) {
      auto it = std::find(s.names.begin(), s.names.end(), n);
      if (it == s.names.end()) throw NotFound(in.label() + " has no column '" + n + "'");
      picked.push_back(static_cast<std::size_t>(it - s.names.begin()));
    }
  }
  // Plain variables, not a structured binding: lambdas capture them (clang 14 cannot capture bindings).
  const auto range = selection.rows.value_or(std::pair<std::size_t, std::size_t>{0, s.rows});
  const std::size_t begin = range.first, end = range.second;
  check_rows(begin, end, s.rows, in.label() + ": ");
  std::vector<Column> columns(picked.size());
  std::vector<std::exception_ptr> failures(picked.size());
  parallel_for(picked.size(), [&](std::size_t i) {
    try {
      columns[i] = load_column(in, s, picked[i], begin, end);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  });
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
  std::vector<std::pair<std::string, Column>> named;
  for (std::size_t i = 0; i < picked.size(); ++i) named.emplace_back(s.names[picked[i]], std::move(columns[i]));
  return Table::make(std::move(named));
}

}  // namespace amphora
