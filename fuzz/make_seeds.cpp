// Writes seed inputs for the fuzz targets: valid .npy files, manifests and
// LZ4 frames as Amphora and NumPy write them, made with the library itself so
// the seeds follow the format as it changes.
//   amphora_fuzz_seeds OUT_DIR   ->  OUT_DIR/{npy,manifest,lz4_frame,zstd_frame,payloads,npz,array_encoding,csv,jsonl,s3_listing,
//                                             composite,run_config}/*

#include "lz4_frames.hpp"
#include "zstd_frames.hpp"

#include <amphora/array_encoding.hpp>
#include <amphora/manifest.hpp>
#include <amphora/npy.hpp>
#include <amphora/sparse.hpp>

#include <zip.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::mt19937_64 rng(42);

std::string random_text(std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A .npy header the way NumPy writes other versions and layouts.
std::string numpy_header(int major, const std::string& dict) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  std::size_t len_bytes = major == 1 ? 2 : 4, total = 8 + len_bytes + dict.size() + 1;
  std::string body = dict + std::string((64 - total % 64) % 64, ' ') + "\n";
  for (std::size_t k = 0; k < len_bytes; ++k) out += static_cast<char>((body.size() >> (8 * k)) & 0xff);
  return out + body;
}

void npy_seeds(const fs::path& dir) {
  int n = 0;
  std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 1, 1, 2}};
  for (auto dtype : amphora::all_dtypes())
    for (const auto& shape : shapes) {
      std::uint64_t bytes = amphora::checked_element_count(shape, dtype) * amphora::dtype_size(dtype);
      put(dir, "amphora-" + std::to_string(n++), amphora::make_npy_header(dtype, shape, 64) + random_text(bytes));
    }
  // Amphora's own page-sized header, as stored in artifacts.
  std::vector<std::int64_t> shape = {4, 2};
  put(dir, "amphora-4096", amphora::make_npy_header(amphora::DType::float32, shape) + random_text(32));
  struct Case { int major; const char* dict; std::size_t data; };
  const Case cases[] = {
      {1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }", 48},
      {1, "{'descr': '<i4', 'fortran_order': True, 'shape': (3, 2), }", 24},
      {1, "{'descr': '>c8', 'fortran_order': True, 'shape': (2, 2, 2), }", 64},
      {1, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }", 5},
      {1, "{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (3L, 1L)}", 6},
      {2, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", 8},
      {3, "{'descr': '<u8', 'fortran_order': False, 'shape': (), }", 8},
      {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4},
  };
  for (const auto& c : cases) put(dir, "numpy-" + std::to_string(n++), numpy_header(c.major, c.dict) + random_text(c.data));
}

void manifest_seeds(const fs::path& dir) {
  auto digest_of = [](const std::string& s) { return amphora::Sha256::of(s); };
  amphora::Manifest tensor;
  tensor.materializer = "amphora.tensor";
  tensor.materializer_version = 1;
  tensor.files.push_back({"tensor.npy", 4144, 2u << 20, {digest_of("x")}});
  tensor.meta = {{"dtype", "float32"}, {"encoding", "npy"}, {"shape", {3, 4}},
                 {"stats", {{"max", 1.100000023841858}, {"mean", 0.55}, {"min", -0.0}, {"nan_count", 0}}}};
  put(dir, "tensor", tensor.canonical());

  amphora::Manifest lz4 = tensor;
  lz4.files = {{"tensor.chunks.npy", 208, 2u << 20, {digest_of("i")}},
               {"tensor.npy.lz4", 9000, 4096, {digest_of("a"), digest_of("b"), digest_of("c")}}};
  lz4.meta = {{"chunk_bytes", 1048576}, {"chunks", 4}, {"dtype", "int64"}, {"encoding", "npy.lz4"},
              {"shape", {98304, 4}}, {"stats", nullptr}, {"stored_chunks", 1}};
  put(dir, "tensor-lz4", lz4.canonical());

  amphora::Manifest odd;
  odd.materializer = "test.odd-name_1";
  odd.materializer_version = 1000000;
  odd.files = {{"a/b/c.bin", 0, 4096, {digest_of("")}},
               {"a/\xc3\xa9t\xc3\xa9", 4096, 4096, {digest_of("d")}},
               {"z/manifest.json", 4097, 4096, {digest_of("e"), digest_of("f")}}};
  odd.meta = {{"nested", {{"deep", {{"list", {1, -2, 3.5e-7, "nan", true, nullptr}}}}}}, {"big", 18446744073709551615ull}};
  put(dir, "odd", odd.canonical());

  amphora::Manifest empty;
  empty.materializer = "x.y";
  empty.materializer_version = 1;
  put(dir, "empty", empty.canonical());
  put(dir, "newer", R"({"children":[],"files":[],"manifest_version":3,"materializer":{"name":"x.y","version":1},"meta":{}})");
}

// Chunk contents for the frame seeds: tiny, runs, text, a ramp.
std::vector<std::string> chunk_contents() {
  std::vector<std::string> contents = {"a", std::string(5000, 'z'), random_text(3000), random_text(64)};
  std::string ramp;
  for (int i = 0; i < 20000; ++i) ramp += static_cast<char>((i / 64) & 0xff);
  contents.push_back(ramp);
  return contents;
}

void lz4_seeds(const fs::path& dir) {
  int n = 0;
  for (const auto& c : chunk_contents())
    for (bool compress : {true, false}) {
      std::vector<std::byte> frame;
      amphora::detail::encode_frame(amphora::ConstBytes(reinterpret_cast<const std::byte*>(c.data()), c.size()),
                                    compress, frame);
      put(dir, "frame-" + std::to_string(n++), std::string(reinterpret_cast<const char*>(frame.data()), frame.size()));
    }
}

// zstd frames as a payload holds them, after the two bytes fuzz_zstd_frame
// reads the expected content size from (here the frame's own).
void zstd_seeds(const fs::path& dir) {
  int n = 0;
  // Level 1 and 3 in one block run, and level 1 with a block per byte plane
  // (as shuffled chunks are written) where the content splits in four.
  for (const auto& c : chunk_contents())
    for (auto [level, planes] : {std::pair{1, std::size_t{1}}, std::pair{3, std::size_t{1}}, std::pair{1, std::size_t{4}}}) {
      if (c.size() % planes != 0) continue;
      std::vector<std::byte> frame;
      amphora::detail::encode_zstd_frame(amphora::ConstBytes(reinterpret_cast<const std::byte*>(c.data()), c.size()),
                                         level, frame, planes);
      const std::size_t announced = c.size() - 1;  // expected_size: (b0 << 8 | b1) % 70000 + 1
      std::string seed{static_cast<char>(announced >> 8), static_cast<char>(announced & 0xff)};
      put(dir, "frame-" + std::to_string(n++), seed + std::string(reinterpret_cast<const char*>(frame.data()), frame.size()));
    }
}

// Valid payloads for fuzz_payloads: the selector byte, then the file.
void payload_seeds(const fs::path& dir) {
  put(dir, "tensor-list-index", std::string(1, '\0') + R"([["uint8",[2,3],0],["float32",[4],64]])");
  auto offsets = [](std::vector<std::int64_t> o) {
    std::int64_t n = static_cast<std::int64_t>(o.size());
    return amphora::make_npy_header(amphora::DType::int64, std::span<const std::int64_t>(&n, 1), 64) +
           std::string(reinterpret_cast<const char*>(o.data()), o.size() * 8);
  };
  put(dir, "strings", std::string(1, '\1') + offsets({0, 10, 10, 100}));
  put(dir, "record-column", std::string(1, '\2') + offsets({0, 7, 16}));
  put(dir, "map-keys", std::string(1, '\3') + offsets({0, 1, 2}));
  put(dir, "tensor-column-index", std::string(1, '\4') + R"([["uint8",[2,3],0],["float32",[],64]])");
  put(dir, "map-column-keys", std::string(1, '\5') + offsets({0, 1, 3}));
  const std::int64_t boxes[] = {2, 4};
  put(dir, "fixed-column", std::string(1, '\6') + amphora::make_npy_header(amphora::DType::float32, boxes, 64) +
                               std::string(32, '\0'));
  const std::int64_t two = 2;
  put(dir, "member-array", std::string(1, '\7') + amphora::make_npy_header(amphora::DType::float32, std::span<const std::int64_t>(&two, 1), 64) +
                               std::string(8, '\0'));
}

// .npz archives of small matrices in each layout, as `amphora export` writes them.
void npz_seeds(const fs::path& dir) {
  using amphora::Tensor;
  auto i32 = [](std::vector<std::int32_t> v) { return Tensor::from_values<std::int32_t>({static_cast<std::int64_t>(v.size())}, v); };
  Tensor data = Tensor::from_values<double>({3}, std::vector<double>{1.5, -2, 3});
  fs::create_directories(dir);
  amphora::write_npz(amphora::SparseMatrix::csr(2, 3, data, i32({0, 2, 1}), i32({0, 2, 3})), dir / "csr.npz");
  amphora::write_npz(amphora::SparseMatrix::csc(3, 2, data, i32({0, 2, 1}), i32({0, 2, 3})), dir / "csc.npz");
  amphora::write_npz(amphora::SparseMatrix::coo(4, 4, data, i32({0, 3, 1}), i32({2, 2, 0})), dir / "coo.npz");

  // Deflated archives, as scipy.sparse.save_npz(compressed=True) writes them:
  // a 64 x 64 CSR of ones, and a decompression bomb of duplicates (a 1 x 1
  // COO of 400,000 zeros: 7 KB inflating to 6.4 MB), which must be refused
  // before it is inflated (issue 21, item 10).
  auto npy = [](const char* descr, std::vector<std::int64_t> shape, std::string data) {
    return amphora::make_npy_header(descr, shape, 64) + data;
  };
  auto deflated = [&](const fs::path& file, const std::vector<std::pair<std::string, std::string>>& members) {
    int error = 0;
    zip_t* zip = zip_open(file.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
    if (!zip) throw std::runtime_error("cannot create " + file.string());
    for (const auto& [name, bytes] : members) {
      zip_source_t* src = zip_source_buffer(zip, bytes.data(), bytes.size(), 0);
      const zip_int64_t at = zip_file_add(zip, name.c_str(), src, ZIP_FL_OVERWRITE);
      zip_set_file_compression(zip, static_cast<zip_uint64_t>(at), ZIP_CM_DEFLATE, 9);
    }
    if (zip_close(zip) != 0) throw std::runtime_error("cannot write " + file.string());
  };
  auto repeat = [](auto value, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out.append(reinterpret_cast<const char*>(&value), sizeof value);
    return out;
  };
  std::string indptr, indices;
  for (std::int32_t r = 0; r <= 64; ++r) {
    const std::int32_t at = r * 64;
    indptr.append(reinterpret_cast<const char*>(&at), 4);
  }
  for (std::int32_t k = 0; k < 64 * 64; ++k) {
    const std::int32_t col = k % 64;
    indices.append(reinterpret_cast<const char*>(&col), 4);
  }
  const std::string shape64 = repeat(std::int64_t{64}, 2);
  // (The members hold their bytes until zip_close: each string lives in `members`.)
  const std::vector<std::pair<std::string, std::string>> ones = {
      {"format.npy", npy("|S3", {}, "csr")},
      {"shape.npy", npy("<i8", {2}, shape64)},
      {"data.npy", npy("<f8", {64 * 64}, repeat(1.0, 64 * 64))},
      {"indices.npy", npy("<i4", {64 * 64}, indices)},
      {"indptr.npy", npy("<i4", {65}, indptr)}};
  deflated(dir / "ones-deflated.npz", ones);
  constexpr std::int64_t kDuplicates = 400'000;
  const std::vector<std::pair<std::string, std::string>> bomb = {
      {"format.npy", npy("|S3", {}, "coo")},
      {"shape.npy", npy("<i8", {2}, repeat(std::int64_t{1}, 2))},
      {"data.npy", npy("<f8", {kDuplicates}, repeat(0.0, kDuplicates))},
      {"row.npy", npy("<i4", {kDuplicates}, repeat(std::int32_t{0}, kDuplicates))},
      {"col.npy", npy("<i4", {kDuplicates}, repeat(std::int32_t{0}, kDuplicates))}};
  deflated(dir / "duplicates-bomb.npz", bomb);
}

// Recipes and stored bytes as encode_array makes them: recipe JSON, NUL, bytes.
void encoding_seeds(const fs::path& dir) {
  std::vector<std::int64_t> sorted = {-5, 0, 0, 7, 300, 70000};
  const amphora::ConstBytes raw(reinterpret_cast<const std::byte*>(sorted.data()), sorted.size() * 8);
  int n = 0;
  for (amphora::ArrayEncoding e : {amphora::ArrayEncoding{.delta = true, .squeeze = true},
                                   amphora::ArrayEncoding{.squeeze = true, .shuffle = true},
                                   amphora::ArrayEncoding{.delta = true, .squeeze = true, .shuffle = true}}) {
    auto enc = amphora::encode_array(amphora::DType::int64, raw, e);
    put(dir, "recipe-" + std::to_string(n++),
        enc.recipe.dump() + std::string(1, '\0') +
            std::string(reinterpret_cast<const char*>(enc.bytes.data()), enc.bytes.size()));
  }
  std::vector<double> decimals = {473.07, 0.5, -12.25, 100.0};
  const amphora::ConstBytes fraw(reinterpret_cast<const std::byte*>(decimals.data()), decimals.size() * 8);
  for (bool shuffle : {false, true}) {
    auto enc = amphora::encode_array(amphora::DType::float64, fraw, {.decimal = true, .squeeze = true, .shuffle = shuffle});
    put(dir, "recipe-" + std::to_string(n++),
        enc.recipe.dump() + std::string(1, '\0') +
            std::string(reinterpret_cast<const char*>(enc.bytes.data()), enc.bytes.size()));
  }
}

void csv_seeds(const fs::path& dir) {
  put(dir, "typed.csv", "id,price,ok,name\n1,1.5,true,\"a,b\"\n-2,,False,\"say \"\"hi\"\"\"\n3,nan,TRUE,\"two\nlines\"\n");
  put(dir, "crlf.csv", "\xEF\xBB\xBF" "a,b\r\n\r\n1,\xE6\x9D\xB1\r\n,x\r\n");
}

void jsonl_seeds(const fs::path& dir) {
  put(dir, "coco.jsonl",
      "{\"filepath\":\"a.jpg\",\"width\":640,\"bboxes\":[[1.5,2.25,3,4]],\"labels\":[\"cat\"],\"iscrowd\":false}\n"
      "{\"width\":480,\"filepath\":\"b.jpg\",\"bboxes\":[],\"labels\":[],\"extra\":{\"k\":null}}\n");
  put(dir, "mixed.jsonl", "1\n\"s\"\n[1,\"two\",null,{\"x\":1e-300}]\n\r\n{\"a\":18446744073709551615,\"b\":-1}\n");
}

// Programs for fuzz_composite (its input format is in fuzz_composite.cpp:
// build()): one byte picks each operation, the bytes after it its details.
void composite_seeds(const fs::path& dir) {
  auto bytes = [](std::initializer_list<int> b) {
    std::string s;
    for (int v : b) s += static_cast<char>(v);
    return s;
  };
  // Two tensors, a list listing one twice, a map of the lists, an optional of it.
  put(dir, "shared", bytes({0, 2, 132, 136, 0, 1, 200, 4, 2, 0, 0, 1, 1, 0, 4, 3, 2, 0, 2, 1, 0, 2, 0,
                            5, 2, 0, 1, 3, 0, 2, 1, 0, 6, 2, 4}));
  // The declared struct: rows a list of tensors, then a map of such structs.
  put(dir, "struct", bytes({0, 3, 130, 131, 132, 4, 2, 0, 0, 0, 1, 0, 7, 1, 1, 0, 5, 1, 0, 2, 0, 0}));
  // A chain of 70 optionals over an empty tensor: past the 64 levels a reader follows.
  put(dir, "deep-chain", bytes({0, 0, 9, 0, 70}));
  // A ladder of lists, each listing the one below twice: a tree of 127
  // artifacts from 7, which export writes out (a child once per place).
  std::string ladder = bytes({0, 1, 129});
  for (int level = 1; level <= 6; ++level) ladder += bytes({4, 2, level - 1, 0, level - 1, 1, 0});
  put(dir, "ladder", ladder);
  // Children 'a' (a string, exported as a.txt) and 'a.txt' (a list, a directory a.txt).
  put(dir, "role-collision", bytes({1, 3, 'a', 'b', 'c', 4, 1, 0, 0, 0, 8, 7, 2, 0, 0, 1, 1, 0, 1}));
  // A list whose child is then removed, and one whose child's payload has a byte flipped.
  put(dir, "missing-child", bytes({0, 1, 140, 4, 1, 0, 0, 0, 10, 0, 0}));
  put(dir, "flipped-byte", bytes({0, 4, 1, 2, 3, 4, 4, 1, 0, 0, 0, 10, 0, 1, 0, 10, 1}));
}

// Run configurations for fuzz_run_config: the YAML file, then optionally a
// NUL byte and --set assignments, one a line.
void run_config_seeds(const fs::path& dir) {
  put(dir, "steps", "tokenize:\n  lowercase: true\nmodel:\n  top_k: 500\n  alpha: 0.5\n  name: 'x'\n"
                    "  tags: [a, b, 1]\n  nested: {k: [1, {j: null}]}\nempty:\n");
  put(dir, "overrides", std::string("model:\n  top_k: 500\n") + '\0' +
                            "model.top_k=10\nmodel.name=\"quoted\"\ntokenize.x=[1, 2.5, ~]\nbad\n.x=1\nm.k={a: [1, 2]}\n");
  put(dir, "aliases", "s:\n  a: &x [1, two]\n  b: *x\n  c: &y [*x, *x, *x]\n  d: [*y, *y]\n  e: &z {k: *y}\n  f: [*z, *z]\n");
  put(dir, "scalars", "s:\n  a: 0x10\n  b: 1e999\n  c: -0\n  d: +5\n  e: .5\n  f: 18446744073709551615\n"
                      "  g: 18446744073709551616\n  h: \"\\u00e9\\U0001F600\\x41\"\n  i: ''\n  j: ~\n  k: 1_000\n"
                      "  l: -.inf\n  m: 5.\n  n: !!str 5\n  o: |\n    block\n    text\n  p: >-\n    folded\n");
  put(dir, "structure", "%YAML 1.2\n---\ns:\n  ? [complex, key]\n  : 1\n  dup: 1\n  dup: 2\n"
                        "  deep: [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]\n  tagged: !custom x\n...\n");
  // Aliases repeating a 1,000-byte string 81,111 times (under the 100,000
  // values the reader counts): 1.2 KB of YAML that must be refused cheaply.
  std::string bomb = "s:\n  a: &x \"" + std::string(1000, 'A') + "\"\n";
  const char* names[] = {"x", "y", "z", "w", "v"};
  for (int level = 1; level < 5; ++level) {
    bomb += std::string("  l") + std::to_string(level) + ": &" + names[level] + " [";
    for (int k = 0; k < 10; ++k) bomb += std::string(k ? ", *" : "*") + names[level - 1];
    bomb += "]\n";
  }
  bomb += "  f: [*v, *v, *v, *v, *v, *v, *v]\n";
  put(dir, "alias-long-scalar", bomb);
}

// S3 listings: a mode byte (1: multipart uploads), a limit byte, the
// medium's base, the prefix and the cursor (each ended by a NUL), then the
// document a server sent.
void s3_listing_seeds(const fs::path& dir) {
  auto input = [](char mode, char limit, const std::string& base, const std::string& prefix, const std::string& after,
                  const std::string& doc) {
    return std::string{mode, limit} + base + '\0' + prefix + '\0' + after + '\0' + doc;
  };
  const std::string head = R"(<?xml version="1.0" encoding="UTF-8"?>)";
  put(dir, "listing-shallow",
      input(0, 10, "team/", "names/", "",
            head + R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>amphora</Name>)"
                   R"(<Prefix>team%2Fnames%2F</Prefix><MaxKeys>10</MaxKeys><Delimiter>%2F</Delimiter>)"
                   R"(<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>)"
                   R"(<Contents><Key>team%2Fnames%2Fstray.json</Key><Size>2</Size><ETag>&quot;99914b932bd37a50b983c5e7c90ae93b&quot;</ETag></Contents>)"
                   R"(<CommonPrefixes><Prefix>team%2Fnames%2Femb%2F</Prefix></CommonPrefixes>)"
                   R"(<CommonPrefixes><Prefix>team%2Fnames%2F..%2F</Prefix></CommonPrefixes>)"
                   R"(<CommonPrefixes><Prefix>team%2Fnames%2Fa%01b%2F</Prefix></CommonPrefixes></ListBucketResult>)"));
  put(dir, "listing-deep-truncated",
      input(0, 2, "", "objects/sha256/ab/", "objects/sha256/ab/00",
            head + R"(<ListBucketResult><Name>amphora</Name><KeyCount>3</KeyCount><IsTruncated>true</IsTruncated>)"
                   R"(<Contents><Key>objects/sha256/ab/abcd/manifest.json</Key><Size>300</Size></Contents>)"
                   R"(<Contents><Key>objects/sha256/ab/abcd/tensor.npy</Key><Size>4096</Size></Contents>)"
                   R"(<Contents><Key>other/place</Key><Size>1</Size></Contents></ListBucketResult>)"));
  put(dir, "listing-error", input(0, 5, "", "", "", head + "<Error><Code>AccessDenied</Code><Message>no</Message></Error>"));
  put(dir, "uploads",
      input(1, 0, "team/", "", "",
            head + R"(<ListMultipartUploadsResult><Bucket>amphora</Bucket><EncodingType>url</EncodingType>)"
                   R"(<IsTruncated>true</IsTruncated><NextKeyMarker>team%2Fobjects%2Fx</NextKeyMarker>)"
                   R"(<NextUploadIdMarker>2~abc</NextUploadIdMarker>)"
                   R"(<Upload><Key>team%2Fobjects%2Fsha256%2Fab%2Fx%2Fbig.npy</Key><UploadId>2~abc</UploadId>)"
                   R"(<Initiated>2026-11-27T10:00:00.000Z</Initiated></Upload>)"
                   R"(<Upload><Key>elsewhere</Key><UploadId>1</UploadId><Initiated>bad</Initiated></Upload>)"
                   R"(</ListMultipartUploadsResult>)"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  fs::path out = argv[1];
  npy_seeds(out / "npy");
  manifest_seeds(out / "manifest");
  lz4_seeds(out / "lz4_frame");
  zstd_seeds(out / "zstd_frame");
  payload_seeds(out / "payloads");
  npz_seeds(out / "npz");
  encoding_seeds(out / "array_encoding");
  csv_seeds(out / "csv");
  jsonl_seeds(out / "jsonl");
  composite_seeds(out / "composite");
  run_config_seeds(out / "run_config");
  s3_listing_seeds(out / "s3_listing");
  return 0;
}
