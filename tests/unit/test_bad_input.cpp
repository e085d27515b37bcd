// Damaged, hostile and absurd input: each must end in a clear exception,
// never a crash, an out-of-bounds read or a huge allocation.

#include "support.hpp"

#include <amphora/npy.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <sys/stat.h>

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

/// A tensor manifest for `meta` listing `file` with its true size and digest.
std::string tensor_manifest(const nlohmann::json& meta, const std::string& file, const std::string& bytes) {
  Manifest m;
  m.materializer = "amphora.tensor";
  m.materializer_version = 1;
  m.files.push_back({file, bytes.size(), Manifest::piece_size_for(bytes.size()), {Sha256::of(bytes)}});
  m.meta = meta;
  return m.canonical();
}

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

TEST_CASE("Damaged artifacts fail to load with a message naming them", "[bad][store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  std::string header = make_npy_header(DType::float32, std::vector<std::int64_t>{4});
  std::string good_payload = header + std::string(16, '\0');
  nlohmann::json meta = {{"dtype", "float32"}, {"shape", {4}}, {"encoding", "npy"}, {"stats", nullptr}};
  Digest good = plant(dir.path(), tensor_manifest(meta, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
  REQUIRE(store.load<Tensor>(good.str()).num_elements() == 4);

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
    fs::create_symlink(dir / "amphora-store.json", test::object_dir(dir.path(), d) / "tensor.npy");
    CHECK_THROWS_AS(store.load<Tensor>(d.str()), Error);
    CHECK_FALSE(store.verify(d.str()).ok());
  }
  SECTION("truncated payload") {
    Digest d = plant(dir.path(), tensor_manifest(meta, "tensor.npy", good_payload),
                     {{"tensor.npy", good_payload.substr(0, 4100)}});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("4100 bytes") && Catch::Contains("tensor.npy"));
  }
  SECTION("shape whose element count overflows") {
    auto m = meta;
    m["shape"] = {1ll << 40, 1ll << 40};
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("overflows"));
  }
  SECTION("metadata claiming more data than the file holds") {
    auto m = meta;
    m["shape"] = {1000};
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    CHECK_THROWS_AS(store.load<Tensor>(d.str()), CorruptData);
  }
  SECTION("unknown dtype") {
    auto m = meta;
    m["dtype"] = "float128";
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    CHECK_THROWS_WITH(store.load<Tensor>(d.str()), Catch::Contains("unknown dtype 'float128'"));
  }
  SECTION("unknown encoding") {
    auto m = meta;
    m["encoding"] = "zstd";
    Digest d = plant(dir.path(), tensor_manifest(m, "tensor.npy", good_payload), {{"tensor.npy", good_payload}});
    CHECK_THROWS_AS(store.load<Tensor>(d.str()), Unsupported);
  }
}

TEST_CASE("Corrupt LZ4 chunks and indexes are detected", "[bad][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = test::ramp_tensor(1000, 1000, 4);  // 4 MB: header chunk + 4 data chunks
  auto saved = store.save(t, {.name = "t", .compression = Compression::lz4});
  auto obj = test::object_dir(dir.path(), saved.digest);
  auto reader = store.open_artifact("t");
  Tensor index = read_npy(obj / "tensor.chunks.npy");
  auto rows = index.values<std::uint64_t>();
  auto frame_begin = [&](std::size_t k) { return rows[2 * k]; };

  auto overwrite = [&](const fs::path& file, std::uint64_t offset, const std::string& bytes) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  SECTION("garbage in a compressed block") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(2) + 19, std::string(64, '\xff'));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 2") && Catch::Contains("corrupt"));
    CHECK_THROWS_AS(load_tensor_rows(reader, 300, 500), CorruptData);
    // Rows whose chunks are intact still read.
    CHECK(load_tensor_rows(reader, 0, 100).bit_equal(t.rows(0, 100)));
  }
  SECTION("a damaged frame header") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(1) + 1, std::string(1, '\0'));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 1") && Catch::Contains("header"));
  }
  SECTION("a block size pointing past its frame") {
    overwrite(obj / "tensor.npy.lz4", frame_begin(3) + 15, std::string("\xff\xff\x0f\x00", 4));
    CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("chunk 3"));
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
  }
  SECTION("an index whose offsets run backwards") {
    set_packed_offset(3, frame_begin(2) - 1);
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
  }
  SECTION("a truncated compressed payload") {
    fs::resize_file(obj / "tensor.npy.lz4", frame_begin(4));
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
  }
  // Whatever the damage, verify reports it.
  if (fs::file_size(obj / "tensor.npy.lz4") > 0) CHECK_FALSE(store.verify("t").ok());
}

TEST_CASE("Hostile store contents cannot crash, hang or mislead", "[bad][store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = test::random_tensor(DType::int32, {64}, 1);
  auto saved = store.save(t, {.name = "t", .compression = Compression::none});
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
    CHECK_THROWS_AS(store.load<Tensor>("t"), Error);
    CHECK_FALSE(store.verify("t").ok());
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
    auto again = store.save(t, {.name = "t", .compression = Compression::none});
    CHECK(again.digest == saved.digest);
    CHECK(again.created);
    CHECK(store.load<Tensor>("t@1").bit_equal(t));
    CHECK(store.verify().ok());
  }
}
