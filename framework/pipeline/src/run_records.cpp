// Reading what runs left behind: run records and the lineage of artifacts.

#include <amphora/pipeline.hpp>

#include "error_boundary.hpp"
#include "store_access.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace amphora {

namespace {
std::vector<nlohmann::json> runs_of(const Store& store, std::vector<std::string>* problems);
std::vector<nlohmann::json> lineage_of(const Store& store, const Digest& digest);
}  // namespace

std::vector<nlohmann::json> list_runs(const Store& store, std::vector<std::string>* problems) {
  return detail::translate_errors(detail::Blame::stored_data, [&] { return runs_of(store, problems); });
}

std::vector<nlohmann::json> lineage(const Store& store, const Digest& digest) {
  return detail::translate_errors(detail::Blame::stored_data, [&] { return lineage_of(store, digest); });
}

namespace {

std::vector<nlohmann::json> runs_of(const Store& store, std::vector<std::string>* problems) {
  const auto& log = detail::StoreAccess::runs(store);
  std::vector<nlohmann::json> runs;
  for (const auto& [pipeline, id] : log.list(problems)) {
    try {
      auto record = log.read(pipeline, id);
      if (!record.contains("steps") || !record["steps"].is_array()) record["steps"] = nlohmann::json::array();
      runs.push_back(std::move(record));
    } catch (const NotFound&) {
      // removed since listed
    } catch (const Error& e) {
      if (problems) problems->push_back(e.what());
    }
  }
  auto key = [](const nlohmann::json& r) {
    auto text = [&](const char* field) {
      auto it = r.find(field);
      return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    return std::make_pair(text("started_at"), text("run"));
  };
  std::sort(runs.begin(), runs.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return runs;
}

std::vector<nlohmann::json> lineage_of(const Store& store, const Digest& digest) {
  // Which step made an artifact is in the name records of its versions.
  std::map<Digest, std::vector<VersionInfo>> by_digest;
  for (auto& info : store.scan_names().versions) by_digest[info.digest].push_back(std::move(info));
  // Breadth first, each artifact queued once however many records list it
  // as an input: linear in the records' input edges.
  std::vector<nlohmann::json> chain;
  std::set<Digest> queued{digest};
  std::vector<Digest> pending{digest};
  static const std::vector<VersionInfo> kNone;
  for (std::size_t next = 0; next < pending.size(); ++next) {
    const Digest d = pending[next];
    nlohmann::json node = {{"digest", d.str()}, {"names", nlohmann::json::array()}};
    node["stored"] = store.contains(d);
    const VersionInfo* made = nullptr;
    auto found = by_digest.find(d);
    for (const auto& info : found != by_digest.end() ? found->second : kNone) {
      node["names"].push_back(info.name + "@" + std::to_string(info.version));
      // The oldest record a step left says who first made it.
      if (!made && info.record.contains("step") && info.record.contains("pipeline")) made = &info;
    }
    if (made) {
      const auto& r = made->record;
      for (const char* field : {"pipeline", "step", "step_version", "output", "run", "params", "inputs", "external", "external_digest", "cache_key"})
        if (r.contains(field)) node[field] = r[field];
      if (r.contains("inputs") && r["inputs"].is_object())
        for (auto it = r["inputs"].begin(); it != r["inputs"].end(); ++it)
          if (it->is_string() && Digest::is_digest(it->get<std::string>()))
            if (Digest input = Digest::parse(it->get<std::string>()); queued.insert(input).second)
              pending.push_back(input);
    }
    chain.push_back(std::move(node));
  }
  return chain;
}

}  // namespace

}  // namespace amphora
