// The code fingerprint of steps whose build registered none: the identity
// of the program or shared library holding the step's code (docs/FORMAT.md
// §3.8). Coarse, since every rebuild of that file changes it, but never stale.

#include <amphora/buffer.hpp>
#include <amphora/digest.hpp>
#include <amphora/pipeline.hpp>

#include "error_boundary.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <link.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace amphora::detail {

namespace {

struct LoadedObject {
  std::uintptr_t base = 0;
  std::string path;               // empty for the main program
  std::vector<std::uint8_t> build_id;  // the linker's GNU build ID note, when there is one
};

// The NT_GNU_BUILD_ID note among `size` bytes of notes at `notes`.
std::vector<std::uint8_t> build_id_in(const std::uint8_t* notes, std::size_t size) {
  constexpr std::uint32_t kBuildIdNote = 3;  // NT_GNU_BUILD_ID
  auto align4 = [](std::size_t n) { return (n + 3) & ~std::size_t{3}; };
  std::size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) header;
    std::memcpy(&header, notes + at, sizeof header);
    const std::size_t name_at = at + sizeof header;
    const std::size_t desc_at = name_at + align4(header.n_namesz);
    if (desc_at + header.n_descsz > size) break;
    if (header.n_type == kBuildIdNote && header.n_namesz == 4 && std::memcmp(notes + name_at, "GNU", 4) == 0)
      return {notes + desc_at, notes + desc_at + header.n_descsz};
    at = desc_at + align4(header.n_descsz);
  }
  return {};
}

struct Search {
  std::uintptr_t address;
  std::optional<LoadedObject> found;
};

int visit(dl_phdr_info* info, std::size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search.address >= begin && search.address < begin + ph.p_memsz;
  }
  if (!holds) return 0;
  LoadedObject object{info->dlpi_addr, info->dlpi_name ? info->dlpi_name : "", {}};
  for (int i = 0; i < info->dlpi_phnum && object.build_id.empty(); ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_NOTE)
      object.build_id = build_id_in(reinterpret_cast<const std::uint8_t*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
  }
  search.found = std::move(object);
  return 1;
}

constexpr const char* kThisProgram = "/proc/self/exe";

// SHA-256 of the file's bytes, for an object linked without a build ID.
Sha256Value hash_of_file(const std::string& path) {
  try {
    InputFile in = InputFile::open(path);
    Sha256 hash;
    std::vector<std::byte> block(std::size_t{1} << 20);
    while (std::size_t got = in.read(MutableBytes(block.data(), block.size()))) hash.update(block.data(), got);
    return hash.finish();
  } catch (...) {
    // The message names the program's own file rather than /proc/self/exe.
    std::error_code unresolved;
    const std::filesystem::path named =
        path == kThisProgram ? std::filesystem::read_symlink(path, unresolved) : std::filesystem::path(path);
    rethrow_translated(Blame::medium, "cannot fingerprint " + (named.empty() ? path : named.string()));
  }
}

std::string fingerprint_of(const void* anchor) {
  static std::mutex mutex;
  static std::map<std::uintptr_t, std::string> known;  // by load address
  Search search{reinterpret_cast<std::uintptr_t>(anchor), std::nullopt};
  dl_iterate_phdr(visit, &search);
  if (!search.found) {  // not code of any loaded object: the program itself stands in
    search.address = reinterpret_cast<std::uintptr_t>(&fingerprint_of);
    dl_iterate_phdr(visit, &search);
  }
  const std::uintptr_t base = search.found ? search.found->base : 0;
  std::lock_guard lock(mutex);
  if (auto it = known.find(base); it != known.end()) return it->second;
  Sha256Value value;
  if (search.found && !search.found->build_id.empty()) {
    std::string text = "gnu-build-id:";
    text.append(search.found->build_id.begin(), search.found->build_id.end());
    value = Sha256::of(text);
  } else {
    const std::string path = search.found && !search.found->path.empty() ? search.found->path : kThisProgram;
    value = hash_of_file(path);
  }
  return known[base] = std::string(kProgramFingerprintPrefix) + "sha256:" + value.hex();
}

}  // namespace

std::string program_fingerprint(const void* anchor) {
  return translate_errors(Blame::medium, [&] { return fingerprint_of(anchor); });
}

}  // namespace amphora::detail
