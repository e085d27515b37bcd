// Store::migrate: an artifact written by older format versions, rewritten at
// the current ones through the materializers' own loads (and migrations).

#include <amphora/store.hpp>

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
  MigrateResult result;
  if (!name.empty()) (void)version_numbers(name);  // throws InvalidArgument, saying why, for a bad name
  result.from = resolve(ref);
  result.to = result.from;

  // What the tree holds, each distinct artifact once. A child whose
  // materializer is not registered is read by its parent's materializer,
  // which knows its version; whether it is current shows only when saved.
  std::map<std::tuple<std::string, int, int>, std::size_t> outdated;
  bool unknown = false;
  std::set<Digest> seen{result.from};
  std::vector<Digest> pending{result.from};
  while (!pending.empty()) {
    const Digest digest = pending.back();
    pending.pop_back();
    const ArtifactReader artifact = open_artifact(digest);
    const Manifest& manifest = artifact.manifest();
    auto entry = registry().find(manifest.materializer);
    if (!entry)
      unknown = true;
    else
      artifact.require_version(entry->version, entry->origin);  // a newer one cannot be read, so not rewritten
    if (entry && manifest.materializer_version < entry->version)
      ++outdated[{manifest.materializer, manifest.materializer_version, entry->version}];
    for (const auto& child : manifest.children)
      if (seen.insert(child.digest).second) pending.push_back(child.digest);
  }
  for (const auto& [key, count] : outdated)
    result.upgrades.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
  if (outdated.empty() && !unknown) return result;

  const std::string target = name.empty() ? name_in_ref(*this, ref) : std::string(name);
  if (target.empty())
    throw InvalidArgument("'" + std::string(ref) + "' (" + result.from.short_str() +
                          ") is not a name: give the name to record the rewritten artifact under "
                          "(amphora migrate REF --name NAME)");
  const auto value = load_erased(result.from);  // throws, naming the plugin, when unregistered
  const auto entry = registry().find(open_artifact(result.from).manifest().materializer);
  if (!entry) throw Unsupported("the materializer of " + result.from.short_str() + " was unregistered during migrate");
  // Saved unnamed first: a tree that only looked outdated (an unregistered
  // child already current) saves to the digest it had, and gets no version.
  const Digest rewritten = save_erased(*entry, value.get(), SaveOptions{}).digest;
  if (rewritten == result.from) return result;

  nlohmann::json upgraded = nlohmann::json::array();
  for (const auto& u : result.upgrades)
    upgraded.push_back({{"materializer", u.materializer}, {"from", u.from}, {"to", u.to}, {"artifacts", u.artifacts}});
  nlohmann::json provenance = {
      {"migrated_from", {{"digest", result.from.str()}, {"ref", std::string(ref)}, {"upgraded", upgraded}}}};
  const auto named = name_artifact(rewritten, target, provenance);
  result.to = rewritten;
  result.rewritten = true;
  result.name = named.name;
  result.version = named.version;
  return result;
}

}  // namespace amphora
