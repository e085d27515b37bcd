// Sparse matrices to and from the .npz archives of scipy.sparse.save_npz.
// The archive is read and written by libzip (zip64, deflate, CRC checks);
// the members are .npy files handled by the npy codec.

#include <amphora/json.hpp>
#include <amphora/npy.hpp>
#include <amphora/sparse.hpp>

#include <zip.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

namespace amphora {

namespace {

// Deflate cannot shrink data by more than about 1032:1; a member claiming
// more is a zip bomb or a lie, refused before anything is allocated.
constexpr std::uint64_t kMaxDeflateRatio = 1100;

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipArchive = std::unique_ptr<zip_t, ZipCloser>;

struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

std::string open_error(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

// Reads member `index` whole into memory, refusing what its sizes cannot
// honestly hold and, before inflating anything, a member declaring more than
// `most` bytes (what the matrix's declared shape can need).
std::shared_ptr<Buffer> read_member(zip_t* zip, zip_uint64_t index, const std::string& where, std::uint64_t most,
                                    const std::string& why_most) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(zip, index, 0, &st) != 0) throw CorruptData(where + ": " + zip_strerror(zip));
  if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
    throw CorruptData(where + ": the archive does not give the member's sizes");
  if (st.comp_method != ZIP_CM_STORE && st.size > (st.comp_size + 1) * kMaxDeflateRatio)
    throw CorruptData(where + ": " + std::to_string(st.size) + " bytes claimed from " + std::to_string(st.comp_size) +
                      " compressed, more than deflate can produce (a zip bomb?)");
  if (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)
    throw CorruptData(where + ": a stored member of " + std::to_string(st.comp_size) + " bytes claims " +
                      std::to_string(st.size));
  if (st.size > most)
    throw CorruptData(where + ": declares " + std::to_string(st.size) + " bytes, more than the " + std::to_string(most) +
                      " " + why_most + " (a decompression bomb?)");
  std::unique_ptr<zip_file_t, ZipFileCloser> file(zip_fopen_index(zip, index, 0));
  if (!file) throw CorruptData(where + ": " + zip_strerror(zip));
  auto buffer = Buffer::allocate(static_cast<std::size_t>(st.size));
  std::uint64_t got = 0;
  while (got < st.size) {
    zip_int64_t n = zip_fread(file.get(), buffer->mutable_data() + got, st.size - got);
    if (n < 0) throw CorruptData(where + ": " + zip_file_strerror(file.get()));
    if (n == 0) break;
    got += static_cast<std::uint64_t>(n);
  }
  if (got != st.size)
    throw CorruptData(where + ": the member ends after " + std::to_string(got) + " of its " + std::to_string(st.size) +
                      " bytes");
  // Reading past the end makes libzip check the CRC of the whole member.
  char probe;
  const zip_int64_t past = zip_fread(file.get(), &probe, 1);
  if (past < 0) throw CorruptData(where + ": " + zip_file_strerror(file.get()));
  if (past > 0)
    throw CorruptData(where + ": the member holds more than the " + std::to_string(st.size) +
                      " bytes its directory entry declares");
  return buffer;
}

std::uint32_t le32(const std::byte* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint64_t le64(const std::byte* p) { return le32(p) | static_cast<std::uint64_t>(le32(p + 4)) << 32; }

// Refuses an archive whose central directory is not where its end record
// says: bytes before the archive, as when two archives are concatenated.
// Readers disagree there (Python's zipfile reads the last archive, shifting
// its offsets; libzip the entries at the unshifted ones, the first's), so
// rather than read a matrix another tool would not, it is refused.
void require_unshifted(ConstBytes archive, const std::string& name) {
  const std::byte* base = archive.data();
  const std::size_t size = archive.size();
  constexpr std::size_t kEnd = 22, kLocator = 20;
  auto signature = [&](std::size_t at, std::uint32_t sig) { return at + 4 <= size && le32(base + at) == sig; };
  // The end record's comment runs to the end of the archive.
  std::size_t end = std::string::npos;
  for (std::size_t back = 0; size >= kEnd + back && back <= 0xFFFF; ++back) {
    const std::size_t at = size - kEnd - back;
    if (signature(at, 0x06054b50) && (static_cast<std::size_t>(base[at + 20]) | static_cast<std::size_t>(base[at + 21]) << 8) == back) {
      end = at;
      break;
    }
  }
  if (end == std::string::npos) return;  // libzip says what is wrong
  std::uint64_t directory_size = le32(base + end + 12), directory_offset = le32(base + end + 16);
  std::uint64_t directory_end = end;
  if (end >= kLocator && signature(end - kLocator, 0x07064b50)) {  // zip64: the sizes are in its end record
    const std::uint64_t record = le64(base + end - kLocator + 8);
    if (record > end - kLocator || !signature(static_cast<std::size_t>(record), 0x06064b50) || record + 56 > size ||
        record + 12 + le64(base + record + 4) != end - kLocator)
      throw CorruptData(name + ": its zip64 end record is not where its locator says (two archives concatenated, or "
                               "bytes prepended?); refused as ambiguous");
    directory_size = le64(base + record + 40);
    directory_offset = le64(base + record + 48);
    directory_end = record;
  }
  if (directory_offset + directory_size != directory_end)
    throw CorruptData(name + ": its central directory ends at byte " + std::to_string(directory_end) +
                      ", not where its end record places it (" + std::to_string(directory_offset + directory_size) +
                      "): bytes come before the archive, as when two archives are concatenated; refused, since zip "
                      "readers disagree on which matrix such a file holds");
}

// The text of the 0-d byte or unicode string array NumPy writes for
// np.array(b"csr") ("|S3") or np.array("csr") ("<U3").
std::string read_format(std::shared_ptr<const Buffer> file, const std::string& where) {
  NpyHeader h = parse_npy_header(file->bytes(), where);
  if (!h.shape.empty()) throw InvalidArgument(where + " is not a single string");
  const bool bytes = h.descr.starts_with("|S") || h.descr.starts_with("S");
  const bool unicode = h.descr.starts_with("<U") || h.descr.starts_with("U");
  if (!bytes && !unicode) throw InvalidArgument(where + " holds '" + h.descr + "', not a string");
  // NumPy pads with NULs and drops them at the end only: "cs\0r" is not "cs".
  std::string text;
  const auto* p = reinterpret_cast<const unsigned char*>(file->data()) + h.data_offset;
  const std::size_t n = file->size() - std::min(file->size(), h.data_offset);
  for (std::size_t k = 0; k < n; k += unicode ? 4 : 1) {
    if (unicode && k + 4 <= n && (p[k + 1] | p[k + 2] | p[k + 3]) != 0) {
      text += '?';  // a character beyond Latin-1 names no format
      continue;
    }
    text += static_cast<char>(p[k]);
  }
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

Tensor widen_to_int64(const Tensor& t) {
  if (t.dtype() != DType::int32) return t;
  auto narrow = t.values<std::int32_t>();
  std::vector<std::int64_t> wide(narrow.begin(), narrow.end());
  return Tensor::from_values<std::int64_t>(t.shape(), wide);
}

// Reads the matrix in an open archive; `name` names it in errors.
SparseMatrix read_archive(zip_t* archive, const std::string& name) {
  std::map<std::string, zip_uint64_t> members;
  const zip_int64_t count = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* entry = zip_get_name(archive, static_cast<zip_uint64_t>(i), 0);
    if (entry) members.emplace(entry, static_cast<zip_uint64_t>(i));
  }
  // Members are bounded before they are inflated: the format and shape are
  // a few bytes, and the shape bounds the rest. A .npy header takes at most
  // this much (NumPy's own limit for what it reads by default is 10,000).
  constexpr std::uint64_t kHeaderBytes = std::uint64_t{1} << 16;
  auto member = [&](const std::string& key, std::uint64_t most,
                    const std::string& why_most) -> std::optional<std::shared_ptr<Buffer>> {
    auto it = members.find(key + ".npy");
    if (it == members.end()) return std::nullopt;
    return read_member(archive, it->second, name + ": member '" + key + ".npy'", most, why_most);
  };
  auto required = [&](const std::string& key, std::uint64_t most, const std::string& why_most) {
    auto bytes = member(key, most, why_most);
    if (!bytes)
      throw InvalidArgument(name + " is not a scipy.sparse .npz: it has no '" + key + ".npy' member");
    return read_npy(std::move(*bytes), name + ": member '" + key + ".npy'");
  };

  auto format_bytes = member("format", kHeaderBytes + 64, "a format name needs");
  if (!format_bytes) throw InvalidArgument(name + " is not a scipy.sparse .npz: it has no 'format.npy' member");
  const std::string format_text = read_format(std::move(*format_bytes), name + ": member 'format.npy'");
  if (format_text == "bsr" || format_text == "dia" || format_text == "lil" || format_text == "dok")
    throw Unsupported(name + " holds a " + format_text + " matrix; Amphora stores csr, csc and coo (convert with "
                      ".tocsr() first)");
  SparseFormat format{};
  try {
    format = parse_sparse_format(format_text);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(name + ": member 'format.npy' names the sparse format '" + printable(format_text) +
                          "', not csr, csc or coo");
  }

  Tensor shape = required("shape", kHeaderBytes + 2 * 8, "two dimensions need");
  if (shape.ndim() != 1 || shape.num_elements() != 2)
    throw InvalidArgument(name + ": 'shape.npy' does not hold two dimensions");
  std::array<std::int64_t, 2> dims{};
  for (int k = 0; k < 2; ++k) {
    switch (shape.dtype()) {
      case DType::int64: dims[k] = shape.values<std::int64_t>()[k]; break;
      case DType::int32: dims[k] = shape.values<std::int32_t>()[k]; break;
      default: throw InvalidArgument(name + ": 'shape.npy' holds " + std::string(dtype_name(shape.dtype())) +
                                     ", not integers");
    }
  }

  if (dims[0] < 0 || dims[1] < 0)
    throw InvalidArgument(name + ": 'shape.npy' holds a negative dimension (" + std::to_string(dims[0]) + ", " +
                          std::to_string(dims[1]) + ")");
  // Stored entries beyond the matrix's cells can only be duplicates, which
  // SciPy allows but no writer needs that many of: past the cells they are
  // what a decompression bomb is made of (a 1 x 1 matrix of 134 million
  // duplicate zeros deflates to 1.5 MB).
  const unsigned __int128 cells = static_cast<unsigned __int128>(dims[0]) * static_cast<unsigned __int128>(dims[1]);
  const std::uint64_t entries_most = cells > (std::uint64_t{1} << 60) ? (std::uint64_t{1} << 60) : static_cast<std::uint64_t>(cells);
  const std::string shape_text = std::to_string(dims[0]) + " x " + std::to_string(dims[1]);
  const std::string for_entries = "that the " + std::to_string(entries_most) + " cells of a " + shape_text +
                                  " matrix need";
  constexpr std::uint64_t kWidest = 16;  // complex128, the widest element NumPy writes here
  const std::uint64_t entry_bytes = kHeaderBytes + entries_most * kWidest;
  const bool coo = format == SparseFormat::coo;
  Tensor data = required("data", entry_bytes, for_entries);
  Tensor first = required(coo ? "row" : "indices", entry_bytes, for_entries);
  const std::uint64_t pointers = static_cast<std::uint64_t>(format == SparseFormat::csc ? dims[1] : dims[0]) + 1;
  Tensor second = required(coo ? "col" : "indptr", coo ? entry_bytes : kHeaderBytes + pointers * 8,
                           coo ? for_entries : "that " + std::to_string(pointers) + " index pointers need");
  if (data.num_elements() > entries_most)
    throw InvalidArgument(name + ": holds " + std::to_string(data.num_elements()) + " stored entries for a " +
                          shape_text + " matrix, more than its cells (duplicates past that are refused; "
                          "sum_duplicates() them first)");
  if (first.dtype() != second.dtype()) {  // SciPy may mix int32 and int64; one dtype is stored
    first = widen_to_int64(first);
    second = widen_to_int64(second);
  }
  try {
    switch (format) {
      case SparseFormat::csr: return SparseMatrix::csr(dims[0], dims[1], data, first, second);
      case SparseFormat::csc: return SparseMatrix::csc(dims[0], dims[1], data, first, second);
      case SparseFormat::coo: return SparseMatrix::coo(dims[0], dims[1], data, first, second);
    }
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(name + ": " + e.what());
  }
  throw InvalidArgument(name + ": unknown sparse format");
}

}  // namespace

SparseMatrix read_npz(const std::filesystem::path& file) {
  // Read whole with the checks every import gets (a regular file, a FIFO
  // refused at once, a file that shrinks meanwhile reported): libzip then
  // reads from memory and never opens the path itself.
  auto bytes = Buffer::read_file(file);
  return read_npz(bytes->bytes(), file.string());
}

SparseMatrix read_npz(ConstBytes archive, std::string_view where) {
  const std::string name(where);
  // libzip takes zero bytes for an empty archive; an empty file is no .npz.
  if (archive.empty()) throw CorruptData(name + " is not a readable .npz (zip) archive: it is empty");
  require_unshifted(archive, name);
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(archive.data(), archive.size(), 0, &error);
  if (!source) {
    std::string text = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw IoError(name + ": " + text);
  }
  ZipArchive zip(zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!zip) {
    zip_source_free(source);
    std::string text = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw CorruptData(name + " is not a readable .npz (zip) archive: " + text);
  }
  zip_error_fini(&error);
  return read_archive(zip.get(), name);
}

void write_npz(const SparseMatrix& matrix, const std::filesystem::path& file) {
  const std::string name = file.string();
  if (matrix.dtype() == DType::bfloat16)
    throw Unsupported("cannot write " + name + ": NumPy has no bfloat16, so a .npz cannot hold this matrix's data");
  int code = 0;
  ZipArchive zip(zip_open(file.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!zip) throw IoError("cannot create " + name + ": " + open_error(code));

  const bool coo = matrix.format() == SparseFormat::coo;
  const std::array<std::int64_t, 2> dims = matrix.shape();
  const Tensor shape = Tensor::from_values<std::int64_t>({2}, std::span<const std::int64_t>(dims));
  const std::string format_header = make_npy_header("|S3", std::span<const std::int64_t>(), 64);
  const std::string_view format_text = to_string(matrix.format());

  // Headers and fragments must live until zip_close has written them.
  std::vector<std::string> headers;
  headers.reserve(5);
  std::vector<std::array<zip_buffer_fragment_t, 2>> fragments;
  fragments.reserve(5);
  auto add = [&](const char* member, ConstBytes header, ConstBytes body) {
    // libzip only reads the fragments; its struct has no const member.
    auto fragment = [](ConstBytes b) {
      return zip_buffer_fragment_t{reinterpret_cast<zip_uint8_t*>(const_cast<std::byte*>(b.data())), b.size()};
    };
    fragments.push_back({fragment(header), fragment(body)});
    zip_source_t* source = zip_source_buffer_fragment(zip.get(), fragments.back().data(), 2, 0);
    if (!source) throw IoError("cannot write " + name + ": " + zip_strerror(zip.get()));
    zip_int64_t index = zip_file_add(zip.get(), member, source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      throw IoError("cannot write " + name + ": " + zip_strerror(zip.get()));
    }
    // Stored, not deflated: numpy.load then reads the arrays at disk speed.
    if (zip_set_file_compression(zip.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0)
      throw IoError("cannot write " + name + ": " + zip_strerror(zip.get()));
  };
  auto add_array = [&](const char* member, const Tensor& t) {
    headers.push_back(make_npy_header(t.dtype(), t.shape(), 64));
    add(member, std::as_bytes(std::span<const char>(headers.back())), ConstBytes(t.data(), t.nbytes()));
  };
  add_array("data.npy", matrix.data());
  add_array(coo ? "row.npy" : "indices.npy", coo ? matrix.row() : matrix.indices());
  add_array(coo ? "col.npy" : "indptr.npy", coo ? matrix.col() : matrix.indptr());
  add_array("shape.npy", shape);
  add("format.npy", std::as_bytes(std::span<const char>(format_header)),
      std::as_bytes(std::span<const char>(format_text.data(), format_text.size())));
  // libzip writes a temporary file beside `file` and renames it into place.
  if (zip_close(zip.get()) != 0) throw IoError("cannot write " + name + ": " + zip_strerror(zip.get()));
  (void)zip.release();
}

}  // namespace amphora
