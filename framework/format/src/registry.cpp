#include <amphora/registry.hpp>

#include <algorithm>
#include <cctype>
#include <cxxabi.h>
#include <mutex>

namespace amphora {

namespace {

// Drops the standard library's spellings a reader never wrote: the ABI
// namespace, std::basic_string<char, ...> for std::string, and default
// template arguments (allocators, comparators, hashes, traits).
std::string tidy_type_name(std::string name) {
  auto replace_all = [&](std::string_view from, std::string_view to) {
    for (std::size_t at = name.find(from); at != std::string::npos; at = name.find(from, at + to.size()))
      name.replace(at, from.size(), to);
  };
  replace_all("std::__cxx11::", "std::");
  replace_all("std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string");
  for (std::string_view dflt : {", std::allocator<", ", std::less<", ", std::hash<", ", std::equal_to<"}) {
    for (std::size_t at = name.find(dflt); at != std::string::npos; at = name.find(dflt, at)) {
      std::size_t end = at + dflt.size();
      for (int depth = 1; end < name.size() && depth > 0; ++end) depth += name[end] == '<' ? 1 : name[end] == '>' ? -1 : 0;
      name.erase(at, end - at);
    }
  }
  replace_all(" >", ">");
  // Sizes in template arguments: std::array<float, 3ul> reads as std::array<float, 3>.
  std::string tidy;
  for (std::size_t i = 0; i < name.size(); ++i) {
    tidy += name[i];
    if (std::isdigit(static_cast<unsigned char>(name[i])) && i + 1 < name.size() && (name[i + 1] == 'u' || name[i + 1] == 'l')) {
      std::size_t start = i;
      while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1]))) --start;
      std::size_t end = i + 1;
      while (end < name.size() && (name[end] == 'u' || name[end] == 'l')) ++end;
      const bool literal = (start == 0 || name[start - 1] == ' ' || name[start - 1] == '<' || name[start - 1] == '-') &&
                           (end == name.size() || name[end] == ',' || name[end] == '>');
      if (literal) i = end - 1;
    }
  }
  return tidy;
}

}  // namespace

std::string type_display_name(const std::type_index& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? tidy_type_name(demangled) : type.name();
  std::free(demangled);
  return out;
}

namespace {

// Dotted lower-case identifiers ("amphora.tensor", "myorg.bbox_records"): the
// name is persisted in every manifest, so it is kept to a spelling that
// survives file systems, shells and other languages.
void validate_materializer_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && name.find('.') != std::string::npos && name.front() != '.' &&
            name.back() != '.' && name.find("..") == std::string::npos;
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw InvalidArgument("invalid materializer name '" + name +
                          "': use dotted lower-case words such as 'myorg.bbox_records'");
}

struct Contribution {
  std::string library;
  void (*contribute)(Registry&);
};

// Never destroyed: libraries register from static initializers, and
// registries may be made while other statics are torn down.
std::mutex& contributions_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<Contribution>& contributions() {
  static auto* all = new std::vector<Contribution>;
  return *all;
}
// Held from "is this library's contribution here yet?" to recording that it
// is, so two threads adding the defaults to one registry cannot both merge
// it. One for all registries: adding defaults is rare, and a per-registry
// lock would change the registry's layout, which plugins see.
std::mutex& defaults_merge_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

}  // namespace

bool register_defaults(std::string_view library, void (*contribute)(Registry&)) {
  if (library.empty() || !contribute) throw InvalidArgument("register_defaults needs a library name and a function");
  std::lock_guard lock(contributions_mutex());
  for (const auto& c : contributions())
    if (c.library == library)
      throw InvalidArgument("default materializers of '" + std::string(library) + "' are registered twice");
  contributions().push_back({std::string(library), contribute});
  return true;
}

std::shared_ptr<Registry> Registry::with_defaults() {
  auto registry = std::make_shared<Registry>();
  registry->add_defaults();
  return registry;
}

void Registry::add_defaults() {
  std::vector<Contribution> pending;
  {
    std::lock_guard lock(contributions_mutex());
    pending = contributions();
  }
  auto added = [&](const std::string& library) {
    std::shared_lock lock(mutex_);
    return std::find(defaults_added_.begin(), defaults_added_.end(), library) != defaults_added_.end();
  };
  for (const auto& c : pending) {
    if (added(c.library)) continue;
    // Into a scratch registry first, so a library whose registration fails
    // halfway, or collides, adds nothing. The contribution runs unlocked: it
    // is the library's code and may make registries of its own.
    Registry scratch;
    try {
      c.contribute(scratch);
      std::lock_guard serial(defaults_merge_mutex());
      if (added(c.library)) continue;
      merge(scratch);
      std::unique_lock lock(mutex_);
      defaults_added_.push_back(c.library);
    } catch (const Error& e) {
      throw InvalidArgument("default materializers of '" + c.library + "': " + e.what());
    }
  }
}

void Registry::merge(const Registry& other) {
  std::shared_lock theirs(other.mutex_);
  std::unique_lock lock(mutex_);
  for (const auto& [name, entry] : other.by_name_) check_new(*entry);
  for (const auto& f : other.formats_) check_new(*f);
  for (const auto& [name, entry] : other.by_name_) {
    by_name_.emplace(name, entry);
    by_type_.emplace(entry->type, entry);
  }
  formats_.insert(formats_.end(), other.formats_.begin(), other.formats_.end());
}

void Registry::check_new(const MaterializerEntry& entry) const {
  if (auto it = by_name_.find(entry.name); it != by_name_.end())
    throw InvalidArgument("materializer name '" + entry.name + "' is registered twice: for " +
                          type_display_name(it->second->type) + " (" + it->second->origin + ") and for " +
                          type_display_name(entry.type) + " (" + entry.origin + ")");
  if (auto it = by_type_.find(entry.type); it != by_type_.end())
    throw InvalidArgument("type " + type_display_name(entry.type) + " already has materializer '" +
                          it->second->name + "' (" + it->second->origin + "); cannot add '" + entry.name + "'");
}

void Registry::check_new(const FileFormat& format) const {
  for (const auto& f : formats_)
    if (f->extension == format.extension)
      throw InvalidArgument("file extension '" + format.extension + "' is already handled by materializer '" +
                            f->materializer + "'");
}

void Registry::add_entry(MaterializerEntry entry) {
  validate_materializer_name(entry.name);
  if (entry.version < 1)
    throw InvalidArgument("materializer '" + entry.name + "' has format version " + std::to_string(entry.version) +
                          "; versions start at 1");
  if (!entry.save || !entry.load) throw InvalidArgument("materializer '" + entry.name + "' lacks save or load");
  std::unique_lock lock(mutex_);
  check_new(entry);
  auto shared = std::make_shared<const MaterializerEntry>(std::move(entry));
  by_name_.emplace(shared->name, shared);
  by_type_.emplace(shared->type, shared);
}

void Registry::add_format(FileFormat format) {
  std::transform(format.extension.begin(), format.extension.end(), format.extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (format.extension.size() < 2 || format.extension.front() != '.')
    throw InvalidArgument("file format extension '" + format.extension + "' must start with a dot");
  std::unique_lock lock(mutex_);
  check_new(format);
  formats_.push_back(std::make_shared<const FileFormat>(std::move(format)));
}

std::shared_ptr<const MaterializerEntry> Registry::for_type(const std::type_index& type) const {
  std::shared_lock lock(mutex_);
  auto it = by_type_.find(type);
  if (it == by_type_.end())
    throw Unsupported("no materializer for type " + type_display_name(type) +
                      ": numbers, strings, JSON and standard containers of them are built in (include "
                      "<amphora/everyday.hpp>); for a type of your own, declare its fields with "
                      "AMPHORA_MATERIALIZE (<amphora/describe.hpp>) or specialize amphora::materializer<T>");
  return it->second;
}

std::shared_ptr<const MaterializerEntry> Registry::find(std::string_view name) const {
  std::shared_lock lock(mutex_);
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

std::shared_ptr<const FileFormat> Registry::format_for(const std::filesystem::path& file) const {
  // Matched on the file name's ending rather than path::extension(), which
  // sees no extension in a name like ".npy".
  auto name = file.filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::shared_lock lock(mutex_);
  for (const auto& f : formats_)
    if (name.ends_with(f->extension)) return f;
  return nullptr;
}

std::vector<std::shared_ptr<const FileFormat>> Registry::formats() const {
  std::shared_lock lock(mutex_);
  return formats_;
}

std::shared_ptr<const FileFormat> Registry::format_of(std::string_view materializer) const {
  std::shared_lock lock(mutex_);
  for (const auto& f : formats_)
    if (f->materializer == materializer) return f;
  return nullptr;
}

std::vector<std::shared_ptr<const MaterializerEntry>> Registry::entries() const {
  std::shared_lock lock(mutex_);
  std::vector<std::shared_ptr<const MaterializerEntry>> out;
  for (const auto& [name, entry] : by_name_) out.push_back(entry);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  return out;
}

}  // namespace amphora
