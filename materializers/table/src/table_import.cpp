// Importing a CSV file as a table without holding it: the file is read
// twice, a block at a time. The first pass infers each column's type, its
// statistics and, for strings, its dictionary (within the limits of
// array_encoding.hpp); the second parses the fields again and appends them
// to the column files. The artifact is the one saving read_csv(file) makes,
// file for file and so digest for digest.

#include <amphora/array_encoding.hpp>
#include <amphora/table.hpp>

#include "column_files.hpp"
#include "csv_reader.hpp"
#include "table_columns.hpp"

#include <cstring>
#include <memory>

namespace amphora {

namespace {

using detail::TypeGuess;

// What the first pass learns of one column.
struct ColumnPlan {
  TypeGuess guess;
  detail::ValueRange<std::int64_t> ints, times;
  detail::ValueRange<std::uint64_t> uints;
  detail::ValueRange<double> floats;
  detail::ValueRange<std::uint8_t> bools;
  StreamingDictionary strings;
  bool tracking = false;  // every field so far went into `strings`
  bool late = false;      // became text after typed values: its strings need a pass of their own

  void add(std::string_view field) {
    const detail::FieldValue v = guess.add(field);
    if (!field.empty()) {
      if (guess.can_int) ints.add(v.integer);
      if (guess.can_uint) uints.add(v.uinteger);
      if (guess.can_float) floats.add(v.real);
      if (guess.can_bool) bools.add(static_cast<std::uint8_t>(v.boolean));
      if (guess.can_time) times.add(v.time);
    }
    if (tracking) return strings.add(field);
    if (guess.typed()) return;
    // This field makes it a string column. Only when every field before it
    // was empty are the earlier strings known here.
    tracking = true;
    if (guess.present > 1) {
      late = true;
      return;
    }
    for (std::size_t i = 1; i < guess.rows; ++i) strings.add({});
    strings.add(field);
  }

  void finish() {
    if (guess.type() == ColumnType::string && !tracking) {  // every field empty
      for (std::size_t i = 0; i < guess.rows; ++i) strings.add({});
      tracking = true;
    }
  }
};

[[noreturn]] void changed(const std::string& where, std::size_t line) {
  throw InvalidArgument(where + ": line " + std::to_string(line) +
                        ": the file changed while it was imported (it is read twice); import it again");
}

// The second pass's writer of one column: the files save_column writes for
// the column read_csv builds, and the same metadata.
class ColumnWriter {
 public:
  // `batch`: the bytes each of this column's streams gathers (batch_share).
  ColumnWriter(ArtifactWriter& out, std::size_t k, ColumnPlan& plan, const std::string& where, std::size_t batch)
      : plan_(plan), type_(plan.guess.type()), where_(where) {
    const std::string path = detail::column_path(k);
    const std::size_t rows = plan.guess.rows;
    if (plan.guess.present != rows)
      valid_.emplace(out.open_array(path + ".valid.npy", DType::uint8, (rows + 7) / 8), batch);
    if (type_ != ColumnType::string) {
      values_.emplace(out.open_array(path + ".npy", detail::dtype_of_column(type_), rows), batch);
      return;
    }
    dictionary_ = plan.strings.dictionary_is_smaller();
    if (dictionary_) {
      nlohmann::json recipe = detail::squeezed_codes_recipe(rows, plan.strings.words().size());
      code_width_ = dtype_size(dtype_from_name(recipe["stored_dtype"].get<std::string>()));
      out.write_strings(path + ".dict", plan.strings.words());
      values_.emplace(out.open_encoded_array(path + ".codes.npy", std::move(recipe)), batch);
    } else {
      values_.emplace(out.open_array(path + ".offsets.npy", DType::int64, rows + 1), batch);
      values_->add(std::int64_t{0});
      bytes_.emplace(out.open_stream(path + ".bytes", plan.strings.total_bytes()), batch);
    }
  }

  void add(std::string_view field, std::size_t line) {
    line_ = line;
    const bool present = !field.empty();
    if (valid_) valid_->add(present);
    if (type_ == ColumnType::string) {
      if (dictionary_) {  // the dictionary's words were checked in the first pass
        std::uint32_t code = 0;
        try {
          code = plan_.strings.code_of(field);
        } catch (const InvalidArgument&) {
          changed(where_, line);
        }
        values_->add(&code, code_width_);  // little-endian: the low bytes are the narrow code
      } else {
        if (!is_valid_utf8(field)) changed(where_, line);  // what the first pass checked may have changed
        bytes_->add(field.data(), field.size());
        offset_ += static_cast<std::int64_t>(field.size());
        values_->add(offset_);
      }
      return;
    }
    detail::FieldValue v;  // zero for an empty field
    if (present && !detail::parse_field(type_, field, v)) changed(where_, line);
    switch (type_) {
      case ColumnType::int64: values_->add(v.integer); break;
      case ColumnType::uint64: values_->add(v.uinteger); break;
      case ColumnType::float64: values_->add(v.real); break;
      case ColumnType::boolean: values_->add(static_cast<std::uint8_t>(v.boolean)); break;
      default: values_->add(v.time); break;
    }
  }

  void close(nlohmann::json& meta) {
    if (valid_) valid_->close();
    if (type_ == ColumnType::string && !dictionary_ &&
        static_cast<std::uint64_t>(offset_) != plan_.strings.total_bytes())
      changed(where_, line_);
    values_->close();
    if (bytes_) bytes_->close();
    const TypeGuess& g = plan_.guess;
    meta["type"] = to_string(type_);
    meta["nullable"] = g.present != g.rows;
    meta["null_count"] = g.rows - g.present;
    switch (type_) {
      case ColumnType::int64: return plan_.ints.write(meta);
      case ColumnType::uint64: return plan_.uints.write(meta);
      case ColumnType::float64: return plan_.floats.write(meta);
      case ColumnType::boolean: return plan_.bools.write(meta);
      case ColumnType::timestamp: case ColumnType::naive_timestamp: return plan_.times.write(meta);
      default: break;
    }
    meta["distinct"] = plan_.strings.distinct();
    meta["encoding"] = dictionary_ ? "dictionary" : "plain";
  }

 private:
  ColumnPlan& plan_;
  ColumnType type_;
  const std::string& where_;
  std::optional<detail::BitStream> valid_;
  std::optional<detail::Batched<ArrayStream>> values_;  // values, codes or string offsets
  std::optional<detail::Batched<FileStream>> bytes_;
  bool dictionary_ = false;
  std::size_t code_width_ = 4, line_ = 1;
  std::int64_t offset_ = 0;
};

// Reads the file's records after its header, calling f(fields, line) for
// each record of as many fields as the header, and reporting progress to
// `out` (when given) as `base` + bytes read / 2.
template <class F>
void each_record(const std::filesystem::path& file, const std::vector<std::string>& names, ArtifactWriter* out,
                 std::uint64_t base, F&& f) {
  detail::CsvReader reader(file);
  std::vector<std::string> fields;
  std::size_t line = 0;
  if (!reader.next(fields, line)) changed(reader.where(), 1);
  std::uint64_t reported = 0;
  while (reader.next(fields, line)) {
    if (fields.size() != names.size()) changed(reader.where(), line);
    f(fields, line);
    if (out && reader.bytes_read() != reported) out->report_progress(base + (reported = reader.bytes_read()) / 2);
  }
}

}  // namespace

void import_csv(const std::filesystem::path& file, ArtifactWriter& out) {
  // Pass 1: the header, then types, statistics and dictionaries; every
  // record checked as read_csv checks it.
  detail::CsvReader reader(file);
  const std::string& where = reader.where();
  const std::vector<std::string> names = detail::read_header(reader);
  std::vector<ColumnPlan> plans(names.size());
  std::vector<std::string> fields;
  std::size_t line = 0;
  std::uint64_t reported = 0;
  while (reader.next(fields, line)) {
    detail::check_record(fields, names, where, line);
    for (std::size_t k = 0; k < fields.size(); ++k) plans[k].add(fields[k]);
    if (reader.bytes_read() != reported) out.report_progress((reported = reader.bytes_read()) / 2);
  }
  const std::uint64_t size = reader.bytes_read();
  const std::size_t rows = names.empty() ? 0 : plans[0].guess.rows;

  // Columns that turned to text after typed values: their strings, again.
  std::vector<std::size_t> late;
  for (std::size_t k = 0; k < plans.size(); ++k) {
    plans[k].finish();
    if (plans[k].late) {
      late.push_back(k);
      plans[k].strings = StreamingDictionary();
    }
  }
  if (!late.empty())
    each_record(file, names, nullptr, 0, [&](const std::vector<std::string>& record, std::size_t) {
      for (std::size_t k : late) plans[k].strings.add(record[k]);
    });

  // Pass 2: the column files.
  std::vector<ColumnWriter> writers;
  writers.reserve(plans.size());
  const std::size_t batch = detail::batch_share(3 * plans.size());  // at most three streams a column
  for (std::size_t k = 0; k < plans.size(); ++k) writers.emplace_back(out, k, plans[k], where, batch);
  std::size_t filled = 0;
  each_record(file, names, &out, size / 2, [&](const std::vector<std::string>& record, std::size_t at) {
    if (++filled > rows) changed(where, at);
    for (std::size_t k = 0; k < record.size(); ++k) writers[k].add(record[k], at);
  });
  if (filled != rows) changed(where, line);
  nlohmann::json columns = nlohmann::json::array();
  for (std::size_t k = 0; k < writers.size(); ++k) {
    nlohmann::json meta = {{"name", names[k]}};
    writers[k].close(meta);
    columns.push_back(std::move(meta));
  }
  out.meta()["rows"] = rows;
  out.meta()["columns"] = std::move(columns);
}

}  // namespace amphora
