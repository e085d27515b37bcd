// Damaged, hostile and absurd input: each must end in a clear exception,
// never a crash, an out-of-bounds read or a huge allocation.

#include "support.hpp"
#include "zstd_frames.hpp"  // and lz4_frames.hpp: frames cut by hand

#include <amphora/npy.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fcntl.h>
#include <limits>
#include <map>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <zstd.h>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

/// Writes an artifact by hand (manifest bytes as given) and returns its digest.
Digest plant(const fs::path& store, const std::string& manifest, const std::map<std::string, std::string>& files) {
  Digest d(Sha256::of(manifest));
  auto dir = test::object_dir(store, d);
  fs::create_directories(dir);
  test::write_text(dir / "manifest.json", manifest);
  for (const auto& [path, bytes] : files) {
    fs::create_directories((dir / path).parent_path());
    test::write_text(dir / path, bytes);
  }
  return d;
}

std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  std::size_t len = header.size();
  for (std::size_t k = 0; k < prefix - 8; ++k) out += static_cast<char>((len >> (8 * k)) & 0xff);
  return out + header + data;
}

/// A tensor manifest for `meta` listing each file with its true size and digest.
std::string tensor_manifest(const nlohmann::json& meta, const std::map<std::string, std::string>& files) {
  Manifest m;
  m.materializer = "amphora.tensor";
  m.materializer_version = 1;
  for (const auto& [file, bytes] : files)
    m.files.push_back({file, bytes.size(), Manifest::piece_size_for(bytes.size()), {Sha256::of(bytes)}});
  m.meta = meta;
  return m.canonical();
}

std::string tensor_manifest(const nlohmann::json& meta, const std::string& file, const std::string& bytes) {
  return tensor_manifest(meta, {{file, bytes}});
}

/// Plants a tensor artifact whose manifest lists `files` as they are.
Digest plant_tensor(const fs::path& store, const nlohmann::json& meta, const std::map<std::string, std::string>& files) {
  return plant(store, tensor_manifest(meta, files), files);
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>(v >> (8 * b));
  return out;
}

/// A one-block LZ4 frame storing 4096 bytes uncompressed. Its 15-byte header
/// is the one docs/FORMAT.md spells out for content size 4096.
std::string stored_frame_4096(const std::string& content) {
  REQUIRE(content.size() == 4096);
  std::string frame("\x04\x22\x4d\x18\x68\x60\x00\x10\x00\x00\x00\x00\x00\x00\xf9", 15);
  frame += std::string("\x00\x10\x00\x80", 4);  // stored block of 4096 bytes
  return frame + content + std::string(4, '\0');
}

/// A chunk index file for the given [packed, raw] rows.
std::string chunk_index(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& rows) {
  std::vector<std::int64_t> shape = {static_cast<std::int64_t>(rows.size()), 2};
  std::string out = make_npy_header(DType::uint64, shape, 64);
  for (auto [packed, raw] : rows) out += le64(packed) + le64(raw);
  return out;
}

/// Matches an exception whose message contains every one of `parts`.
class MessageHas : public Catch::MatcherBase<std::exception> {
 public:
  MessageHas(std::initializer_list<std::string> parts) : parts_(parts) {}
  bool match(const std::exception& e) const override {
    std::string what = e.what();
    for (const auto& p : parts_)
      if (what.find(p) == std::string::npos) return false;
    return true;
  }
  std::string describe() const override {
    std::string out = "has a message containing";
    for (const auto& p : parts_) out += " \"" + p + "\"";
    return out;
  }

 private:
  std::vector<std::string> parts_;
};

}  // namespace

TEST_CASE("Malformed .npy files are rejected with the reason", "[bad][npy]") {
  test::TempDir dir;
  auto load = [&](const std::string& bytes) {
    test::write_text(dir / "in.npy", bytes);
    return read_npy(dir / "in.npy");
  };
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  REQUIRE(load(npy_bytes(f4, std::string(16, '\0'))).num_elements() == 4);

  CHECK_THROWS_WITH(load(npy_bytes(f4, std::string(10, '\0'))),
                    Catch::Contains("in.npy") && Catch::Contains("claims 16 bytes of data") && Catch::Contains("only 10"));
  CHECK_THROWS_WITH(load(npy_bytes(f4, std::string(20, '\0'))), Catch::Contains("4 unexpected bytes"));
  CHECK_THROWS_WITH(load("not numpy at all"), Catch::Contains("magic"));
  CHECK_THROWS_AS(load(npy_bytes(f4, "").substr(0, 30)), CorruptData);  // header cut short
  CHECK_THROWS_AS(load(npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", std::string(8, 'a'))),
                  Unsupported);
  CHECK_THROWS_WITH(load(npy_bytes("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", "")),
                    Catch::Contains("structured"));
  CHECK_THROWS_WITH(load(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", "")),
                    Catch::Contains("overflows"));
  CHECK_THROWS_AS(load(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", "")), CorruptData);
  CHECK_THROWS_AS(load(npy_bytes("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1,), }", "")), CorruptData);
  CHECK_THROWS_AS(load(npy_bytes("{'descr': '<f8', 'shape': (1,), }", "")), CorruptData);
  CHECK_THROWS_AS(load(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)", "")), CorruptData);
  std::string v9 = npy_bytes(f4, std::string(16, '\0'));
  v9[6] = 9;
  CHECK_THROWS_WITH(load(v9), Catch::Contains("version 9.0"));
  std::string huge_header = npy_bytes(f4, std::string(16, '\0'), 2);
  huge_header[8] = '\xff', huge_header[9] = '\xff', huge_header[10] = '\xff', huge_header[11] = '\x7f';
  CHECK_THROWS_WITH(load(huge_header), Catch::Contains("header claims"));
  // Version 2 and 3 headers, big-endian and Fortran data convert correctly.
  CHECK(load(npy_bytes(f4, std::string(16, '\0'), 3)).num_elements() == 4);
  std::string be = npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                             std::string("\x00\x00\x00\x01\x00\x00\x01\x00", 8));
  CHECK(load(be).values<std::int32_t>()[1] == 256);
  std::string fortran = npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", "\x01\x04\x02\x05\x03\x06");
  Tensor fortran_tensor = load(fortran);
  auto ft = fortran_tensor.values<std::uint8_t>();
  CHECK(std::vector<std::uint8_t>(ft.begin(), ft.end()) == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE(".npy headers NumPy refuses are refused, naming the file", "[bad][npy]") {
  test::TempDir dir;
  auto load = [&](const std::string& bytes) {
    test::write_text(dir / "in.npy", bytes);
    return read_npy(dir / "in.npy");
  };
  auto u1 = [](const std::string& shape) { return "{'descr': '|u1', 'fortran_order': False, 'shape': " + shape + ", }"; };
  auto refused = [&](const std::string& dict, const std::string& reason, int major = 1) {
    INFO(dict << " (version " << major << ".0)");
    CHECK_THROWS_MATCHES(load(npy_bytes(dict, "abc", major)), CorruptData,
                         MessageHas({"in.npy", "invalid .npy header", reason}));
  };

  // Non-zero dimensions whose product overflows, made empty by a zero.
  CHECK_THROWS_MATCHES(load(npy_bytes(u1("(9223372036854775807, 9223372036854775807, 0)"), "")), CorruptData,
                       MessageHas({"in.npy", "overflows", "non-zero dimensions"}));
  refused(u1("(3)"), "(3) is an integer in parentheses, not a tuple: a one-element tuple needs a trailing comma");
  refused(u1("( 3 )"), "a one-element tuple needs a trailing comma");
  refused(u1("(03,)"), "shape dimension '03' has a leading zero");
  refused(u1("(3, 007)"), "shape dimension '007' has a leading zero");
  refused(u1("(,)"), "shape holds something other than a non-negative integer");
  refused(u1("(3,,)"), "shape holds something other than a non-negative integer");
  refused(u1("(, 3)"), "shape holds something other than a non-negative integer");
  refused(u1("(3x,)"), "shape holds something other than a non-negative integer");
  refused(u1("(3.0,)"), "shape holds something other than a non-negative integer");
  refused(u1("(3 4)"), "expected ',' or ')' in the shape");
  refused(u1("[3]"), "shape is not a tuple");
  refused(u1("3"), "shape is not a tuple");
  refused(u1("(99999999999999999999,)"), "does not fit in 64 bits");
  refused("{}", "the dictionary lacks 'descr', 'fortran_order', 'shape'");
  refused("{'descr': '|u1', 'shape': (3,)}", "the dictionary lacks 'fortran_order'");
  refused("{,}", "expected a string");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (3,),, }", "expected a string");
  refused("{'descr': '|u1' 'fortran_order': False, 'shape': (3,)}", "expected ',' or '}'");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), 'extra': 1}", "unexpected key 'extra'");
  refused("{'descr': '<f8', 'descr': '|u1', 'fortran_order': False, 'shape': (3,)}",
          "key 'descr' appears twice, at offset 17 (NumPy would use the last value; Amphora refuses an ambiguous header)");
  refused("{'descr': '|u\n1', 'fortran_order': False, 'shape': (3,)}", "runs over a line break");
  refused("{'descr': '|u1', 'fortran_order': 0, 'shape': (3,)}", "fortran_order is neither True nor False");
  refused("{'descr': '|u1', 'fortran_order': Falsey, 'shape': (3,)}", "fortran_order is neither True nor False");
  refused("{'descr': '|u1', 'fortran_order': False, 'shape': (3,)} x", "trailing characters");
  // numpy drops a Python 2 'L' only from version 1.0 and 2.0 headers.
  refused(u1("(3L,)"), "shape dimension 3L uses Python 2 syntax", 3);
  CHECK(load(npy_bytes(u1("(3L,)"), "abc", 1)).shape() == std::vector<std::int64_t>{3});
  CHECK(load(npy_bytes(u1("(1L, 3L)"), "abc", 2)).shape() == std::vector<std::int64_t>{1, 3});
  refused(u1("(3LL,)"), "shape holds something other than a non-negative integer");
  // What Python and numpy do accept still loads.
  CHECK(load(npy_bytes(u1("(0,)"), "")).num_elements() == 0);
  CHECK(load(npy_bytes(u1("(00,)"), "")).shape() == std::vector<std::int64_t>{0});
  CHECK(load(npy_bytes(u1("(3, 1,)"), "abc")).shape() == std::vector<std::int64_t>{3, 1});
  CHECK(load(npy_bytes(u1("( 3 , )"), "abc")).num_elements() == 3);
  CHECK(load(npy_bytes("{'shape': (3,\n), 'fortran_order': False,\n'descr': \"|u1\"}", "abc")).num_elements() == 3);
  CHECK(load(npy_bytes(u1("(1, 0, 7)"), "")).num_elements() == 0);
  // Stricter than numpy on purpose, and the message says so.
  CHECK_THROWS_MATCHES(load(npy_bytes(u1("(3,)"), "abcd")), CorruptData,
                       MessageHas({"in.npy", "1 unexpected bytes after the array data",
                                   "(NumPy would ignore them; Amphora refuses them so a damaged or concatenated "
                                   "file is not taken for a valid one)"}));
}

TEST_CASE("Bool elements other than 0 or 1 are refused on save, import and load", "[bad][bool]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = Tensor::zeros(DType::bool_, {10});
  t.mutable_data()[2] = std::byte{1};
  t.mutable_data()[5] = std::byte{7};
  t.mutable_data()[8] = std::byte{2};
  for (Compression c : {Compression::none, Compression::lz4}) {
    INFO(to_string(c));
    CHECK_THROWS_MATCHES(store.save(t, {.name = "b", .options = TensorOptions{c}}), InvalidArgument,
                         MessageHas({"cannot save a bool tensor whose element 5 holds the byte 7: a bool must be 0 or 1"}));
  }
  CHECK(store.names().empty());
  // The scan runs over blocks in parallel; the lowest bad index is the one reported.
  Tensor big = Tensor::zeros(DType::bool_, {5 << 20});
  big.mutable_data()[(4 << 20) + 3] = std::byte{0x80};
  big.mutable_data()[(1 << 20) + 9] = std::byte{0xff};
  CHECK_THROWS_MATCHES(store.save(big), InvalidArgument, MessageHas({"element 1048585 holds the byte 255"}));

  // Import of a .npy, reported by C-order index whatever the file's order.
  test::write_text(dir / "b.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (6,), }",
                                            std::string("\x00\x01\x00\x02\x01\x00", 6)));
  CHECK_THROWS_MATCHES(read_npy(dir / "b.npy"), CorruptData,
                       MessageHas({"b.npy", "bool element 3 holds the byte 2; a bool must be 0 or 1"}));
  // Fortran order (2, 3): file byte 1 is row 1, column 0, C index 3.
  test::write_text(dir / "f.npy", npy_bytes("{'descr': '|b1', 'fortran_order': True, 'shape': (2, 3), }",
                                            std::string("\x01\x05\x00\x01\x01\x00", 6)));
  CHECK_THROWS_MATCHES(read_npy(dir / "f.npy"), CorruptData, MessageHas({"f.npy", "bool element 3 holds the byte 5"}));

  // Load and validate of a stored raw payload.
  nlohmann::json meta = {{"dtype", "bool"}, {"shape", {4}}, {"encoding", "npy"}, {"stats", nullptr}};
  std::string raw = make_tensor_npy_header(DType::bool_, std::vector<std::int64_t>{4}) + std::string("\x01\x00\xff\x01", 4);
  Digest d = plant_tensor(dir.path(), meta, {{"tensor.npy", raw}});
  CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), CorruptData,
                       MessageHas({d.short_str(), "tensor.npy: bool element 2 holds the byte 255"}));
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(d.str())), CorruptData,
                       MessageHas({d.short_str(), "tensor.npy: bool element 2 holds the byte 255"}));

  // And of a packed one: 4096 bools after the 4096-byte header of earlier
  // builds (still read, docs/FORMAT.md §5.4), so both frames hold 4096 bytes.
  std::string header = make_npy_header(DType::bool_, std::vector<std::int64_t>{4096}, 4096);
  std::string data(4096, '\1');
  data[3000] = '\x09';
  std::string packed = stored_frame_4096(header) + stored_frame_4096(data);
  std::string index = chunk_index({{0, 0}, {4119, 4096}, {8238, 8192}});
  nlohmann::json pmeta = {{"dtype", "bool"}, {"shape", {4096}}, {"encoding", "npy.lz4"}, {"chunk_bytes", 1 << 20},
                          {"chunks", 2}, {"stored_chunks", 2}, {"stats", nullptr}};
  Digest p = plant_tensor(dir.path(), pmeta, {{"tensor.npy.lz4", packed}, {"tensor.chunks.npy", index}});
  auto reader = store.open_artifact(p.str());
  CHECK_THROWS_MATCHES(store.load<Tensor>(p.str()), CorruptData,
                       MessageHas({p.short_str(), "tensor.npy.lz4: bool element 3000 holds the byte 9"}));
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(reader), CorruptData,
                       MessageHas({p.short_str(), "tensor.npy.lz4: bool element 3000 holds the byte 9"}));
  CHECK_THROWS_MATCHES(load_tensor_rows(reader, 2000, 3500), CorruptData, MessageHas({"bool element 3000"}));
  CHECK(load_tensor_rows(reader, 0, 2000).num_elements() == 2000);  // rows without the bad byte read
  // The same frames with the byte repaired are a valid artifact.
  data[3000] = '\1';
  Digest ok = plant_tensor(dir.path(), pmeta,
                           {{"tensor.npy.lz4", stored_frame_4096(header) + stored_frame_4096(data)}, {"tensor.chunks.npy", index}});
  CHECK_NOTHROW(materializer<Tensor>::validate(store.open_artifact(ok.str())));
  CHECK(store.load<Tensor>(ok.str()).num_elements() == 4096);
}

TEST_CASE("Importing something other than a regular file fails at once", "[bad][npy]") {
  test::TempDir dir;
  auto fifo = dir / "pipe.npy";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // Should the open block (as a blocking open of a FIFO does until a writer
  // comes), this thread comes along as the writer after 5 s, so the test
  // fails on the wrong exception and the time taken instead of hanging.
  std::atomic<bool> done{false};
  std::thread rescuer([&] {
    for (int i = 0; i < 50 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (done) return;
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_MATCHES(read_npy(fifo), InvalidArgument, MessageHas({"pipe.npy is not a regular file (a FIFO)"}));
  done = true;
  rescuer.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));

  fs::create_directories(dir / "folder.npy");
  CHECK_THROWS_MATCHES(read_npy(dir / "folder.npy"), InvalidArgument,
                       MessageHas({"folder.npy is not a regular file (a directory)"}));
  CHECK_THROWS_MATCHES(read_npy(dir / "missing.npy"), NotFound, MessageHas({"missing.npy"}));
}

TEST_CASE("A scalar saves in a few hundred bytes; tensors written with the 4096-byte header of earlier builds still load",
          "[tensor][npy]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto scalar = store.save(3.25);
  CHECK(fs::file_size(test::object_dir(dir.path(), scalar.digest) / "tensor.npy") == 128 + 8);
  CHECK(store.load<double>(scalar.digest.str()) == 3.25);

  // Planted as builds before the 64-byte rule wrote them, raw and packed.
  Tensor t = test::random_tensor(DType::int32, {5, 7}, 11);
  const std::string page = make_npy_header(DType::int32, t.shape(), 4096);
  const std::string whole = page + std::string(reinterpret_cast<const char*>(t.data()), t.nbytes());
  nlohmann::json meta = {{"dtype", "int32"}, {"shape", {5, 7}}, {"encoding", "npy"}, {"stats", nullptr}};
  Digest raw = plant_tensor(dir.path(), meta, {{"tensor.npy", whole}});
  CHECK(store.load<Tensor>(raw.str()).bit_equal(t));
  CHECK(store.load<Tensor>(raw.str(), {.eager = true}).bit_equal(t));
  CHECK_NOTHROW(materializer<Tensor>::validate(store.open_artifact(raw.str())));
  // Saved now, the same tensor has the short header and its own digest.
  auto now = store.save(t, {.options = TensorOptions{Compression::none}});
  CHECK(now.digest != raw);
  CHECK(fs::file_size(test::object_dir(dir.path(), now.digest) / "tensor.npy") == 128 + t.nbytes());
  // Cut short, either is damaged, and says what its shape needs.
  Digest cut = plant_tensor(dir.path(), meta, {{"tensor.npy", whole.substr(0, whole.size() - 4)}});
  CHECK_THROWS_MATCHES(store.load<Tensor>(cut.str()), CorruptData,
                       MessageHas({"tensor.npy is " + std::to_string(whole.size() - 4) + " bytes; its shape needs " +
                                   std::to_string(whole.size())}));
  const std::string short_header = make_tensor_npy_header(DType::int32, t.shape());
  Digest cut_now = plant_tensor(dir.path(), meta, {{"tensor.npy", short_header + std::string(8, '\0')}});
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(cut_now.str())), CorruptData,
                       MessageHas({"tensor.npy is 136 bytes; its shape needs " + std::to_string(128 + t.nbytes())}));
}

TEST_CASE("Row reads of a large raw tensor check its size and header, reading only the rows", "[bad][tensor]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // 128 KiB of int32: the 4096-byte header alone, read with the rows in one open.
  Tensor t = test::random_tensor(DType::int32, {256, 128}, 21);
  const std::string header = make_tensor_npy_header(DType::int32, t.shape());
  REQUIRE(header.size() == 4096);
  const std::string data(reinterpret_cast<const char*>(t.data()), t.nbytes());
  nlohmann::json meta = {{"dtype", "int32"}, {"shape", {256, 128}}, {"encoding", "npy"}, {"stats", nullptr}};
  Digest good = plant_tensor(dir.path(), meta, {{"tensor.npy", header + data}});
  CHECK(load_tensor_rows(store.open_artifact(good.str()), 100, 110).bit_equal(t.rows(100, 110)));

  std::string other = header;
  other.replace(other.find("'<i4'"), 5, "'<f4'");
  Digest wrong_header = plant_tensor(dir.path(), meta, {{"tensor.npy", other + data}});
  CHECK_THROWS_MATCHES(load_tensor_rows(store.open_artifact(wrong_header.str()), 100, 110), CorruptData,
                       MessageHas({wrong_header.short_str(), "tensor.npy header does not match its manifest"}));
  Digest short_file = plant_tensor(dir.path(), meta, {{"tensor.npy", header + data.substr(0, data.size() - 512)}});
  CHECK_THROWS_MATCHES(load_tensor_rows(store.open_artifact(short_file.str()), 0, 1), CorruptData,
                       MessageHas({"tensor.npy is " + std::to_string(4096 + t.nbytes() - 512) + " bytes; its shape needs " +
                                   std::to_string(4096 + t.nbytes())}));
  // Cut behind the manifest's back: the open sees the size differ.
  auto reader = store.open_artifact(good.str());
  const fs::path file = test::object_dir(dir.path(), good) / "tensor.npy";
  fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(file, 4096 + 1000);
  CHECK_THROWS_MATCHES(load_tensor_rows(reader, 250, 256), CorruptData, MessageHas({"tensor.npy", "manifest says"}));
}

TEST_CASE("Damaged artifacts fail to load with a message naming them", "[bad][store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  std::string header = make_npy_header(DType::float32, std::vector<std::int64_t>{4});
  std::string good_payload = header + std::string(16, '\0');
  nlohmann::json meta = {{"dtype", "float32"}, {"shape", {4}}, {"encoding", "npy"}, {"stats", nullptr}};
  Digest good = plant(dir.path(), tensor_manifest(meta, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
  REQUIRE(store.load<Tensor>(good.str()).num_elements() == 4);
  REQUIRE_NOTHROW(materializer<Tensor>::validate(store.open_artifact(good.str())));
  // What load and validate both throw for the artifact `d`.
  auto both_throw = [&](const Digest& d, auto matcher, auto exception_tag) {
    using E = typename decltype(exception_tag)::type;
    CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), E, matcher);
    CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(d.str())), E, matcher);
  };
  const std::type_identity<CorruptData> corrupt;
  const std::type_identity<Unsupported> unsupported;

  SECTION("manifest that is not JSON") {
    Digest d = plant(dir.path(), "this is not json", {});
    CHECK_THROWS_AS(store.load<Tensor>(d.str()), CorruptData);
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains(d.short_str()) && Catch::Contains("not valid JSON"));
  }
  SECTION("manifest naming a path with ..") {
    auto j = nlohmann::json::parse(tensor_manifest(meta, "tensor.npy", good_payload));
    j["files"][0]["path"] = "../../../amphora-store.json";
    Digest d = plant(dir.path(), j.dump(), {});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("unsafe payload path"));
    auto report = store.verify(d.str());
    CHECK_FALSE(report.ok());
  }
  SECTION("manifest naming an absolute path") {
    auto j = nlohmann::json::parse(tensor_manifest(meta, "tensor.npy", good_payload));
    j["files"][0]["path"] = "/etc/passwd";
    Digest d = plant(dir.path(), j.dump(), {});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("absolute"));
  }
  SECTION("payload replaced by a symbolic link") {
    auto m = meta;
    m["variant"] = "symlink";
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {});
    // The link's target holds exactly the right bytes, so only the link check can fail it.
    test::write_text(dir / "outside.npy", good_payload);
    fs::create_symlink(dir / "outside.npy", test::object_dir(dir.path(), d) / "tensor.npy");
    CHECK_THROWS_AS(store.load<Tensor>(d.str()), CorruptData);
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("'tensor.npy' is a symbolic link"));
    auto report = store.verify(d.str());
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0], Catch::Contains("'tensor.npy' is a symbolic link"));
  }
  SECTION("truncated payload") {
    Digest d = plant(dir.path(), tensor_manifest(meta, "tensor.npy", good_payload),
                     {{"tensor.npy", good_payload.substr(0, 4100)}});
    both_throw(d, MessageHas({d.short_str(), "tensor.npy", "4100 bytes"}), corrupt);
  }
  SECTION("shape whose element count overflows") {
    auto m = meta;
    m["shape"] = {1ll << 40, 1ll << 40};
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    both_throw(d, MessageHas({d.short_str(), "overflows"}), corrupt);
  }
  SECTION("shape whose non-zero dimensions overflow beside a zero") {
    auto m = meta;
    m["shape"] = {std::numeric_limits<std::int64_t>::max(), 2, 0};
    std::vector<std::int64_t> shape = {std::numeric_limits<std::int64_t>::max(), 2, 0};
    std::string payload = make_npy_header(DType::float32, shape, 64);
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", payload), {{"tensor.npy", payload}});
    both_throw(d, MessageHas({d.short_str(), "overflows: more than 2^63 bytes in its non-zero dimensions"}), corrupt);
  }
  SECTION("a dimension beyond int64 in the metadata") {
    auto m = meta;
    m["shape"] = {std::numeric_limits<std::uint64_t>::max()};
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    both_throw(d, MessageHas({d.short_str(), "tensor metadata shape dimension 18446744073709551615 is out of range"}),
               corrupt);
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), !Catch::Contains("-1"));
  }
  SECTION("metadata claiming more data than the file holds") {
    // The header matches the manifest's shape; only the data is short.
    auto m = meta;
    m["shape"] = {1000};
    std::string short_payload = make_npy_header(DType::float32, std::vector<std::int64_t>{1000}) + std::string(16, '\0');
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", short_payload), {{"tensor.npy", short_payload}});
    both_throw(d, MessageHas({d.short_str(), "tensor.npy is 4112 bytes; its shape needs 8096"}), corrupt);
  }
  SECTION("a header that does not match the metadata") {
    auto m = meta;
    m["shape"] = {2, 2};
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    both_throw(d, MessageHas({d.short_str(), "tensor.npy header does not match its manifest (float32, 2-d)"}), corrupt);
  }
  SECTION("unknown dtype") {
    auto m = meta;
    m["dtype"] = "float128";
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    both_throw(d, MessageHas({d.short_str(), "unknown dtype 'float128'"}), unsupported);
    // Loaded as a type whose accept() looks at the dtype before the tensor is read.
    CHECK_THROWS_MATCHES(store.load<std::vector<float>>(d.str()), Unsupported,
                         MessageHas({d.short_str(), "unknown dtype 'float128'"}));
    CHECK_THROWS_MATCHES((store.load<std::array<float, 4>>(d.str())), Unsupported,
                         MessageHas({d.short_str(), "unknown dtype 'float128'"}));
  }
  SECTION("unknown encoding") {
    auto m = meta;
    m["encoding"] = "zstd";
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    both_throw(d, MessageHas({d.short_str(), "unknown tensor encoding 'zstd'"}), unsupported);
  }
  SECTION("an unsupported chunk_bytes") {
    auto m = meta;
    m["encoding"] = "npy.lz4";
    // Powers of two from 64 KiB to 1 MiB are read; nothing else.
    for (const nlohmann::json& bytes : {nlohmann::json(3000), nlohmann::json(32768), nlohmann::json(2 << 20),
                                        nlohmann::json(393216), nlohmann::json("1048576"), nlohmann::json(-1)}) {
      m["chunk_bytes"] = bytes;
      Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
      both_throw(d, MessageHas({d.short_str(), "tensor metadata has an unsupported chunk_bytes " + bytes.dump(),
                                "(a power of two from 65536 to 1048576)"}), corrupt);
    }
  }
}

TEST_CASE("Chunked tensors load at every chunk size a reader accepts: zstd in 1 MiB chunks as earlier builds wrote it, LZ4 in 64 KiB", "[bad][store][zstd][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  const std::vector<std::int64_t> shape = {600, 1024};  // 600 KiB: one 1 MiB chunk, or ten of 64 KiB
  Tensor t = Tensor::zeros(DType::uint8, shape);
  for (std::size_t k = 0; k < t.nbytes(); ++k) t.mutable_data()[k] = std::byte(static_cast<unsigned char>((k * 13) >> 10));
  const std::string header = make_tensor_npy_header(DType::uint8, shape);
  for (auto [codec, chunk] : {std::pair{std::string("npy.zst"), std::size_t{1} << 20}, std::pair{std::string("npy.lz4"), std::size_t{64} << 10}}) {
    INFO(codec << " in chunks of " << chunk << " bytes");
    std::string packed;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> rows;
    auto add_frame = [&](ConstBytes raw, std::uint64_t raw_at) {
      std::vector<std::byte> frame;
      if (codec == "npy.zst")
        detail::encode_zstd_frame(raw, 1, frame);
      else
        detail::encode_frame(raw, true, frame);
      rows.push_back({packed.size(), raw_at});
      packed.append(reinterpret_cast<const char*>(frame.data()), frame.size());
    };
    add_frame({reinterpret_cast<const std::byte*>(header.data()), header.size()}, 0);
    for (std::size_t at = 0; at < t.nbytes(); at += chunk)
      add_frame({t.data() + at, std::min(chunk, t.nbytes() - at)}, header.size() + at);
    rows.push_back({packed.size(), header.size() + t.nbytes()});
    nlohmann::json meta = {{"dtype", "uint8"}, {"shape", shape}, {"encoding", codec}, {"chunk_bytes", chunk},
                           {"chunks", rows.size() - 1}, {"stored_chunks", 0}, {"stats", nullptr}};
    Digest d = plant_tensor(dir.path(), meta, {{"tensor." + codec, packed}, {"tensor.chunks.npy", chunk_index(rows)}});
    CHECK(store.load<Tensor>(d.str()).bit_equal(t));
    auto reader = store.open_artifact(d.str());
    CHECK_NOTHROW(materializer<Tensor>::validate(reader));
    for (auto [begin, end] : {std::pair{0, 1}, std::pair{63, 65}, std::pair{255, 257}, std::pair{599, 600}})
      CHECK(load_tensor_rows(reader, begin, end).bit_equal(t.rows(begin, end)));
    // The chunk size is the manifest's, not the codec's: claimed otherwise,
    // the same frames do not match the index.
    meta["chunk_bytes"] = chunk == (std::size_t{1} << 20) ? std::size_t{256} << 10 : std::size_t{128} << 10;
    Digest lie = plant_tensor(dir.path(), meta, {{"tensor." + codec, packed}, {"tensor.chunks.npy", chunk_index(rows)}});
    CHECK_THROWS_MATCHES(store.load<Tensor>(lie.str()), CorruptData, MessageHas({lie.short_str(), "tensor.chunks.npy"}));
  }
}

TEST_CASE("Empty tensors stored with the 4096-byte header of earlier builds still load", "[bad][store][empty]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  const std::vector<std::int64_t> shape = {0, 3};
  const std::string legacy = make_npy_header(DType::float32, shape, 4096);
  const std::string current = make_tensor_npy_header(DType::float32, shape);
  REQUIRE(legacy.size() == 4096);
  REQUIRE(current.size() == 128);
  nlohmann::json meta = {{"dtype", "float32"}, {"shape", shape}, {"encoding", "npy"}, {"stats", nullptr}};
  nlohmann::json pmeta = {{"dtype", "float32"}, {"shape", shape}, {"encoding", "npy.lz4"}, {"chunk_bytes", 1 << 20},
                          {"chunks", 1}, {"stored_chunks", 1}, {"stats", nullptr}};

  Digest raw = plant_tensor(dir.path(), meta, {{"tensor.npy", legacy}});
  Digest packed = plant_tensor(dir.path(), pmeta,
                               {{"tensor.npy.lz4", stored_frame_4096(legacy)}, {"tensor.chunks.npy", chunk_index({{0, 0}, {4119, 4096}})}});
  for (const Digest& d : {raw, packed}) {
    INFO(d.str());
    Tensor t = store.load<Tensor>(d.str());
    CHECK(t.shape() == shape);
    CHECK(t.dtype() == DType::float32);
    CHECK_NOTHROW(materializer<Tensor>::validate(store.open_artifact(d.str())));
    CHECK(load_tensor_rows(store.open_artifact(d.str()), 0, 0).num_elements() == 0);
  }
  // Saving the same tensor now writes the short header: a new artifact.
  auto saved = store.save(Tensor::zeros(DType::float32, shape), {.options = TensorOptions{Compression::none}});
  CHECK(saved.digest != raw);
  CHECK(test::read_text(test::object_dir(dir.path(), saved.digest) / "tensor.npy") == current);

  // The short header padded to 4096 bytes is neither header: too long.
  Digest padded = plant_tensor(dir.path(), meta, {{"tensor.npy", current + std::string(4096 - 128, ' ')}});
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(padded.str())), CorruptData,
                       MessageHas({padded.short_str(), "tensor.npy is 4096 bytes; its shape needs 128"}));
  Digest longer = plant_tensor(dir.path(), meta, {{"tensor.npy", current + "x"}});
  CHECK_THROWS_MATCHES(store.load<Tensor>(longer.str()), CorruptData,
                       MessageHas({longer.short_str(), "tensor.npy is 129 bytes; its shape needs 128"}));
  Digest odd_index = plant_tensor(dir.path(), pmeta,
                                  {{"tensor.npy.lz4", stored_frame_4096(legacy)}, {"tensor.chunks.npy", chunk_index({{0, 0}, {4119, 2048}})}});
  CHECK_THROWS_MATCHES(store.load<Tensor>(odd_index.str()), CorruptData,
                       MessageHas({odd_index.short_str(), "tensor.chunks.npy: chunk 1 has a wrong raw offset"}));
  // An index announcing the short header over a frame holding the long one.
  Digest mismatch = plant_tensor(dir.path(), pmeta,
                                 {{"tensor.npy.lz4", stored_frame_4096(legacy)}, {"tensor.chunks.npy", chunk_index({{0, 0}, {4119, 128}})}});
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(mismatch.str())), CorruptData,
                       MessageHas({mismatch.short_str(), "tensor.npy.lz4 chunk 0", "does not announce 128 bytes"}));
}

TEST_CASE("Corrupt LZ4 chunks and indexes are detected", "[bad][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = test::ramp_tensor(1000, 1000, 4);  // 4 MB: header chunk + 4 data chunks
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::lz4}});
  auto obj = test::object_dir(dir.path(), saved.digest);
  auto reader = store.open_artifact("t");
  Tensor index = read_npy(obj / "tensor.chunks.npy");
  auto rows = index.values<std::uint64_t>();
  auto frame_begin = [&](std::size_t k) { return rows[2 * k]; };
  REQUIRE_NOTHROW(materializer<Tensor>::validate(reader));
  auto validate = [&] { materializer<Tensor>::validate(store.open_artifact("t")); };

  auto overwrite = [&](const fs::path& file, std::uint64_t offset, const std::string& bytes) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  SECTION("garbage in a compressed block") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(2) + 19, std::string(64, '\xff'));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 2") && Catch::Contains("corrupt"));
    CHECK_THROWS_MATCHES(validate(), CorruptData, MessageHas({"artifact t", "tensor.npy.lz4 chunk 2: LZ4 block is corrupt"}));
    CHECK_THROWS_AS(load_tensor_rows(reader, 300, 500), CorruptData);
    // Rows whose chunks are intact still read.
    CHECK(load_tensor_rows(reader, 0, 100).bit_equal(t.rows(0, 100)));
  }
  SECTION("a damaged frame header") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(1) + 1, std::string(1, '\0'));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 1") && Catch::Contains("header"));
    CHECK_THROWS_MATCHES(validate(), CorruptData,
                         MessageHas({"artifact t", "tensor.npy.lz4 chunk 1: LZ4 frame header is damaged"}));
  }
  SECTION("a block size pointing past its frame") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(3) + 15, std::string("\xff\xff\x0f\x00", 4));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 3"));
    CHECK_THROWS_MATCHES(validate(), CorruptData, MessageHas({"artifact t", "tensor.npy.lz4 chunk 3: LZ4 block claims"}));
  }
  const std::uint64_t index_data = parse_npy_header(Buffer::map_file(obj / "tensor.chunks.npy")->bytes(), "index").data_offset;
  auto set_packed_offset = [&](std::size_t k, std::uint64_t value) {
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>(value >> (8 * b));
    overwrite(obj / "tensor.chunks.npy", index_data + 16 * k, bytes);
  };
  SECTION("an index pointing outside the file") {
    set_packed_offset(2, ~std::uint64_t{0} - 7);  // wraps around if added to
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("impossible packed offset"));
    CHECK_THROWS_WITH(load_tensor_rows(reader, 300, 400), Catch::Contains("impossible packed offset"));
    CHECK_THROWS_MATCHES(validate(), CorruptData,
                         MessageHas({"artifact t", "tensor.chunks.npy: chunk 1 has an impossible packed offset or size"}));
  }
  SECTION("an index whose offsets run backwards") {
    set_packed_offset(3, frame_begin(2) - 1);
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
    CHECK_THROWS_MATCHES(validate(), CorruptData,
                         MessageHas({"artifact t", "tensor.chunks.npy: chunk 2 has an impossible packed offset or size"}));
  }
  SECTION("a truncated compressed payload") {
    fs::resize_file(obj / "tensor.npy.lz4", frame_begin(4));
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
    CHECK_THROWS_MATCHES(validate(), CorruptData, MessageHas({"artifact t", "payload file 'tensor.npy.lz4' is"}));
  }
  SECTION("damage only in the last frame, which a read of early rows never decodes") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(4) + 19, std::string(64, '\xff'));
    CHECK(load_tensor_rows(reader, 0, 100).bit_equal(t.rows(0, 100)));
    CHECK_THROWS_MATCHES(validate(), CorruptData, MessageHas({"artifact t", "tensor.npy.lz4 chunk 4: LZ4 block"}));
  }
  SECTION("damage in two frames is reported for the first in file order") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(4) + 19, std::string(64, '\xff'));
    overwrite(obj / "tensor.npy.lz4", frame_begin(2) + 19, std::string(64, '\xff'));
    CHECK_THROWS_MATCHES(validate(), CorruptData, MessageHas({"tensor.npy.lz4 chunk 2: LZ4 block is corrupt"}));
  }
  // Whatever the damage, verify reports it.
  if (fs::file_size(obj / "tensor.npy.lz4") > 0) CHECK_FALSE(store.verify("t").ok());
}

TEST_CASE("A packed tensor claiming more than LZ4 can expand to is refused before decoding", "[bad][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // 10 MiB claimed over eleven minimal 23-byte frames: the index is
  // consistent, so only the 255:1 bound can refuse it, before any decoding.
  const std::uint64_t nbytes = 10u << 20;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> rows_of_index = {{0, 0}};
  for (std::uint64_t k = 1; k <= 11; ++k) rows_of_index.push_back({23 * k, 4096 + (k - 1) * (1u << 20)});
  nlohmann::json m = {{"dtype", "uint8"}, {"shape", {nbytes}}, {"encoding", "npy.lz4"}, {"chunk_bytes", 1 << 20},
                      {"stats", nullptr}};
  Digest d = plant_tensor(dir.path(), m,
                          {{"tensor.npy.lz4", std::string(11 * 23, '\0')}, {"tensor.chunks.npy", chunk_index(rows_of_index)}});
  auto lie = store.open_artifact(d.str());
  CHECK_THROWS_MATCHES(materializer<Tensor>::validate(lie), CorruptData,
                       MessageHas({d.short_str(), "253 packed bytes cannot hold 10485760 bytes of tensor data"}));
  CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), CorruptData, MessageHas({"253 packed bytes cannot hold"}));
}

namespace {

/// One zstd frame of `content`, as a hostile writer might make it.
std::string zstd_frame(const std::string& content, bool checksum = true, bool content_size = true) {
  std::unique_ptr<ZSTD_CCtx, std::size_t (*)(ZSTD_CCtx*)> c(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_checksumFlag, checksum ? 1 : 0);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  std::string out(ZSTD_compressBound(content.size()), '\0');
  std::size_t n;
  if (content_size) {
    n = ZSTD_compress2(c.get(), out.data(), out.size(), content.data(), content.size());
  } else {  // streamed: the size is not known when the header is written
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    ZSTD_inBuffer i{content.data(), content.size(), 0};
    n = ZSTD_compressStream2(c.get(), &o, &i, ZSTD_e_end);
    REQUIRE(n == 0);
    n = o.pos;
  }
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE("Hostile zstd chunks are refused as corrupt before they can expand", "[bad][zstd]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  const std::vector<std::int64_t> shape = {100};
  const std::string header = make_tensor_npy_header(DType::uint8, shape);
  std::string data(100, '\0');
  for (int k = 0; k < 100; ++k) data[k] = static_cast<char>(k * 7);
  const nlohmann::json meta = {{"dtype", "uint8"}, {"shape", shape}, {"encoding", "npy.zst"}, {"chunk_bytes", 1 << 20},
                               {"stats", nullptr}};
  // Plants the tensor with `frame` as its data chunk; returns what loading,
  // validating and reading rows of it throw, which must agree.
  auto planted = [&](const std::string& frame) {
    const std::string head = zstd_frame(header);
    const std::string index =
        chunk_index({{0, 0}, {head.size(), header.size()}, {head.size() + frame.size(), header.size() + 100}});
    return plant_tensor(dir.path(), meta, {{"tensor.npy.zst", head + frame}, {"tensor.chunks.npy", index}});
  };
  auto refused = [&](const std::string& frame, const std::string& why) {
    Digest d = planted(frame);
    INFO(why);
    CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), CorruptData,
                         MessageHas({d.short_str(), "tensor.npy.zst chunk 1: ", why}));
    auto reader = store.open_artifact(d.str());
    CHECK_THROWS_MATCHES(materializer<Tensor>::validate(reader), CorruptData, MessageHas({"chunk 1: ", why}));
    CHECK_THROWS_MATCHES(load_tensor_rows(reader, 10, 20), CorruptData, MessageHas({"chunk 1: ", why}));
    CHECK_FALSE(store.verify(d.str()).ok());
  };

  // The well-formed frame loads: the cases below differ from it in one way each.
  const std::string good = zstd_frame(data);
  Digest ok = planted(good);
  CHECK(store.load<Tensor>(ok.str()).bit_equal(Tensor::from_values<std::uint8_t>(
      shape, std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()))));
  CHECK(store.verify(ok.str()).ok());

  refused(zstd_frame(data + data), "announces 200 bytes, expected 100");
  // A bomb: 64 MiB of zeros in a few kilobytes, in a chunk of 100 bytes;
  // refused from its header, and a streamed one that records no size too.
  const std::string zeros(64u << 20, '\0');
  refused(zstd_frame(zeros), "announces 67108864 bytes, expected 100");
  refused(zstd_frame(zeros, true, false), "does not record its content size");
  refused(zstd_frame(data, false), "has no checksum");
  refused(good.substr(0, good.size() - 3), "truncated");
  refused(good + good, "ends after");
  refused(std::string(good.size(), '\x55'), "not a zstd frame");
  // A dictionary id: the descriptor's low bits announce a 1-byte id, which
  // follows the window descriptor (absent in a single-segment frame).
  std::string with_dict = good;
  const auto descriptor = static_cast<unsigned char>(with_dict[4]);
  with_dict[4] = static_cast<char>(descriptor | 1);
  with_dict.insert(5 + ((descriptor & 0x20) ? 0 : 1), 1, '\x07');
  refused(with_dict, "needs dictionary 7");
  std::string damaged = good;
  damaged[damaged.size() - 1] ^= 0x40;  // the checksum
  refused(damaged, "corrupt");
}

TEST_CASE("A tensor encoding this build does not know is refused by name", "[bad][zstd]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  for (std::string encoding : {"npy.xz", "encoded.npy.brotli"}) {
    nlohmann::json meta = {{"dtype", "uint8"}, {"shape", {4}}, {"encoding", encoding}, {"chunk_bytes", 1 << 20},
                           {"stats", nullptr}};
    if (encoding.starts_with("encoded."))
      meta["recipe"] = {{"dtype", "uint8"}, {"count", 4}, {"stored_dtype", "uint8"}, {"transforms", nlohmann::json::array()}};
    Digest d = plant_tensor(dir.path(), meta, {{"tensor.bin", std::string(4, '\0')}});
    const std::string name = encoding.substr(encoding.starts_with("encoded.") ? 8 : 0);
    CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), Unsupported,
                         MessageHas({d.short_str(), "unknown tensor encoding '" + name + "'", "npy.zst",
                                     "written by a newer Amphora"}));
    CHECK_THROWS_MATCHES(materializer<Tensor>::validate(store.open_artifact(d.str())), Unsupported,
                         MessageHas({"unknown tensor encoding '" + name + "'"}));
  }
  // Chunk filters exist only over a codec, and delta only over integers.
  for (std::string encoding : {"delta.npy", "shuffled.npy", "shuffled.delta.npy.zst", "delta.delta.npy.lz4"}) {
    nlohmann::json meta = {{"dtype", "int32"}, {"shape", {4}}, {"encoding", encoding}, {"chunk_bytes", 1 << 20}, {"stats", nullptr}};
    Digest d = plant_tensor(dir.path(), meta, {{"tensor.npy", std::string(4, '\0')}});
    CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), Unsupported, MessageHas({"unknown tensor encoding '" + encoding + "'"}));
  }
  for (std::string dtype : {"float32", "bool", "complex64"}) {
    nlohmann::json meta = {{"dtype", dtype}, {"shape", {4}}, {"encoding", "delta.npy.zst"}, {"chunk_bytes", 1 << 20}, {"stats", nullptr}};
    Digest d = plant_tensor(dir.path(), meta, {{"tensor.npy.zst", std::string(4, '\0')}});
    CHECK_THROWS_MATCHES(store.load<Tensor>(d.str()), CorruptData,
                         MessageHas({d.short_str(), "delta-codes " + dtype + " chunks; only integers are"}));
  }
}

TEST_CASE("Hostile store contents cannot crash, hang or mislead", "[bad][store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = test::random_tensor(DType::int32, {64}, 1);
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  auto obj = test::object_dir(dir.path(), saved.digest);

  SECTION("deeply nested JSON in a manifest") {
    std::string deep = "{\"meta\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    Digest d = plant(dir.path(), deep, {});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("nesting deeper"));
    CHECK_FALSE(store.verify(d.str()).ok());
  }
  SECTION("a FIFO in place of a payload file") {
    fs::remove(obj / "tensor.npy");
    REQUIRE(::mkfifo((obj / "tensor.npy").c_str(), 0644) == 0);
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("'tensor.npy' is a FIFO, not a regular file"));
    auto report = store.verify("t");
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0], Catch::Contains("'tensor.npy' is a FIFO, not a regular file"));
  }
  SECTION("an edited manifest is refused on load, not just by verify") {
    auto text = test::read_text(obj / "manifest.json");
    text.replace(text.find("\"int32\""), 7, "\"uint32\"");
    test::write_text(obj / "manifest.json", text);
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("does not hash"));
  }
  SECTION("a name directory left empty by a killed writer") {
    fs::create_directories(dir / "names/ghost");
    CHECK(store.names() == std::vector<std::string>{"t"});
    CHECK(store.names_of(saved.digest).size() == 1);
  }
  SECTION("saving again repairs a damaged copy instead of trusting it") {
    fs::remove(obj / "tensor.npy");
    auto again = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
    CHECK(again.digest == saved.digest);
    CHECK(again.created);
    CHECK(store.load<Tensor>("t@1").bit_equal(t));
    CHECK(store.verify().ok());
  }
}
