// Tables: every column type round-trips with its nulls, strings pick the
// smaller of plain and dictionary storage, projection and row ranges read
// only what is asked, and damage is reported by column.

#include "support.hpp"
#include "memory_medium.hpp"

#include <amphora/table.hpp>
#include <catch2/catch.hpp>

#include <limits>
#include <sys/stat.h>

using namespace amphora;

namespace {

Table sample(std::size_t n) {
  std::vector<std::int64_t> ids(n), stamps(n);
  std::vector<double> prices(n);
  std::vector<std::uint8_t> small(n);
  std::vector<bool> flags(n), some(n), none(n, false);
  std::vector<std::string> words(n), unique(n);
  const char* vocabulary[] = {"caf\xc3\xa9", "\xe6\x9d\xb1\xe4\xba\xac", "\xf0\x9f\x9a\x80 launch", "", "a\0b"};
  for (std::size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<std::int64_t>(i) * 1000 - 7;
    stamps[i] = 1'700'000'000'000'000'000 + static_cast<std::int64_t>(i) * 1'000'000;
    prices[i] = i % 7 == 3 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(i) / 4 - 3;
    small[i] = static_cast<std::uint8_t>(i % 251);
    flags[i] = i % 3 == 0;
    some[i] = i % 7 != 2;
    words[i] = i % 5 == 4 ? std::string("a\0b", 3) : vocabulary[i % 5];
    unique[i] = "row-" + std::to_string(i * 7919);
  }
  std::vector<std::uint8_t> flag_bytes(flags.begin(), flags.end());
  return Table::make({
      {"id", Column::of(ids)},
      {"price", Column::of(prices, some)},
      {"small", Column::of(small)},
      {"flag", Column::numbers(Tensor::from_values<bool>({static_cast<std::int64_t>(n)}, flags), some)},
      {"when", Column::timestamps(Tensor::from_values<std::int64_t>({static_cast<std::int64_t>(n)}, stamps))},
      {"word", Column::of(words, some)},
      {"unique", Column::of(unique)},
      {"nothing", Column::of(std::vector<float>(n, 0.f), none)},
  });
}

const nlohmann::json& column_meta(const ArtifactReader& in, const std::string& name) {
  for (const auto& c : in.meta()["columns"])
    if (c["name"] == name) return c;
  throw std::runtime_error("no column " + name);
}

}  // namespace

TEST_CASE("Tables round-trip every column type with their nulls", "[table]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{9}, std::size_t{1000}}) {
    CAPTURE(n);
    const Table t = sample(n);
    auto saved = store.save(t, {.name = "t"});
    for (bool eager : {false, true}) {
      Table back = store.load<Table>(saved.digest, {.eager = eager});
      CHECK(back.equals(t));
      CHECK(back.names() == t.names());
      CHECK(back.column("word").null_count() == t.column("word").null_count());
    }
    CHECK(store.verify(saved.digest.str()).ok());
  }
  // A string with an embedded NUL comes back whole.
  Table back = store.load<Table>("t");
  CHECK(back.column("word").string(4) == std::string_view("a\0b", 3));
  CHECK(back.column("word").string(7) == "\xf0\x9f\x9a\x80 launch");
  CHECK(back.column("word").is_null(2));
}

TEST_CASE("What a null row holds does not change the digest", "[table]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const std::vector<bool> valid = {true, false, true};
  auto a = Table::make({{"n", Column::of(std::vector<std::int32_t>{1, 2, 3}, valid)},
                        {"s", Column::of(std::vector<std::string>{"x", "hidden", "z"}, valid)}});
  auto b = Table::make({{"n", Column::of(std::vector<std::int32_t>{1, 99, 3}, valid)},
                        {"s", Column::of(std::vector<std::string>{"x", "", "z"}, valid)}});
  CHECK(a.equals(b));
  CHECK(store.save(a).digest == store.save(b).digest);
  auto back = store.load<Table>(store.save(a).digest);
  CHECK(back.column("s").string(1).empty());
  CHECK(back.column("n").values().values<std::int32_t>()[1] == 0);
}

TEST_CASE("The schema and statistics of a table are in its metadata", "[table]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const Table t = sample(1000);
  auto in = store.open_artifact(store.save(t).digest);
  CHECK(in.meta<std::size_t>("rows") == 1000);
  const auto& id = column_meta(in, "id");
  CHECK(id["type"] == "int64");
  CHECK(id["nullable"] == false);
  CHECK(id["min"] == -7);
  CHECK(id["max"] == 999 * 1000 - 7);
  const auto& price = column_meta(in, "price");
  CHECK(price["null_count"] == 143);
  CHECK(price["min"] == -3.0);  // NaN skipped
  CHECK(column_meta(in, "when")["type"] == "timestamp[ns]");
  const auto& word = column_meta(in, "word");
  CHECK(word["encoding"] == "dictionary");  // five words over 1000 rows
  CHECK(word["distinct"] == 5);
  CHECK(column_meta(in, "unique")["encoding"] == "plain");
  CHECK(column_meta(in, "unique")["distinct"] == 1000);
  CHECK(column_meta(in, "nothing")["null_count"] == 1000);
  CHECK(column_meta(in, "nothing")["min"].is_null());
  // Dictionary codes are squeezed to one byte each.
  CHECK(in.meta()["encodings"]["columns/5.codes.npy"]["stored_dtype"] == "uint8");
}

TEST_CASE("load_table reads only the columns and rows asked for", "[table]") {
  test::TempDir dir;
  Store local = test::make_store(dir / "store");
  // A medium that copies what it maps, as a remote's does: rows are read as ranges.
  Store copying = Store::open({.create = true, .medium = testing::make_memory_medium()});
  const Table t = sample(1000);
  for (Store* where : {&local, &copying}) {
  Store& store = *where;
  auto in = store.open_artifact(store.save(t).digest);
  for (const auto& [b, e] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {7, 9}, {500, 1000}, {999, 1000}})
    CHECK(load_table(in, {.rows = std::pair{b, e}}).equals(t.slice(b, e)));
  const std::vector<std::string> cols = {"word", "id", "flag"};
  Table part = load_table(in, {.columns = cols, .rows = std::pair<std::size_t, std::size_t>{123, 456}});
  CHECK(part.names() == cols);
  CHECK(part.rows() == 333);
  CHECK(part.equals(t.select(cols).slice(123, 456)));
  CHECK(load_table(in, {.rows = std::pair<std::size_t, std::size_t>{1000, 1000}}).rows() == 0);
  // A dictionary of 300 words: a range using a few reads those alone, one
  // using more than 64 the whole dictionary.
  std::vector<std::string> many(1000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = "word-" + std::to_string(i * 7 % 300);
  const Table dictionary = Table::make({{"many", Column::of(many)}});
  auto din = store.open_artifact(store.save(dictionary).digest);
  REQUIRE(din.meta()["columns"][0]["encoding"] == "dictionary");
  for (const auto& [b, e] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {290, 310}, {100, 1000}, {0, 1000}})
    CHECK(load_table(din, {.rows = std::pair{b, e}}).equals(dictionary.slice(b, e)));
  CHECK(load_table(in, {.columns = {"unique"}}).column(0).string(999) == t.column("unique").string(999));
  CHECK_THROWS_AS(load_table(in, {.columns = {"nope"}}), NotFound);
  CHECK_THROWS_WITH(load_table(in, {.rows = std::pair<std::size_t, std::size_t>{10, 1001}}),
                    Catch::Contains("rows [10, 1001) are outside [0, 1000)"));
  }
}

TEST_CASE("Tables and columns refuse what they cannot hold", "[table][bad-input]") {
  auto ints = Column::of(std::vector<std::int32_t>{1, 2, 3});
  CHECK_THROWS_WITH(Table::make({{"a", ints}, {"a", ints}}), Catch::Contains("two columns are named 'a'"));
  CHECK_THROWS_WITH(Table::make({{"", ints}}), Catch::Contains("empty name"));
  CHECK_THROWS_WITH(Table::make({{"a", ints}, {"b", Column::of(std::vector<double>{1})}}),
                    Catch::Contains("column 'b' has 1 rows, column 'a' 3"));
  CHECK_THROWS_WITH(Column::numbers(Tensor::zeros(DType::complex64, {2})), Catch::Contains("cannot hold complex64"));
  CHECK_THROWS_WITH(Column::numbers(Tensor::zeros(DType::int32, {2, 2})), Catch::Contains("1-d tensor"));
  CHECK_THROWS_WITH(Column::of(std::vector<std::string>{"ok", "\xff"}), Catch::Contains("row 1 is not valid UTF-8"));
  CHECK_THROWS_WITH(Column::of(std::vector<int>{1, 2}, {true}), Catch::Contains("1 entries for 2 rows"));
  CHECK_THROWS_WITH(Column::timestamps(Tensor::zeros(DType::int32, {1})), Catch::Contains("int64 nanoseconds"));
  CHECK_THROWS_WITH(sample(3).column("id").string(0), Catch::Contains("string(row) of a int64 column"));
  CHECK_THROWS_WITH(sample(3).column("missing"), Catch::Contains("no column 'missing' (columns: id, price"));
  const Table t = sample(3);
  CHECK(&t.column(std::size_t{1}) == &t.column("price"));
  CHECK_THROWS_AS(t.column(t.num_columns()), InvalidArgument);  // an amphora::Error, not std::out_of_range
  CHECK_THROWS_WITH(t.column(std::size_t{99}), Catch::Contains("column index 99 is out of range (" +
                                                              std::to_string(t.num_columns()) + " columns)"));
  CHECK_THROWS_AS(parse_column_type("decimal"), InvalidArgument);
}

TEST_CASE("A default-constructed column is an empty int64 column", "[table]") {
  const Column c;
  CHECK(c.type() == ColumnType::int64);
  CHECK(c.size() == 0);
  CHECK_FALSE(c.nullable());
  CHECK(c.values().dtype() == DType::int64);
  CHECK(c.values().shape() == std::vector<std::int64_t>{0});
  CHECK(c.equals(Column::of(std::vector<std::int64_t>{})));
  CHECK(c.slice(0, 0).equals(c));
  std::vector<Column> sized(3);  // as a container sized ahead makes them
  CHECK(Table::make({{"a", sized[0]}, {"b", sized[1]}}).rows() == 0);
}

TEST_CASE("A damaged table names the column", "[table][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(sample(50));
  const auto obj = test::object_dir(dir / "store", saved.digest);
  test::fs::permissions(obj / "columns", test::fs::perms::owner_all, test::fs::perm_options::add);
  SECTION("a dictionary code past the dictionary") {
    const auto codes = obj / "columns" / "5.codes.npy";
    test::fs::permissions(codes, test::fs::perms::owner_write, test::fs::perm_options::add);
    test::flip_byte(codes, test::fs::file_size(codes) - 1);
    CHECK_THROWS_WITH(store.load<Table>(saved.digest), Catch::Contains("column 'word'") && Catch::Contains("dictionary holds 5"));
    CHECK_FALSE(store.verify(saved.digest.str()).ok());
  }
  SECTION("a missing column file") {
    test::fs::remove(obj / "columns" / "0.npy");
    CHECK_THROWS_AS(store.load<Table>(saved.digest), CorruptData);
    // Other columns still load on their own.
    CHECK(load_table(store.open_artifact(saved.digest), {.columns = {"word"}}).rows() == 50);
  }
}

TEST_CASE("CSV import reads only regular files, and refuses a FIFO at once", "[table][csv][bad-input]") {
  test::TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo.csv").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_csv(dir / "fifo.csv"), Catch::Contains("is not a regular file (a FIFO)"));
  test::fs::create_directory(dir / "d.csv");
  CHECK_THROWS_AS(read_csv(dir / "d.csv"), InvalidArgument);
  CHECK_THROWS_AS(read_csv(dir / "absent.csv"), NotFound);
}

TEST_CASE("CSV files parse by RFC 4180 and columns get their types", "[table][csv]") {
  test::TempDir dir;
  const auto file = dir / "in.csv";
  test::write_text(file, "\xEF\xBB\xBFid,price,ok,name,empty\r\n"
                         "1,1.5,true,\"a,b\",\r\n"
                         "\r\n"
                         "-2,,FALSE,\"say \"\"hi\"\"\",\n"
                         "+3,nan,True,\"two\nlines\",\n"
                         "4,-inf,false,plain,");
  Table t = read_csv(file);
  CHECK(t.names() == std::vector<std::string>{"id", "price", "ok", "name", "empty"});
  CHECK(t.rows() == 4);
  CHECK(t.column("id").type() == ColumnType::int64);
  CHECK(t.column("id").values().values<std::int64_t>()[2] == 3);
  CHECK(t.column("price").type() == ColumnType::float64);
  CHECK(t.column("price").is_null(1));
  CHECK(std::isnan(t.column("price").values().values<double>()[2]));
  CHECK(t.column("ok").type() == ColumnType::boolean);
  CHECK(t.column("name").string(0) == "a,b");
  CHECK(t.column("name").string(1) == "say \"hi\"");
  CHECK(t.column("name").string(2) == "two\nlines");
  CHECK(t.column("empty").type() == ColumnType::string);
  CHECK(t.column("empty").null_count() == 4);

  // Written back and read again: the same table.
  write_csv(t, dir / "out.csv");
  CHECK(read_csv(dir / "out.csv").equals(t));
  // Floats keep a decimal point, so they do not read back as integers.
  write_csv(Table::make({{"x", Column::of(std::vector<double>{1, 2.5})}}), dir / "f.csv");
  CHECK(test::read_text(dir / "f.csv") == "x\n1.0\n2.5\n");
  CHECK(read_csv(dir / "f.csv").column("x").type() == ColumnType::float64);
  // A name that starts with a byte order mark keeps it (fuzz_csv found this).
  auto bom = Table::make({{"\xEF\xBB\xBF" "a", Column::of(std::vector<std::int64_t>{1})}});
  write_csv(bom, dir / "bom.csv");
  CHECK(read_csv(dir / "bom.csv").names() == bom.names());
}

TEST_CASE("ISO 8601 timestamps in CSV become timestamp columns and round-trip", "[table][csv]") {
  test::TempDir dir;
  test::write_text(dir / "t.csv", "when,day,local\n"
                                  "2023-11-14 22:13:20.000000123,2000-02-29,2023-01-01T00:00:00+01:00\n"
                                  "1969-12-31T23:59:59.5Z,1970-01-01,2023-01-01T00:00:00+01:00\n"
                                  ",2024-12-31,2023-01-01T00:00:00+01:00\n");
  Table t = read_csv(dir / "t.csv");
  REQUIRE(t.column("when").type() == ColumnType::timestamp);
  auto when = t.column("when").values().values<std::int64_t>();
  CHECK(when[0] == 1'700'000'000'000'000'123);
  CHECK(when[1] == -500'000'000);
  CHECK(t.column("when").is_null(2));
  // No field of `day` names a zone: naive date-times, which stay naive.
  CHECK(t.column("day").type() == ColumnType::naive_timestamp);
  CHECK(t.column("day").values().values<std::int64_t>()[0] == 951'782'400'000'000'000);
  CHECK(t.column("local").type() == ColumnType::string);  // offsets other than UTC stay text
  write_csv(t, dir / "out.csv");
  CHECK(read_csv(dir / "out.csv").equals(t));
  const std::string written = test::read_text(dir / "out.csv");
  CHECK(written.find("2023-11-14T22:13:20.000000123Z,2000-02-29T00:00:00.000000000,") != std::string::npos);
  // Saved and loaded, the column keeps its kind.
  Store store = test::make_store(dir / "store");
  const Table back = store.load<Table>(store.save(t).digest);
  CHECK(back.column("day").type() == ColumnType::naive_timestamp);
  CHECK(back.equals(t));
  CHECK(store.open_artifact(store.import_file(dir / "t.csv").digest).meta()["columns"][1]["type"] == "naive_timestamp[ns]");
  test::write_text(dir / "bad.csv", "d\n2023-02-29\n");
  CHECK(read_csv(dir / "bad.csv").column("d").type() == ColumnType::string);  // no such day
}

TEST_CASE("Bad CSV is refused with the line that is wrong", "[table][csv][bad-input]") {
  test::TempDir dir;
  auto fails = [&](const std::string& text, const std::string& message) {
    test::write_text(dir / "bad.csv", text);
    CHECK_THROWS_AS(read_csv(dir / "bad.csv"), InvalidArgument);
    CHECK_THROWS_WITH(read_csv(dir / "bad.csv"), Catch::Contains("bad.csv") && Catch::Contains(message));
  };
  fails("a,b\n1,2\n3\n", "line 3 has 1 fields, the header has 2");
  fails("a,b\n1,2\n\n\n3,4,5\n", "line 5 has 3 fields");
  fails("a,b\n1,\"x\xff\"\n", "line 2, column 'b': not valid UTF-8");
  fails("a,b\n1,\"open\n2,3\n", "line 2: a quoted field is not closed");
  fails("a\n\"x\"y\n", "line 2: unexpected character after a closing quote");
  fails("a\nx\"y\n", "line 2: a quote inside an unquoted field");
  fails("", "is empty");
  fails("a,a\n1,2\n", "two columns are named 'a'");
  CHECK_THROWS_AS(read_csv(dir / "absent.csv"), NotFound);
}

namespace {

// Writes merged strings from bytes and offsets given by the test.
struct LaidOut {
  std::string bytes;
  std::vector<std::int64_t> offsets;
};

}  // namespace

template <>
struct amphora::materializer<LaidOut> {
  static constexpr std::string_view name = "test.laid_out";
  static constexpr int version = 1;
  static void save(const LaidOut& v, ArtifactWriter& out) {
    out.write_strings("s", std::as_bytes(std::span<const char>(v.bytes)), v.offsets);
  }
  static LaidOut load(const ArtifactReader& in) {
    auto s = in.read_strings("s");
    LaidOut v;
    for (std::size_t i = 0; i < s.size(); ++i) v.bytes += s[i], v.offsets.push_back(static_cast<std::int64_t>(i));
    return v;
  }
};

TEST_CASE("Strings laid out in bytes and offsets are written rebased, bad offsets refused", "[table][toolkit]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto in = store.open_artifact(store.save(LaidOut{"xxabcdeyy", {2, 4, 4, 7}}).digest);
  CHECK(in.read_strings("s").to_vector() == std::vector<std::string>{"ab", "", "cde"});
  CHECK(in.file_size("s.bytes") == 5);
  CHECK_THROWS_WITH(store.save(LaidOut{"abc", {0, 2, 1}}), Catch::Contains("offset 2 (1) is below offset 1 (2)"));
  CHECK_THROWS_WITH(store.save(LaidOut{"abc", {0, 4}}), Catch::Contains("lie outside the 3 bytes given"));
  CHECK_THROWS_WITH(store.save(LaidOut{"abc", {}}), Catch::Contains("no offsets"));
  // A slice of a loaded table saves and loads back as the slice.
  const Table t = sample(300);
  const Table loaded = store.load<Table>(store.save(t).digest);
  CHECK(store.load<Table>(store.save(loaded.slice(100, 250)).digest).equals(t.slice(100, 250)));
}
