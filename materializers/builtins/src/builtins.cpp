#include <amphora/builtins.hpp>
#include <amphora/everyday.hpp>
#include <amphora/npy.hpp>
#include <amphora/record_collection.hpp>
#include <amphora/record_list.hpp>
#include <amphora/sparse.hpp>
#include <amphora/table.hpp>
#include <amphora/tensor.hpp>


namespace amphora {

namespace {

// Containers whose element type only a C++ program knows. Registered so
// that `amphora verify` checks their structure and `amphora show` names
// them; loading goes through the container's own type.
template <int Kind>
struct GenericContainer {};

template <int Kind>
void add_generic(Registry& registry, std::string_view name, std::string example,
                 std::function<void(const ArtifactReader&)> validate) {
  MaterializerEntry entry;
  entry.name = std::string(name);
  entry.version = 1;
  entry.type = typeid(GenericContainer<Kind>);
  entry.origin = "built-in";
  entry.save = [name = std::string(name)](const void*, ArtifactWriter&) {
    throw Unsupported(name + " artifacts are saved from their C++ type");
  };
  entry.load = [name = std::string(name), example](const ArtifactReader& in) -> std::shared_ptr<void> {
    throw Unsupported(in.label() + " is an " + name + "; load it with its C++ type, for example " + example);
  };
  entry.validate = std::move(validate);
  registry.add_entry(std::move(entry));
}

// An import's input as text: the same checks as a .npy (a regular file, read
// whole, a FIFO refused at once).
std::string read_whole_file(const std::filesystem::path& file) {
  auto bytes = Buffer::read_file(file);
  return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

void write_text_file(const std::string& text, const std::filesystem::path& file) {
  ConstBytes bytes = std::as_bytes(std::span<const char>(text));
  write_file_atomically(file, std::span<const ConstBytes>(&bytes, 1));
}

}  // namespace

void register_builtins(Registry& registry) {
  registry.add<Tensor>("built-in");
  registry.add_file_format<Tensor>(
      ".npy", "NumPy array",
      // read_npy reads into private memory, so a program rewriting or
      // truncating the file meanwhile cannot change what is stored.
      [](const std::filesystem::path& file) { return read_npy(file); },
      [](const Tensor& tensor, const std::filesystem::path& file) { write_npy(tensor, file); });
  registry.add<SparseMatrix>("built-in");
  registry.add_file_format<SparseMatrix>(
      ".npz", "scipy.sparse matrix (scipy.sparse.save_npz)",
      [](const std::filesystem::path& file) { return read_npz(file); },
      [](const SparseMatrix& matrix, const std::filesystem::path& file) { write_npz(matrix, file); });
  registry.add<Table>("built-in");
  registry.add_file_format<Table>(
      ".csv", "CSV table (RFC 4180, header row)", [](const std::filesystem::path& file) { return read_csv(file); },
      [](const Table& table, const std::filesystem::path& file) { write_csv(table, file); },
      [](const std::filesystem::path& file, ArtifactWriter& out) { import_csv(file, out); });
  registry.add<RecordCollection>("built-in");
  registry.add_file_format<RecordCollection>(
      ".jsonl", "JSON lines (one JSON value per line)",
      [](const std::filesystem::path& file) { return RecordCollection::read_jsonl(file); },
      [](const RecordCollection& records, const std::filesystem::path& file) { records.write_jsonl(file); },
      [](const std::filesystem::path& file, ArtifactWriter& out) { import_jsonl(file, out); });
  registry.add<std::string>("built-in");
  registry.add_file_format<std::string>(
      ".txt", "text (any bytes)", [](const std::filesystem::path& file) { return read_whole_file(file); },
      [](const std::string& text, const std::filesystem::path& file) { write_text_file(text, file); });
  registry.add<nlohmann::json>("built-in");
  registry.add_file_format<nlohmann::json>(
      ".json", "JSON document",
      [](const std::filesystem::path& file) {
        try {
          return parse_untrusted_json(read_whole_file(file));
        } catch (const nlohmann::json::exception& e) {
          throw InvalidArgument(file.string() + " is not valid JSON: " + e.what());
        }
      },
      [](const nlohmann::json& doc, const std::filesystem::path& file) { write_text_file(doc.dump(2) + "\n", file); });
  registry.add<std::vector<std::string>>("built-in");
  registry.add<std::vector<Tensor>>("built-in");
  add_generic<0>(registry, "amphora.list", "store.load<std::vector<T>>(ref)",
                 [](const ArtifactReader& in) { (void)detail::checked_count(in, "items/"); });
  add_generic<1>(registry, "amphora.map", "store.load<std::map<std::string, T>>(ref)",
                 [](const ArtifactReader& in) { (void)detail::check_map(in); });
  add_generic<2>(registry, "amphora.optional", "store.load<std::optional<T>>(ref)",
                 [](const ArtifactReader& in) { (void)detail::check_optional(in); });
  add_generic<3>(registry, "amphora.record_list", "store.load<std::vector<T>>(ref) for the declared struct T",
                 [](const ArtifactReader& in) {
                   (void)in.meta<std::string>("element");
                   (void)in.meta<int>("element_version");
                   (void)in.meta<std::size_t>("count");
                 });
}

bool detail::use_builtins_by_default() {
  set_default_registrar([](Registry& registry) { register_builtins(registry); });
  return true;
}

std::shared_ptr<Registry> Registry::with_builtins() {
  auto registry = std::make_shared<Registry>();
  register_builtins(*registry);
  return registry;
}

}  // namespace amphora
