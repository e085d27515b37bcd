// Reading what runs left behind: run records and the lineage of artifacts.

#include <amphora/pipeline.hpp>

#include "error_boundary.hpp"
#include "run_record_scan.hpp"
#include "store_access.hpp"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <set>

namespace amphora {

namespace {
std::vector<nlohmann::json> runs_of(const Store& store, std::vector<std::string>* problems);
std::vector<RunSummary> summaries_of(const Store& store, std::vector<std::string>* problems);
std::vector<nlohmann::json> lineage_of(const Store& store, const Digest& digest);
}  // namespace

void detail::scan_run_record(std::string_view text, const std::string& where,
                             const std::function<void(std::string_view, std::string_view)>& field,
                             const std::function<void(const ScannedStep&)>& step) {
  auto bad = [&](simdjson::error_code e) {
    return CorruptData(where + " is not a valid run record (" + simdjson::error_message(e) + ")");
  };
  simdjson::padded_string padded(text);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object record;
  if (auto e = parser.iterate(padded).get(doc)) throw bad(e);
  if (auto e = doc.get_object().get(record)) throw bad(e);
  for (auto member : record) {
    std::string_view key;
    simdjson::ondemand::value value;
    if (auto e = member.unescaped_key().get(key)) throw bad(e);
    if (auto e = member.value().get(value)) throw bad(e);
    simdjson::ondemand::json_type type;
    if (auto e = value.type().get(type)) throw bad(e);
    if (type == simdjson::ondemand::json_type::string) {
      std::string_view text_value;
      if (auto e = value.get_string().get(text_value)) throw bad(e);
      field(key, text_value);
    } else if (key == "steps" && type == simdjson::ondemand::json_type::array) {
      simdjson::ondemand::array steps;
      if (auto e = value.get_array().get(steps)) throw bad(e);
      for (auto item : steps) {
        simdjson::ondemand::object s;
        if (item.get_object().get(s)) continue;  // not an object: no step
        std::string name, status, ingredients;  // copied: later keys may reuse the parser's string buffer
        for (auto part : s) {
          std::string_view part_key;
          simdjson::ondemand::value part_value;
          if (auto e = part.unescaped_key().get(part_key)) throw bad(e);
          if (auto e = part.value().get(part_value)) throw bad(e);
          std::string_view v;
          if (part_key == "name" && !part_value.get_string().get(v)) name = v;
          else if (part_key == "status" && !part_value.get_string().get(v)) status = v;
          else if (part_key == "ingredients") {
            simdjson::ondemand::object o;
            if (!part_value.get_object().get(o) && !o.raw_json().get(v)) ingredients = v;
          }
        }
        step({name, status, ingredients});
      }
    }
  }
  // Fully read, the document has no current location; text after the object has one.
  const char* rest = nullptr;
  if (!doc.current_location().get(rest)) throw CorruptData(where + " is not a valid run record (text after the object)");
}

std::vector<nlohmann::json> list_runs(const Store& store, std::vector<std::string>* problems) {
  return detail::translate_errors(detail::Blame::stored_data, [&] { return runs_of(store, problems); });
}

std::vector<RunSummary> run_summaries(const Store& store, std::vector<std::string>* problems) {
  return detail::translate_errors(detail::Blame::stored_data, [&] { return summaries_of(store, problems); });
}

nlohmann::json read_run(const Store& store, std::string_view pipeline, std::string_view run) {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    auto record = detail::StoreAccess::runs(store).read(pipeline, run);
    if (!record.contains("steps") || !record["steps"].is_array()) record["steps"] = nlohmann::json::array();
    return record;
  });
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

// One record at a time, each scanned rather than built: memory stays near
// one record's text however many there are and however large.
std::vector<RunSummary> summaries_of(const Store& store, std::vector<std::string>* problems) {
  const auto& log = detail::StoreAccess::runs(store);
  std::vector<RunSummary> runs;
  for (const auto& [pipeline, id] : log.list(problems)) {
    try {
      const std::string where = "run record " + pipeline + "/" + id;
      RunSummary r;
      detail::scan_run_record(
          log.read_text(pipeline, id), where,
          [&](std::string_view key, std::string_view value) {
            if (key == "pipeline") r.pipeline = value;
            else if (key == "run") r.run = value;
            else if (key == "status") r.status = value;
            else if (key == "started_at") r.started_at = value;
            else if (key == "ended_at") r.ended_at = value;
            else if (key == "host") r.host = value;
          },
          [&](const detail::ScannedStep& s) { ++r.steps[std::string(s.status)]; });
      r.stored_as = {pipeline, id};
      runs.push_back(std::move(r));
    } catch (const NotFound&) {
      // removed since listed
    } catch (const Error& e) {
      if (problems) problems->push_back(e.what());
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const RunSummary& a, const RunSummary& b) { return std::tie(a.started_at, a.run) < std::tie(b.started_at, b.run); });
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
