// Store::migrate: an artifact written by older format versions, rewritten at
// the current ones through the materializers' own loads (and migrations).

#include <amphora/store.hpp>

#include "store_access.hpp"

#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace amphora {

namespace {

// The name a ref records a new version under: NAME for NAME or NAME@N,
// nothing for a digest or a digest prefix.
std::string name_in_ref(const Store& store, std::string_view ref) {
  if (auto at = ref.find('@'); at != std::string_view::npos) return std::string(ref.substr(0, at));
  if (ref.starts_with("sha256:")) return {};
  try {
    if (!store.version_numbers(ref).empty()) return std::string(ref);
  } catch (const InvalidArgument&) {
  }
  return {};
}

}  // namespace

MigrateResult Store::migrate(std::string_view ref, std::string_view name) {
  // An unregistered root is said as such, before anything else is asked.
  if (!registry().find(open_artifact(ref).manifest().materializer)) (void)load_erased(ref);
  return migrate_with(ref, name, [this](const Digest& digest) {
    const auto entry = registry().find(open_artifact(digest).manifest().materializer);
    try {
      const auto value = load_erased(digest);  // throws, naming the plugin, when unregistered
      return save_erased(*entry, value.get(), SaveOptions{}).digest;
    } catch (const TypeMismatch&) {
      throw;
    } catch (const Unsupported& e) {
      // A container's own artifact (amphora.list, amphora.map, ...) loads
      // only as its C++ type, which a type-erased tool does not have.
      throw Unsupported(std::string(e.what()) + "; a program that has its C++ type migrates it with Store::migrate<T>(ref)");
    }
  });
}

MigrateResult Store::migrate_with(std::string_view ref, std::string_view name,
                                  const std::function<Digest(const Digest&)>& rewrite) {
  MigrateResult result;
  if (!name.empty()) (void)version_numbers(name);  // throws InvalidArgument, saying why, for a bad name
  result.from = resolve(ref);
  result.to = result.from;

  // What the tree holds, each distinct artifact once. A child whose
  // materializer is not registered is read by its parent's materializer,
  // which knows its version; whether it is current shows only when saved.
  // So do records whose struct versions are kept in the metadata of their
  // record list, except the record's own (meta "element", "element_version").
  std::map<std::tuple<std::string, int, int>, std::size_t> outdated;
  std::set<Digest> seen{result.from};
  std::vector<Digest> pending{result.from};
  while (!pending.empty()) {
    const Digest digest = pending.back();
    pending.pop_back();
    const ArtifactReader artifact = open_artifact(digest);
    const Manifest& manifest = artifact.manifest();
    auto entry = registry().find(manifest.materializer);
    if (!entry)
      result.unchecked = true;
    else
      artifact.require_version(entry->version, entry->origin);  // a newer one cannot be read, so not rewritten
    if (entry && manifest.materializer_version < entry->version)
      ++outdated[{manifest.materializer, manifest.materializer_version, entry->version}];
    const auto& meta = manifest.meta;
    if (auto element = meta.find("element"), version = meta.find("element_version");
        element != meta.end() && element->is_string() && version != meta.end() && version->is_number_integer()) {
      auto records = registry().find(element->get<std::string>());
      if (!records)
        result.unchecked = true;
      else if (version->get<int>() < records->version)
        ++outdated[{records->name, version->get<int>(), records->version}];
    }
    if (meta.contains("struct_versions")) result.unchecked = true;
    for (const auto& child : manifest.children)
      if (seen.insert(child.digest).second) pending.push_back(child.digest);
  }
  for (const auto& [key, count] : outdated)
    result.upgrades.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
  if (outdated.empty() && !result.unchecked) return result;

  // Where the rewritten artifact goes: REF's name, unless that would make
  // an older version NAME's latest.
  std::string target(name);
  if (target.empty()) {
    target = name_in_ref(*this, ref);
    if (target.empty())
      throw InvalidArgument("'" + std::string(ref) + "' (" + result.from.short_str() +
                            ") is not a name: give the name to record the rewritten artifact under "
                            "(amphora migrate REF --name NAME)");
    if (ref.find('@') != std::string_view::npos && resolve(target) != result.from)
      throw InvalidArgument("'" + std::string(ref) + "' is not the latest version of '" + target +
                            "': its rewritten copy would become the latest; give --name NAME (" + target +
                            " itself to do that on purpose)");
  }
  const auto numbers_before = version_numbers(target);
  const std::uint64_t latest_before = numbers_before.empty() ? 0 : numbers_before.back();
  const Digest rewritten = rewrite(result.from);
  // A tree that only looked outdated (what the registry cannot judge was
  // current) saves to the digest it had, and gets no version.
  if (rewritten == result.from) return result;
  const std::string overtaken =
      "'" + target + "' got a new version while " + std::string(ref) + " was migrated; run migrate again";

  nlohmann::json upgraded = nlohmann::json::array();
  for (const auto& u : result.upgrades)
    upgraded.push_back({{"materializer", u.materializer}, {"from", u.from}, {"to", u.to}, {"artifacts", u.artifacts}});
  nlohmann::json provenance = {
      {"migrated_from", {{"digest", result.from.str()}, {"ref", std::string(ref)}, {"upgraded", upgraded}}}};
  // Recorded only as the version right after the one seen before rewriting:
  // a save of `target` meanwhile must stay its latest.
  const auto named = detail::StoreAccess::name_artifact(*this, rewritten, target, provenance, nullptr, latest_before);
  if (named.version == 0) throw InvalidArgument(overtaken);
  result.to = rewritten;
  result.rewritten = true;
  result.name = named.name;
  result.version = named.version;
  return result;
}

}  // namespace amphora
