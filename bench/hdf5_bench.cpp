// Section "hdf5": Amphora against Debian's libhdf5 (the C API, in this
// process) on the same tensors: five data sets shaped like users' data, each
// `--mib` MiB of 64 columns. For each: a raw save against a contiguous
// dataset written with H5Dwrite; eager and mapped loads followed by one pass
// against H5Dread followed by the same pass; LZ4 and zstd (with the
// transforms that suit the data) against a chunked dataset with shuffle +
// deflate level 1 and, where Debian's hdf5-filter-plugin-blosc is installed,
// Blosc with LZ4 and zstd; and opening by name and reading 10 rows against
// H5Fopen + a hyperslab read. Built only when libhdf5-dev is installed
// (scripts/install-deps.sh --bench, which `make bench` runs).

#include "bench_common.hpp"

#include <cmath>
#include <optional>

#ifdef AMPHORA_BENCH_HDF5
#include <hdf5.h>
#endif

namespace amphora_bench {

#ifndef AMPHORA_BENCH_HDF5

void run_hdf5(const Options&, Verdicts&) {
  std::printf("\nHDF5: skipped, this build found no libhdf5 (scripts/install-deps.sh --bench installs it; `make bench` "
              "runs that and configures again)\n");
}

#else

namespace {

using amphora::ArrayEncoding;
using amphora::Compression;
using amphora::DType;
using amphora::Tensor;
using amphora::TensorOptions;

constexpr std::int64_t kColumns = 64;
constexpr unsigned kBloscFilter = 32001;  // the id registered for Blosc with The HDF Group
constexpr unsigned kBloscLz4 = 1, kBloscZstd = 5;  // Blosc's compressor codes

struct DataSet {
  std::string name, looks_like;
  Tensor tensor;
  TensorOptions small;       // zstd with the transforms that suit this data
  std::string small_label;
  bool compressible;
  // Transforms a user would try on this data, each timed under LZ4 against
  // LZ4 alone: none may make the save more than 1.5x slower.
  std::vector<std::pair<std::string, ArrayEncoding>> encodings;
  // LZ4 with the transform a user after speed picks for this data (HDF5's
  // chunked side has its shuffle too): the one timed against deflate's save.
  ArrayEncoding fast = {};
  std::string fast_label = "lz4";
};

// A standard normal from two uniforms (Box-Muller).
double normal(Rng& rng) {
  const double u = std::max(rng.unit(), 1e-300), v = rng.unit();
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}

template <class T, class F>
Tensor generate(DType dtype, std::int64_t mib, std::uint64_t seed, F value) {
  const std::int64_t rows = (mib << 20) / (kColumns * static_cast<std::int64_t>(sizeof(T)));
  Tensor t = Tensor::zeros(dtype, {rows, kColumns});
  auto v = t.mutable_values<T>();
  amphora::parallel_for(64, [&](std::size_t part) {
    Rng rng(seed * 64 + part);
    const std::size_t begin = v.size() * part / 64, end = v.size() * (part + 1) / 64;
    for (std::size_t i = begin; i < end; ++i) v[i] = value(i, rng);
  });
  return t;
}

std::vector<DataSet> make_data_sets(std::int64_t mib) {
  std::vector<DataSet> sets;
  // Weights of a trained layer: normal, kept at half precision's 10
  // mantissa bits (a checkpoint trained in float16, stored as float32).
  sets.push_back({"float32 weights", "normal(0, 0.05), 10 mantissa bits",
                  generate<float>(DType::float32, mib, 1,
                                  [](std::size_t, Rng& rng) {
                                    float f = static_cast<float>(0.05 * normal(rng));
                                    std::uint32_t bits;
                                    std::memcpy(&bits, &f, 4);
                                    bits &= ~((1u << 13) - 1);
                                    std::memcpy(&f, &bits, 4);
                                    return f;
                                  }),
                  {.compression = Compression::zstd, .encoding = {.shuffle = true}}, "zstd + shuffle", true,
                  {{"shuffle", {.shuffle = true}}}, {.shuffle = true}, "lz4 + shuffle"});
  // Row ids: increasing by 1 to 4, with one in a thousand out of order.
  sets.push_back({"int64 ids", "mostly increasing by 1-4",
                  generate<std::int64_t>(DType::int64, mib, 2,
                                         [](std::size_t i, Rng& rng) {
                                           const auto r = rng.next();
                                           return r % 1000 == 0 ? static_cast<std::int64_t>(r >> 40)
                                                                : static_cast<std::int64_t>(i * 5 / 2 + (r & 3));
                                         }),
                  {.compression = Compression::zstd, .encoding = {.delta = true, .shuffle = true}},
                  "zstd + delta + shuffle", true,
                  {{"delta + shuffle", {.delta = true, .shuffle = true}},
                   {"delta + squeeze", {.delta = true, .squeeze = true}},
                   {"squeeze", {.squeeze = true}}},
                  {.shuffle = true}, "lz4 + shuffle"});
  // Images: 64-pixel-wide rows of smooth regions, blocks of one level with a
  // gentle gradient and a little sensor noise.
  sets.push_back({"uint8 images", "smooth regions, gradients, noise in the last bit",
                  generate<std::uint8_t>(DType::uint8, mib, 3,
                                         [](std::size_t i, Rng& rng) {
                                           const std::size_t x = i % 64, y = i / 64;
                                           const std::size_t block = (y / 48) * 7 + x / 16;
                                           const unsigned level = static_cast<unsigned>((block * 2654435761u) >> 24);
                                           return static_cast<std::uint8_t>((level + x / 4 + (y % 48) / 6 +
                                                                             (rng.next() & 1)) & 0xff);
                                         }),
                  {.compression = Compression::zstd, .encoding = {.delta = true}}, "zstd + delta", true,
                  {{"delta", {.delta = true}}}, {.delta = true}, "lz4 + delta"});
  // Sensor readings: a slow signal plus noise, two decimals.
  sets.push_back({"float64 readings", "slow signal + noise, 2 decimals",
                  generate<double>(DType::float64, mib, 4,
                                   [](std::size_t i, Rng& rng) {
                                     const double v = 20 + 5 * std::sin(static_cast<double>(i / 64) * 1e-4) +
                                                      0.3 * (rng.unit() - 0.5);
                                     return std::round(v * 100) / 100;
                                   }),
                  {.compression = Compression::zstd, .encoding = {.decimal = true, .squeeze = true}},
                  "zstd + decimal + squeeze", true,
                  {{"decimal + squeeze", {.decimal = true, .squeeze = true}},
                   {"decimal + squeeze + shuffle", {.decimal = true, .squeeze = true, .shuffle = true}}}});
  Tensor noise = Tensor::zeros(DType::float32, {(mib << 20) / (kColumns * 4), kColumns});
  fill_random_f32(noise.mutable_values<float>(), 5);
  sets.push_back({"float32 random", "uniform, incompressible", std::move(noise),
                  {.compression = Compression::zstd, .encoding = {.shuffle = true}}, "zstd + shuffle", false,
                  {{"shuffle", {.shuffle = true}}}});
  return sets;
}

// One pass over every element, as a user's first computation would make.
double pass(const Tensor& t) {
  switch (t.dtype()) {
    case DType::float32: return sum_f32(t.values<float>());
    case DType::uint8: return static_cast<double>(sum_u8(t.values<std::uint8_t>()));
    case DType::int64: {
      std::int64_t s = 0;
      for (auto v : t.values<std::int64_t>()) s += v;
      return static_cast<double>(s);
    }
    case DType::float64: {
      double s[4] = {0, 0, 0, 0};
      auto v = t.values<double>();
      std::size_t i = 0;
      for (; i + 4 <= v.size(); i += 4) s[0] += v[i], s[1] += v[i + 1], s[2] += v[i + 2], s[3] += v[i + 3];
      for (; i < v.size(); ++i) s[0] += v[i];
      return s[0] + s[1] + s[2] + s[3];
    }
    default: return 0;
  }
}

hid_t h5_type(DType d) {
  switch (d) {
    case DType::float32: return H5T_IEEE_F32LE;
    case DType::float64: return H5T_IEEE_F64LE;
    case DType::int64: return H5T_STD_I64LE;
    default: return H5T_STD_U8LE;
  }
}
hid_t memory_type(DType d) {
  switch (d) {
    case DType::float32: return H5T_NATIVE_FLOAT;
    case DType::float64: return H5T_NATIVE_DOUBLE;
    case DType::int64: return H5T_NATIVE_INT64;
    default: return H5T_NATIVE_UINT8;
  }
}

[[noreturn]] void h5_failed(const char* what) {
  std::fprintf(stderr, "amphora_bench: HDF5 %s failed\n", what);
  std::exit(1);
}
hid_t check(hid_t id, const char* what) {
  if (id < 0) h5_failed(what);
  return id;
}

// How an HDF5 dataset is laid out: contiguous, or in chunks of about 1 MiB
// (what h5py's own chunk guess comes to for these shapes) through filters.
struct Layout {
  std::string label;
  enum { contiguous, deflate, blosc } kind;
  unsigned blosc_compressor = 0;
};

hid_t creation_properties(const Layout& l, const Tensor& t) {
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  if (l.kind == Layout::contiguous) return dcpl;
  const hsize_t rows = std::max<hsize_t>(1, (1u << 20) / t.row_bytes());
  const hsize_t chunk[2] = {std::min<hsize_t>(rows, static_cast<hsize_t>(t.shape()[0])), kColumns};
  check(H5Pset_chunk(dcpl, 2, chunk), "H5Pset_chunk");
  if (l.kind == Layout::deflate) {
    check(H5Pset_shuffle(dcpl), "H5Pset_shuffle");
    check(H5Pset_deflate(dcpl, 1), "H5Pset_deflate");
  } else {
    // cd_values 0-3 are the plugin's own; then level 5 (Blosc's and
    // PyTables' default), byte shuffle, the compressor.
    const unsigned cd[7] = {0, 0, 0, 0, 5, 1, l.blosc_compressor};
    check(H5Pset_filter(dcpl, kBloscFilter, H5Z_FLAG_MANDATORY, 7, cd), "H5Pset_filter (blosc)");
  }
  return dcpl;
}

double h5_write(const fs::path& file, const Tensor& t, const Layout& l) {
  retire(file);
  touch_scratch();
  auto t0 = Clock::now();
  hid_t f = check(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "H5Fcreate");
  const hsize_t dims[2] = {static_cast<hsize_t>(t.shape()[0]), static_cast<hsize_t>(t.shape()[1])};
  hid_t space = check(H5Screate_simple(2, dims, nullptr), "H5Screate_simple");
  hid_t dcpl = creation_properties(l, t);
  hid_t d = check(H5Dcreate2(f, "data", h5_type(t.dtype()), space, H5P_DEFAULT, dcpl, H5P_DEFAULT), "H5Dcreate2");
  check(H5Dwrite(d, memory_type(t.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()), "H5Dwrite");
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  check(H5Fclose(f), "H5Fclose");
  return seconds_since(t0);
}

// H5Dread of the whole dataset into fresh memory, then the pass; checks the result.
double h5_read_pass(const fs::path& file, const Tensor& want, double want_pass) {
  touch_scratch();
  auto t0 = Clock::now();
  hid_t f = check(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen");
  hid_t d = check(H5Dopen2(f, "data", H5P_DEFAULT), "H5Dopen2");
  auto buffer = amphora::Buffer::allocate(want.nbytes());
  check(H5Dread(d, memory_type(want.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer->mutable_data()), "H5Dread");
  Tensor back = Tensor::Make(want.dtype(), want.shape(), buffer);
  const double p = pass(back);
  const double s = seconds_since(t0);
  H5Dclose(d);
  H5Fclose(f);
  if (p != want_pass || !back.bit_equal(want)) {
    std::fprintf(stderr, "amphora_bench: HDF5 read back other values from %s\n", file.c_str());
    std::exit(1);
  }
  return s;
}

// H5Fopen, a hyperslab of 10 rows at `first`, close.
double h5_rows(const fs::path& file, const Tensor& want, hsize_t first) {
  const hsize_t start[2] = {first, 0}, count[2] = {10, kColumns};
  std::vector<std::byte> out(10 * want.row_bytes());
  auto t0 = Clock::now();
  hid_t f = check(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "H5Fopen");
  hid_t d = check(H5Dopen2(f, "data", H5P_DEFAULT), "H5Dopen2");
  hid_t space = H5Dget_space(d);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t memory = H5Screate_simple(2, count, nullptr);
  check(H5Dread(d, memory_type(want.dtype()), memory, space, H5P_DEFAULT, out.data()), "H5Dread (rows)");
  H5Sclose(memory);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  const double s = seconds_since(t0);
  if (std::memcmp(out.data(), want.data() + first * want.row_bytes(), out.size()) != 0) {
    std::fprintf(stderr, "amphora_bench: HDF5 rows differ in %s\n", file.c_str());
    std::exit(1);
  }
  return s;
}

struct Side {
  double save_s = 0, load_s = 0, mapped_s = 0, rows_s = 0;
  std::uint64_t bytes = 0;
  std::string encoding;  // Amphora's: what the save chose
};

// Row offsets for the row-read timings: spread over the tensor, the same
// for both sides, 64 of them so a median means something.
std::vector<std::int64_t> row_offsets(const Tensor& t) {
  std::vector<std::int64_t> at;
  Rng rng(99);
  for (int k = 0; k < 64; ++k) at.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::size_t>(t.shape()[0] - 10))));
  return at;
}

// Median seconds of saving `set` with `options` into a fresh store.
double amphora_save_seconds(const Options& o, const DataSet& set, const TensorOptions& options) {
  const fs::path dir = o.dir / "hdf5-amphora";
  std::vector<double> saves;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    auto t0 = Clock::now();
    store.save(set.tensor, {.name = "t", .options = options});
    saves.push_back(seconds_since(t0));
  }
  retire(dir);
  return median(saves);
}

Side amphora_side(const Options& o, const DataSet& set, const TensorOptions& options, bool mapped_too,
                  double want_pass) {
  Side side;
  const fs::path dir = o.dir / "hdf5-amphora";
  std::vector<double> saves, loads, mapped, rows;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    auto t0 = Clock::now();
    auto saved = store.save(set.tensor, {.name = "t", .options = options});
    saves.push_back(seconds_since(t0));
    auto stored = store.open_artifact(saved.digest.str());
    side.bytes = stored.manifest().payload_bytes();
    side.encoding = stored.meta<std::string>("encoding");
  }
  auto store = fresh_store(dir);
  auto digest = store.save(set.tensor, {.name = "t", .options = options}).digest;
  for (int r = 0; r < o.repeats; ++r)
    for (bool eager : {true, false}) {
      if (!eager && !mapped_too) continue;
      touch_scratch();
      auto t0 = Clock::now();
      Tensor back = store.load<Tensor>(digest, {.eager = eager});
      const double p = pass(back);
      (eager ? loads : mapped).push_back(seconds_since(t0));
      if (p != want_pass || (r == 0 && !back.bit_equal(set.tensor))) {
        std::fprintf(stderr, "amphora_bench: %s did not round-trip\n", set.name.c_str());
        std::exit(1);
      }
    }
  for (std::int64_t first : row_offsets(set.tensor)) {
    auto t0 = Clock::now();
    Tensor part = amphora::load_tensor_rows(store.open_artifact("t"), first, first + 10);
    rows.push_back(seconds_since(t0));
    if (!part.bit_equal(set.tensor.rows(first, first + 10))) {
      std::fprintf(stderr, "amphora_bench: rows of %s differ\n", set.name.c_str());
      std::exit(1);
    }
  }
  retire(dir);
  side.save_s = median(saves);
  side.load_s = median(loads);
  side.mapped_s = median(mapped);
  side.rows_s = median(rows);
  return side;
}

Side hdf5_side(const Options& o, const DataSet& set, const Layout& layout, double want_pass) {
  Side side;
  const fs::path file = o.dir / "hdf5-peer.h5";
  std::vector<double> saves, loads, rows;
  for (int r = 0; r < o.repeats; ++r) saves.push_back(h5_write(file, set.tensor, layout));
  side.bytes = fs::file_size(file);
  for (int r = 0; r < o.repeats; ++r) loads.push_back(h5_read_pass(file, set.tensor, want_pass));
  for (std::int64_t first : row_offsets(set.tensor)) rows.push_back(h5_rows(file, set.tensor, static_cast<hsize_t>(first)));
  retire(file);
  side.save_s = median(saves);
  side.load_s = median(loads);
  side.rows_s = median(rows);
  return side;
}

void print_row(const std::string& what, const Side& s, std::uint64_t payload, bool mapped) {
  std::printf("  %-44s save %8.1f ms %6.0f MB/s  load+pass %8.1f ms %6.0f MB/s", what.c_str(), s.save_s * 1e3,
              mb_per_s(payload, s.save_s), s.load_s * 1e3, mb_per_s(payload, s.load_s));
  if (mapped) std::printf("  mapped+pass %7.1f ms", s.mapped_s * 1e3);
  std::printf("  %7.1f MB  10 rows %.3f ms\n", static_cast<double>(s.bytes) / 1e6, s.rows_s * 1e3);
}

}  // namespace

void run_hdf5(const Options& o, Verdicts& verdict) {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  const bool blosc = H5Zfilter_avail(kBloscFilter) > 0;
  std::printf("\nHDF5 %u.%u.%u (C API, this process) against Amphora on %lld MiB tensors of %lld columns; median of "
              "%d runs; Blosc filter %s\n",
              major, minor, release, static_cast<long long>(o.mib), static_cast<long long>(kColumns), o.repeats,
              blosc ? "available (level 5, shuffle)" : "not found (Debian: hdf5-filter-plugin-blosc-serial)");
  std::vector<Layout> compressed = {{"HDF5 chunked shuffle + deflate(1)", Layout::deflate}};
  if (blosc) {
    compressed.push_back({"HDF5 chunked blosc:lz4", Layout::blosc, kBloscLz4});
    compressed.push_back({"HDF5 chunked blosc:zstd", Layout::blosc, kBloscZstd});
  }
  for (const DataSet& set : make_data_sets(o.mib)) {
    const std::uint64_t payload = set.tensor.nbytes();
    const double want_pass = pass(set.tensor);
    std::printf("\n%s (%s), %lld x %lld\n", set.name.c_str(), set.looks_like.c_str(),
                static_cast<long long>(set.tensor.shape()[0]), static_cast<long long>(kColumns));
    const Side raw = amphora_side(o, set, {.compression = Compression::none}, true, want_pass);
    print_row("amphora raw", raw, payload, true);
    const Side lz4 = amphora_side(o, set, {.compression = Compression::lz4}, false, want_pass);
    print_row("amphora lz4", lz4, payload, false);
    const bool fast_transform = set.fast_label != "lz4";
    const Side fast =
        fast_transform ? amphora_side(o, set, {.compression = Compression::lz4, .encoding = set.fast}, false, want_pass)
                       : lz4;
    if (fast_transform) print_row("amphora " + set.fast_label, fast, payload, false);
    const Side automatic = amphora_side(o, set, {.compression = Compression::automatic}, false, want_pass);
    print_row("amphora auto (" + automatic.encoding + ")", automatic, payload, false);
    const Side small = amphora_side(o, set, set.small, false, want_pass);
    print_row("amphora " + set.small_label, small, payload, false);
    const Side contiguous = hdf5_side(o, set, {"HDF5 contiguous", Layout::contiguous}, want_pass);
    print_row("HDF5 contiguous", contiguous, payload, false);
    std::vector<Side> peers;
    for (const Layout& l : compressed) {
      peers.push_back(hdf5_side(o, set, l, want_pass));
      print_row(l.label, peers.back(), payload, false);
    }
    const Side& deflate = peers.front();

    std::printf("  ratios (> 1: Amphora faster or smaller)\n");
    auto ratio = [&](const char* what, double r, double target, bool at_most = false) {
      // A third decimal within 1% of the target, where rounding would hide which side it is on.
      std::printf(std::abs(r / target - 1) < 0.01 ? "    %-46s %6.3fx  (target %s %.2fx: %s)\n"
                                                  : "    %-46s %6.2fx  (target %s %.2fx: %s)\n",
                  what, r, at_most ? "<=" : ">=", target, verdict(at_most ? r <= target : r >= target));
    };
    ratio("save raw vs HDF5 contiguous", contiguous.save_s / raw.save_s, 2.0);
    ratio("eager load + pass vs H5Dread + pass", contiguous.load_s / raw.load_s, 1.2);
    ratio("mapped load + pass vs H5Dread + pass", contiguous.load_s / raw.mapped_s, 1.5);
    ratio("open by name + 10 rows, raw: time vs HDF5's", raw.rows_s / contiguous.rows_s, 0.5, true);
    ratio("the same, zstd vs HDF5 deflate: time vs HDF5's", small.rows_s / deflate.rows_s, 0.25, true);
    if (set.compressible) {
      ratio("zstd bytes vs HDF5 deflate bytes", static_cast<double>(small.bytes) / static_cast<double>(deflate.bytes),
            0.9, true);
      ratio("zstd save vs HDF5 deflate save", deflate.save_s / small.save_s, 4.0);
      ratio("zstd load + pass vs HDF5 deflate read + pass", deflate.load_s / small.load_s, 2.0);
      ratio((set.fast_label + " save vs HDF5 deflate save").c_str(), deflate.save_s / fast.save_s, 8.0);
    }
    for (const auto& [label, encoding] : set.encodings) {
      const double with =
          amphora_save_seconds(o, set, {.compression = Compression::lz4, .encoding = encoding});
      ratio(("lz4 save with " + label + " vs lz4 alone: time").c_str(), with / lz4.save_s, 1.5, true);
    }
    for (std::size_t k = 1; k < peers.size(); ++k)
      std::printf("    %-46s save %.2fx, load + pass %.2fx, bytes %.2fx\n",
                  ("zstd vs " + compressed[k].label).c_str(), peers[k].save_s / small.save_s,
                  peers[k].load_s / small.load_s, static_cast<double>(small.bytes) / static_cast<double>(peers[k].bytes));
  }
}

#endif

}  // namespace amphora_bench
