#include <amphora/builtins.hpp>
#include <amphora/everyday.hpp>
#include <amphora/npy.hpp>
#include <amphora/record_collection.hpp>
#include <amphora/record_list.hpp>
#include <amphora/sparse.hpp>
#include <amphora/table.hpp>
#include <amphora/tensor.hpp>

#include <algorithm>

namespace amphora {

namespace {

// Lists and objects on the deepest path of `v` (a parsed document, at most 64).
int container_nesting(const nlohmann::json& v) {
  if (!v.is_structured()) return 0;
  int deepest = 0;
  for (const auto& item : v) deepest = std::max(deepest, container_nesting(item));
  return deepest + 1;
}

// Containers whose element type only a C++ program knows, each a tag type
// with a materializer of its own: registered so that `amphora verify` checks
// their structure and `amphora show` names them; loading goes through the
// container's own type.
struct AnyList {};
struct AnyMap {};
struct AnyOptional {};
struct AnyRecordList {};

template <class Tag>
struct GenericContainer {
  static constexpr int version = 1;
  static void save(const Tag&, ArtifactWriter&) {
    throw Unsupported(std::string(materializer<Tag>::name) + " artifacts are saved from their C++ type");
  }
  static Tag load(const ArtifactReader& in) {
    throw Unsupported(in.label() + " is an " + std::string(materializer<Tag>::name) +
                      "; load it with its C++ type, for example " + std::string(materializer<Tag>::example));
  }
};

}  // namespace

template <>
struct materializer<AnyList> : GenericContainer<AnyList> {
  static constexpr std::string_view name = "amphora.list";
  static constexpr std::string_view example = "store.load<std::vector<T>>(ref)";
  static void validate(const ArtifactReader& in) { (void)detail::checked_count(in, "items/"); }
};
template <>
struct materializer<AnyMap> : GenericContainer<AnyMap> {
  static constexpr std::string_view name = "amphora.map";
  static constexpr std::string_view example = "store.load<std::map<std::string, T>>(ref)";
  static void validate(const ArtifactReader& in) { (void)detail::check_map(in); }
};
template <>
struct materializer<AnyOptional> : GenericContainer<AnyOptional> {
  static constexpr std::string_view name = "amphora.optional";
  static constexpr std::string_view example = "store.load<std::optional<T>>(ref)";
  static void validate(const ArtifactReader& in) { (void)detail::check_optional(in); }
};
template <>
struct materializer<AnyRecordList> : GenericContainer<AnyRecordList> {
  static constexpr std::string_view name = "amphora.record_list";
  static constexpr std::string_view example = "store.load<std::vector<T>>(ref) for the declared struct T";
  static void validate(const ArtifactReader& in) {
    (void)in.meta<std::string>("element");
    (void)in.meta<int>("element_version");
    (void)in.meta<std::size_t>("count");
  }
};

namespace {

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
        // A document stored whole may nest 60 lists or objects (its file is
        // written with the canonical writer's margin below the 64 every
        // reader takes); valid JSON nested deeper is not "not valid JSON".
        constexpr int kMaxDocumentNesting = 60;
        auto too_deep = [&]() {
          return InvalidArgument(file.string() + ": nests lists or objects deeper than " +
                                 std::to_string(kMaxDocumentNesting) +
                                 " levels, the most a JSON document holds (records imported from JSON lines, "
                                 ".jsonl, may nest 256)");
        };
        nlohmann::json doc;
        try {
          doc = parse_untrusted_json(read_whole_file(file));
        } catch (const CorruptData& e) {
          if (std::string_view(e.what()).starts_with("nesting deeper")) throw too_deep();
          throw InvalidArgument(file.string() + " is not valid JSON: " + e.what());
        }
        if (container_nesting(doc) > kMaxDocumentNesting) throw too_deep();
        return doc;
      },
      [](const nlohmann::json& doc, const std::filesystem::path& file) { write_text_file(doc.dump(2) + "\n", file); });
  registry.add<std::vector<std::string>>("built-in");
  registry.add<std::vector<Tensor>>("built-in");
  registry.add<AnyList>("built-in");
  registry.add<AnyMap>("built-in");
  registry.add<AnyOptional>("built-in");
  registry.add<AnyRecordList>("built-in");
}

bool detail::builtins_are_defaults() {
  static const bool registered = register_defaults("amphora.builtins", &register_builtins);
  return registered;
}

namespace {
// Registered when the library loads, whether or not a header asked.
const bool registered_on_load = detail::builtins_are_defaults();
}  // namespace

}  // namespace amphora
