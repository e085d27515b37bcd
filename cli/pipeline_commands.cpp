// `amphora runs`, `why` and `lineage`: what pipeline runs left in a store.

#include "commands.hpp"
#include "output.hpp"

#include <amphora/pipeline.hpp>

#include <cstdio>
#include <iostream>

namespace amphora::cli {

namespace {

// Headlines only: each record is read again when its steps are wanted, so
// memory stays near one record's size however many runs there are.
std::vector<RunSummary> summaries_of(const Store& store) {
  std::vector<std::string> problems;
  auto runs = run_summaries(store, &problems);
  for (const auto& p : problems) warn(p);
  return runs;
}

nlohmann::json record_of(const Store& store, const RunSummary& r) {
  return read_run(store, r.stored_as.first, r.stored_as.second);
}

std::size_t count_status(const RunSummary& run, const std::string& status) {
  auto it = run.steps.find(status);
  return it == run.steps.end() ? 0 : it->second;
}

// The store, or with --remote NAME its remote (where runs on other machines
// that share it as their cache left their records).
Store store_or_remote(const Args& a) {
  Store store = open_store(a);
  return a.remote.empty() ? store : store.remote_store(a.remote);
}

// One line per step: status, duration, name, and why.
void print_steps(const nlohmann::json& run, const std::string& marked = {}) {
  std::cout << "run " << printable(text_field(run, "run")) << " of " << printable(text_field(run, "pipeline")) << ": "
            << printable(text_field(run, "status"));
  if (auto host = text_field(run, "host"); !host.empty()) std::cout << " on " << printable(host);
  std::cout << "\n";
  for (const auto& s : run["steps"]) {
    if (!s.is_object()) continue;
    auto name = text_field(s, "name");
    auto status = text_field(s, "status");
    char time[32] = "";
    if (auto d = s.find("duration"); d != s.end() && d->is_number())
      std::snprintf(time, sizeof time, "%8.3f s", d->get<double>());
    std::cout << (name == marked ? "* " : "  ") << printable(status)
              << std::string(8 - std::min<std::size_t>(8, status.size()), ' ') << time << "  " << printable(name);
    auto reason = text_field(s, "reason");
    if (!reason.empty()) std::cout << "  (" << one_line(reason) << ")";
    if (auto cache = text_field(s, "cache"); !cache.empty() && cache != "local")
      std::cout << "  [remote '" << printable(cache) << "']";
    auto error = text_field(s, "error");
    if (!error.empty()) std::cout << "\n      error: " << one_line(error);
    std::cout << "\n";
  }
}

// "12:00:01 for 0.25 s", from two ISO timestamps (same day or not: only the
// seconds within the minute matter for a short run; long ones show the end).
std::string when(const RunSummary& run) {
  const std::string& start = run.started_at;
  const std::string& end = run.ended_at;
  std::string out = start.size() >= 19 ? start.substr(0, 10) + " " + start.substr(11, 8) : start;
  if (!end.empty() && end.size() >= 19) out += " .. " + end.substr(11, 8);
  return out;
}

}  // namespace

int cmd_runs(const Args& a) {
  Store store = store_or_remote(a);
  auto runs = summaries_of(store);
  if (a.explain) {
    if (runs.empty()) throw NotFound("no runs recorded in store " + store.path().string());
    print_steps(record_of(store, runs.back()));
    return 0;
  }
  if (a.json) {
    // The array json_text would print, one record at a time: each record's
    // lines indented once more (no JSON string holds a raw line break).
    std::size_t printed = 0;
    for (const auto& r : runs) {
      nlohmann::json record;
      try {
        record = record_of(store, r);
      } catch (const Error& e) {  // removed or damaged since it was summarized
        warn(e.what());
        continue;
      }
      std::string indented = printed++ ? ",\n  " : "[\n  ";
      for (char c : json_text(record)) {
        indented += c;
        if (c == '\n') indented += "  ";
      }
      std::cout << indented;
    }
    std::cout << (printed ? "\n]\n" : "[]\n");
    return 0;
  }
  if (runs.empty()) {
    std::cout << "no runs recorded\n";
    return 0;
  }
  for (const auto& r : runs) {
    std::cout << printable(r.run) << "  " << printable(r.pipeline) << "  " << printable(r.status) << "  " << when(r)
              << "  " << count_status(r, "ran") << " ran, " << count_status(r, "cached") << " cached";
    if (auto n = count_status(r, "failed")) std::cout << ", " << n << " failed";
    if (auto n = count_status(r, "skipped")) std::cout << ", " << n << " skipped";
    if (!r.host.empty()) std::cout << "  on " << printable(r.host);
    std::cout << "\n";
  }
  return 0;
}

int cmd_why(const Args& a) {
  Store store = store_or_remote(a);
  const std::string& ref = *a.ref;
  auto runs = summaries_of(store);
  // A run id, or a pipeline's name: that run, or the pipeline's latest.
  for (auto it = runs.rbegin(); it != runs.rend(); ++it)
    if (it->run == ref || it->pipeline == ref) {
      print_steps(record_of(store, *it));
      return 0;
    }
  // An artifact: the latest run of the step that made it.
  amphora::Digest digest;
  try {
    digest = store.resolve(ref);
  } catch (const NotFound& e) {
    throw NotFound(std::string(e.what()) + "; it is no run id or pipeline name either (amphora runs lists them)");
  }
  auto chain = lineage(store, digest);
  const auto& made = chain.front();
  if (!made.contains("step"))
    throw NotFound("'" + ref + "' was not made by a pipeline step (it is no run id or pipeline name either)");
  auto pipeline = text_field(made, "pipeline");
  auto step = text_field(made, "step");
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->pipeline != pipeline) continue;
    const nlohmann::json run = record_of(store, *it);
    for (const auto& s : run["steps"])
      if (s.is_object() && text_field(s, "name") == step) {
        print_steps(run, step);
        return 0;
      }
  }
  throw NotFound("no recorded run of pipeline '" + pipeline + "' has step '" + step + "'");
}

namespace {

std::string dot_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : printable(text)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string label_of(const nlohmann::json& node) {
  const auto& names = node["names"];
  std::string label = names.empty() ? node["digest"].get<std::string>().substr(0, 19) : names.back().get<std::string>();
  if (!node.value("stored", true)) label += " (collected)";
  return label;
}

// What a step read outside the store (StepSpec::external), in a line: the
// member names of an object (file_digests: the files), else the JSON; only
// its digest when it was too long to keep in the name record.
std::string external_summary(const nlohmann::json& node) {
  if (!node.contains("external")) return "too long to keep here, typed digest " + text_field(node, "external_digest");
  const auto& external = node["external"];
  std::string text;
  if (external.is_object()) {
    text = std::to_string(external.size()) + (external.size() == 1 ? " entry" : " entries");
    std::size_t shown = 0;
    for (auto it = external.begin(); it != external.end() && shown < 3; ++it, ++shown)
      text += (shown ? ", " : ": ") + it.key();
    if (external.size() > 3) text += ", ...";
  } else {
    text = external.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
  }
  return text;
}

}  // namespace

int cmd_lineage(const Args& a) {
  Store store = open_store(a);
  auto chain = lineage(store, store.resolve(*a.ref));
  if (a.json) {
    std::cout << json_text(nlohmann::json(chain)) << "\n";
    return 0;
  }
  if (a.dot) {
    // Artifacts are boxes, steps ellipses: input artifacts -> step -> output.
    std::cout << "digraph lineage {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n";
    for (const auto& n : chain) {
      auto id = n["digest"].get<std::string>();
      std::cout << "  " << dot_quoted(id) << " [shape=box, label=" << dot_quoted(label_of(n)) << "];\n";
      if (!n.contains("step")) continue;
      auto step_id = "step " + text_field(n, "run") + " " + text_field(n, "pipeline") + "." + text_field(n, "step");
      std::string params = n.contains("params") ? n["params"].dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) : "";
      std::cout << "  " << dot_quoted(step_id) << " [shape=ellipse, label="
                << dot_quoted(text_field(n, "pipeline") + "." + text_field(n, "step") + " " + params) << "];\n";
      std::cout << "  " << dot_quoted(step_id) << " -> " << dot_quoted(id) << ";\n";
      if (n.contains("external") || n.contains("external_digest")) {
        std::cout << "  " << dot_quoted("external " + step_id) << " [shape=note, label="
                  << dot_quoted(external_summary(n)) << "];\n";
        std::cout << "  " << dot_quoted("external " + step_id) << " -> " << dot_quoted(step_id) << ";\n";
      }
      if (n.contains("inputs") && n["inputs"].is_object())
        for (auto it = n["inputs"].begin(); it != n["inputs"].end(); ++it)
          if (it->is_string())
            std::cout << "  " << dot_quoted(it->get<std::string>()) << " -> " << dot_quoted(step_id)
                      << " [label=" << dot_quoted(it.key()) << "];\n";
    }
    std::cout << "}\n";
    return 0;
  }
  for (const auto& n : chain) {
    std::cout << printable(label_of(n)) << "  " << n["digest"].get<std::string>().substr(0, 19) << "\n";
    if (!n.contains("step")) {
      std::cout << "    (not made by a pipeline step)\n";
      continue;
    }
    std::cout << "    made by step " << printable(text_field(n, "pipeline")) << "." << printable(text_field(n, "step"))
              << " in run " << printable(text_field(n, "run")) << "\n";
    if (n.contains("params") && !n["params"].empty())
      std::cout << "    params " << printable(n["params"].dump(-1, ' ', true, nlohmann::json::error_handler_t::replace))
                << "\n";
    if (n.contains("inputs") && n["inputs"].is_object())
      for (auto it = n["inputs"].begin(); it != n["inputs"].end(); ++it)
        std::cout << "    input " << printable(it.key()) << " = " << printable(it->is_string() ? it->get<std::string>() : it->dump())
                  << "\n";
    if (n.contains("external") || n.contains("external_digest"))
      std::cout << "    read outside the store: " << printable(external_summary(n)) << "\n";
  }
  return 0;
}

}  // namespace amphora::cli
