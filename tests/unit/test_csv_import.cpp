// Importing a CSV file by streaming it (Store::import_file, `amphora import`)
// stores exactly what read_csv plus save stores, whatever the content and
// wherever the file's blocks end; bad files are refused as read_csv refuses
// them, and a file that changes between the two passes is caught.

#include "support.hpp"

#include <amphora/table.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sys/stat.h>

using namespace amphora;

namespace {

// Imports `text` both ways and checks they agree on every byte (the digest)
// and on the values.
Digest same_both_ways(Store& store, const test::TempDir& dir, const std::string& text) {
  const auto file = dir / "t.csv";
  test::write_text(file, text);
  const Table whole = read_csv(file);
  const SaveResult streamed = store.import_file(file);
  const SaveResult saved = store.save(whole);
  CHECK(streamed.digest == saved.digest);
  CHECK(store.load<Table>(streamed.digest).equals(whole));
  return streamed.digest;
}

Table read_csv_text(const test::TempDir& dir, const std::string& text) {
  test::write_text(dir / "one.csv", text);
  return read_csv(dir / "one.csv");
}

// The block the CSV reader reads at a time.
constexpr std::size_t kBlock = std::size_t{4} << 20;

}  // namespace

TEST_CASE("A streamed CSV import stores what read_csv and save store", "[table][csv][import]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  SECTION("every type, nulls, quoting and line ends") {
    same_both_ways(store, dir,
                   "\xEF\xBB\xBFid,price,ok,name,when,empty,\r\n"
                   "1,2.5,true,\"a, \"\"quoted\"\"\nname\",2023-11-14T22:13:20Z,,x\r\n"
                   "\n"
                   "-7,nan,False,caf\xc3\xa9,2023-11-14,,\r\n"
                   "9223372036854775807,-inf,,\xe6\x9d\xb1\xe4\xba\xac,,,y\n"
                   ",1e300,TRUE,\"lone\rcr\",2023-11-14 01:02:03.5,,\n");
  }
  SECTION("a header and no rows") { same_both_ways(store, dir, "a,b\n"); }
  SECTION("more column files than a process keeps open for staging at once") {
    // 700 columns of three kinds: over 1,000 files written in turns, far past
    // the 256 staged descriptors a process keeps open; each is reopened as its
    // turn comes.
    std::string text;
    for (int k = 0; k < 700; ++k) text += (k ? ",c" : "c") + std::to_string(k);
    text += '\n';
    for (int row = 0; row < 300; ++row) {
      for (int k = 0; k < 700; ++k) {
        if (k) text += ',';
        if (k % 3 == 0) text += std::to_string(row * 700 + k);
        if (k % 3 == 1) text += "w" + std::to_string((row + k) % 5);
        if (k % 3 == 2 && row % 4 != 0) text += "text " + std::to_string(row * k);
      }
      text += '\n';
    }
    same_both_ways(store, dir, text);
  }
  SECTION("a last record without a line end, and a trailing empty field") {
    same_both_ways(store, dir, "a,b\n1,x\n2,");
  }
  SECTION("a column that turns to text after numbers, and one after empty fields") {
    std::string text = "late,after_nulls,number\n";
    for (int i = 0; i < 1000; ++i)
      text += (i < 900 ? std::to_string(i) : "w" + std::to_string(i % 7)) + "," + (i < 500 ? "" : "v" + std::to_string(i % 3)) +
              "," + std::to_string(i * 0.25) + "\n";
    const Digest d = same_both_ways(store, dir, text);
    const auto in = store.open_artifact(d);
    CHECK(in.meta()["columns"][0]["type"] == "string");
    CHECK(in.meta()["columns"][0]["distinct"] == 907);
    CHECK(in.meta()["columns"][1]["encoding"] == "dictionary");
    CHECK(in.meta()["columns"][1]["distinct"] == 4);  // "" counts, as in a saved table
  }
  SECTION("numbers and dates are typed only where every value fits exactly") {
    const Digest d = same_both_ways(
        store, dir,
        "big,huge,mixed,exact,late,early,edge,nanp,uint\n"
        "9223372036854775808,12345678901234567890123,1.5,9007199254740993,2300-01-01,1600-01-01,"
        "2262-04-11T23:47:16.854775807Z,nan(abc),+5\n"
        "9223372036854775809,1,9223372036854775808,1,2000-01-01,2000-01-01,1677-09-21T00:12:43.145224192Z,1.0,"
        "18446744073709551615\n"
        ",2,9007199254740992,2,9999-12-31,,,nan,\n");
    const Table t = store.load<Table>(d);
    std::vector<std::string_view> types;
    for (std::size_t k = 0; k < t.num_columns(); ++k) types.push_back(to_string(t.column(k).type()));
    // Integers past int64 but within uint64 are uint64, as pandas reads
    // them; past uint64, or past 2^53 beside fractions, they stay text
    // rather than round; dates outside int64 nanoseconds stay text rather
    // than wrap; "nan(abc)" is text.
    CHECK(types == std::vector<std::string_view>{"uint64", "string", "string", "int64", "string", "string", "timestamp[ns]",
                                             "string", "uint64"});
    const auto big = t.column(0).values().values<std::uint64_t>();
    CHECK(big[0] == 9223372036854775808ull);
    CHECK(big[1] == 9223372036854775809ull);
    CHECK(t.column(0).is_null(2));
    CHECK(t.column(1).string(0) == "12345678901234567890123");
    CHECK(t.column(2).string(1) == "9223372036854775808");
    CHECK(t.column(3).values().values<std::int64_t>()[0] == 9007199254740993);
    CHECK(t.column(4).string(0) == "2300-01-01");
    CHECK(t.column(5).string(0) == "1600-01-01");
    const auto edge = t.column(6).values().values<std::int64_t>();
    CHECK(edge[0] == std::numeric_limits<std::int64_t>::max());
    CHECK(edge[1] == std::numeric_limits<std::int64_t>::min());
    CHECK(t.column(7).string(0) == "nan(abc)");
    const auto uints = t.column(8).values().values<std::uint64_t>();
    CHECK(uints[0] == 5);
    CHECK(uints[1] == std::numeric_limits<std::uint64_t>::max());
    // One nanosecond past either end is text too.
    CHECK(to_string(read_csv_text(dir, "t\n2262-04-11T23:47:16.854775808Z\n").column(0).type()) == "string");
    CHECK(to_string(read_csv_text(dir, "t\n1677-09-21T00:12:43.145224191Z\n").column(0).type()) == "string");
    CHECK(to_string(read_csv_text(dir, "t\n9999-12-31T23:59:59Z\n").column(0).type()) == "string");
    CHECK(to_string(read_csv_text(dir, "x\n1.5\n9007199254740992\n-9007199254740992\n").column(0).type()) == "float64");
    CHECK(to_string(read_csv_text(dir, "x\n1.5\n-9007199254740993\n").column(0).type()) == "string");
    CHECK(to_string(read_csv_text(dir, "x\n-1\n9223372036854775808\n").column(0).type()) == "string");
  }
  SECTION("repeated words take the dictionary form, unique ones the plain form") {
    std::string text = "word,unique\n";
    for (int i = 0; i < 5000; ++i) text += "word" + std::to_string(i * i % 37) + ",u" + std::to_string(i) + "\n";
    const Digest d = same_both_ways(store, dir, text);
    const auto in = store.open_artifact(d);
    CHECK(in.meta()["columns"][0]["encoding"] == "dictionary");
    CHECK(in.meta()["columns"][0]["distinct"] == 19);  // the squares modulo 37
    CHECK(in.meta()["columns"][1]["encoding"] == "plain");
    CHECK(in.meta()["columns"][1]["distinct"] == 5000);
  }
}

TEST_CASE("Past the dictionary limits a string column is plain and its distinct count estimated",
          "[table][csv][import]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // Repeated often enough that a dictionary would be smaller, but with more
  // distinct words than the limit allows.
  const std::size_t distinct = kMaxDictionaryWords + 1000;
  std::string text = "w,n\n";
  for (std::size_t i = 0; i < 2 * distinct; ++i) text += "word-" + std::to_string(i % distinct) + "," + std::to_string(i) + "\n";
  const Digest d = same_both_ways(store, dir, text);
  const auto column = store.open_artifact(d).meta()["columns"][0];
  CHECK(column["encoding"] == "plain");
  const double estimate = column["distinct"].get<double>();
  CHECK(std::abs(estimate - static_cast<double>(distinct)) < 0.03 * static_cast<double>(distinct));
}

TEST_CASE("Records that straddle the reader's blocks are read whole", "[table][csv][import]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // The record under test starts at `start`; the block ends `cut` bytes
  // into it, at each place where the parser must wait for more.
  const std::string record = "\"multi\r\nline \"\" quoted\",\"\",plain\r\n";
  const std::string header = "a,b,c\n";
  for (std::size_t cut = 0; cut <= record.size(); ++cut) {
    INFO("block ends " << cut << " bytes into the record");
    std::string text = header;
    const std::size_t start = kBlock - cut;
    const std::string filler_row_end = ",f,f\n";
    while (text.size() + 100 < start) text += "fill,f,f\n";
    text += std::string(start - text.size() - filler_row_end.size(), 'x') + filler_row_end;
    REQUIRE(text.size() == start);
    text += record + "last,l,l\n";
    test::write_text(dir / "t.csv", text);
    const Table t = read_csv(dir / "t.csv");
    const std::size_t rows = t.rows();
    REQUIRE(rows >= 3);
    CHECK(t.column("a").string(rows - 2) == "multi\r\nline \" quoted");
    CHECK(t.column("b").is_null(rows - 2));
    CHECK(t.column("c").string(rows - 2) == "plain");
    CHECK(t.column("a").string(rows - 1) == "last");
    if (cut % 8 == 0) CHECK(store.import_file(dir / "t.csv").digest == store.save(t).digest);
  }
}

TEST_CASE("A CSV file of more columns than an import takes is refused from its header", "[table][csv][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  test::write_text(dir / "wide.csv", std::string(16384, ',') + "\n");
  const std::string why = "line 1: the header has 16385 columns; a CSV file imports with at most 16384";
  CHECK_THROWS_WITH(store.import_file(dir / "wide.csv"), Catch::Contains("wide.csv") && Catch::Contains(why));
  CHECK_THROWS_WITH(read_csv(dir / "wide.csv"), Catch::Contains(why));
  test::write_text(dir / "widest.csv", std::string(16383, ',') + "\n");
  CHECK(read_csv(dir / "widest.csv").num_columns() == 16384);
}

TEST_CASE("A streamed CSV import refuses bad files as read_csv does and stores nothing", "[table][csv][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto fails = [&](const std::string& text, const std::string& message) {
    test::write_text(dir / "bad.csv", text);
    CHECK_THROWS_WITH(store.import_file(dir / "bad.csv"), Catch::Contains("bad.csv") && Catch::Contains(message));
  };
  fails("a,b\n1,2\n3\n", "line 3 has 1 fields, the header has 2");
  fails("a,b\n1,\"x\xff\"\n", "line 2, column 'b': not valid UTF-8");
  fails("a,b\n1,\"open\n2,3\n", "line 2: a quoted field is not closed");
  fails("", "is empty");
  fails("a,a\n1,2\n", "two columns are named 'a'");
  // Old Mac line ends: pandas would split records at each CR; imported as
  // RFC 4180 reads them they made one header of names holding CRs.
  const std::string lone_cr = "a carriage return without a line feed outside quotes";
  fails("a,b\r1,2\r3,4\r", "line 1: " + lone_cr);
  fails("a,b\n1,x\ry\n", "line 2: " + lone_cr);
  fails("a,b\n1,2\r", "line 2: " + lone_cr);
  CHECK(store.artifacts().empty());
  CHECK_THROWS_AS(store.import_file(dir / "absent.csv"), NotFound);
  test::write_text(dir / "t.unknown", "x");
  CHECK_THROWS_WITH(store.import_file(dir / "t.unknown"), Catch::Contains("no materializer handles '.unknown' files"));
}

TEST_CASE("A CSV file that changes between the import's passes is refused", "[table][csv][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const auto file = dir / "t.csv";
  auto import_while_changing = [&](const std::string& before, const std::string& after) {
    const test::ChangedImport seen = test::import_while_changing(store, file, before, after);
    CHECK(seen.rewritten);
    CHECK_THAT(seen.error, Catch::Contains("t.csv") && Catch::Contains("the file changed"));
  };
  import_while_changing("n,w\n1,a\n2,b\n", "n,w\n1,a\n2,b\n3,c\n");   // a row more
  import_while_changing("n,w\n1,a\n2,b\n", "n,w\n1,a\n");             // a row less
  import_while_changing("n,w\n1,a\n2,b\n", "n,w\n1,a\nx,b\n");        // not a number now
  std::string words = "w\n";
  for (int i = 0; i < 300; ++i) words += i % 2 ? "b\n" : "a\n";
  import_while_changing(words, words.substr(0, words.size() - 2) + "c\n");  // a word the dictionary lacks
  import_while_changing("n,w\n1,aaaaaaaaaaaaaaaaaaaaaaaa\n2,bbbbbbbbbbbbbbbbbbbbbbb\n",
                        "n,w\n1,aaaaaaaaaaaaaaaaaaaaaaaa\n2,bbbbbbbbbbbbbbbbbbbbbbbbbb\n");  // longer text
  CHECK(store.artifacts().empty());
}

TEST_CASE("Streamed imports open only regular files and bound a record's length", "[table][csv][records][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (const char* ext : {".csv", ".jsonl"}) {
    INFO(ext);
    const std::string fifo = std::string("fifo") + ext, link = std::string("link") + ext, sub = std::string("d") + ext;
    // A FIFO is refused at once, not waited on, also behind a link; so is a directory.
    REQUIRE(::mkfifo((dir / fifo).c_str(), 0600) == 0);
    CHECK_THROWS_WITH(store.import_file(dir / fifo), Catch::Contains("is not a regular file (a FIFO)"));
    test::fs::create_symlink(dir / fifo, dir / link);
    CHECK_THROWS_WITH(store.import_file(dir / link), Catch::Contains("is not a regular file (a FIFO)"));
    test::fs::create_directory(dir / sub);
    CHECK_THROWS_AS(store.import_file(dir / sub), InvalidArgument);
  }
  // A record longer than 256 MiB (a sparse file of zeros after the header)
  // is refused, read in blocks that grow with it rather than held whole twice.
  const auto big = dir / "big.csv";
  test::write_text(big, "a\n");
  test::fs::resize_file(big, (std::uint64_t{256} << 20) + (std::uint64_t{9} << 20));
  CHECK_THROWS_WITH(store.import_file(big), Catch::Contains("big.csv: line 2: a record is longer than 256 MiB"));
  CHECK_THROWS_WITH(read_csv(big), Catch::Contains("a record is longer than 256 MiB"));
  CHECK(store.artifacts().empty());
}
