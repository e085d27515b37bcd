#pragma once
// A configured model: its configuration (YAML), its weight tensors and its
// training log saved as one composite artifact and loaded back by type, the
// "configured model" idea of ZANJ. Include this header to save and load a
// configured_model::Model; load the plugin (amphora_configured_model.so) to
// let programs that do not know the type, the `amphora` command among them,
// verify and export it and import a .yaml file as a configuration.
//
// Layout: "configured_model.model" (format version 1) is a declared struct
// (docs/FORMAT.md §7.9) with the children "config", "weights" (an
// amphora.map of tensors) and "training_log" (a record list of
// "configured_model.log_entry"). "configured_model.config" (format version
// 1) holds one file, "config.yaml": the configuration in canonical form
// (below); its meta lists the top-level keys as "keys". The configuration
// is part of the digest: changing it changes the model's digest, and equal
// models (the same configuration, whatever its layout, comments, key order
// or quoting style) have equal digests.

#include <amphora/describe.hpp>
#include <amphora/everyday.hpp>
#include <amphora/tensor.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace configured_model {

/// A configuration tree, as yaml-cpp parses it. Copies are deep: a
/// YAML::Node is a reference (copying one shares the tree, and assigning to
/// one writes through to the tree it refers to), which a value type must
/// not be.
struct Config {
  YAML::Node root;

  Config() = default;
  explicit Config(YAML::Node tree) : root(std::move(tree)) {}
  Config(const Config& other) : root(YAML::Clone(other.root)) {}
  Config(Config&& other) noexcept : root(other.root) {}
  Config& operator=(const Config& other) {
    if (this != &other) root.reset(YAML::Clone(other.root));
    return *this;
  }
  Config& operator=(Config&& other) noexcept {
    root.reset(other.root);
    return *this;
  }
};

namespace detail {

/// How far canonical_yaml follows a tree: aliases make a small file a huge
/// (or, with an anchor inside itself, endless) tree.
inline constexpr std::size_t kMaxDepth = 128;
inline constexpr std::size_t kMaxNodes = 1'000'000;

// yaml-cpp's tags for what carries no explicit tag: "?" a plain scalar or
// any collection, "!" a quoted scalar.
inline bool explicit_tag(const std::string& tag) { return !tag.empty() && tag != "?" && tag != "!"; }

inline void emit(YAML::Emitter& out, const YAML::Node& node, std::size_t depth, std::size_t& nodes) {
  if (depth > kMaxDepth)
    throw amphora::InvalidArgument("the configuration nests deeper than " + std::to_string(kMaxDepth) +
                                   " levels (an alias inside its own anchor?)");
  if (++nodes > kMaxNodes)
    throw amphora::InvalidArgument("the configuration expands to more than " + std::to_string(kMaxNodes) +
                                   " nodes (aliases repeating aliases?)");
  if (explicit_tag(node.Tag())) out << YAML::VerbatimTag(node.Tag());  // !!str 007 stays a string
  switch (node.Type()) {
    case YAML::NodeType::Null:
      out << YAML::Null;
      return;
    case YAML::NodeType::Scalar:
      // A scalar written in quotes ("null", "007") stays a quoted string.
      if (node.Tag() == "!") out << YAML::DoubleQuoted;
      out << node.Scalar();
      return;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) emit(out, item, depth + 1, nodes);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Map: {
      // Sorted by index: assigning a YAML::Node writes through to the node
      // it refers to, so nodes must not be moved about by std::sort.
      std::vector<std::pair<YAML::Node, YAML::Node>> pairs;
      std::vector<std::pair<std::string, std::size_t>> order;
      std::vector<std::string> scalar_keys;
      for (const auto& kv : node) {
        YAML::Emitter key;
        emit(key, kv.first, depth + 1, nodes);
        order.emplace_back(key.c_str(), pairs.size());
        pairs.emplace_back(kv.first, kv.second);
        // `a` and "a" are one key to a reader, whatever the quoting.
        if (kv.first.IsScalar()) scalar_keys.push_back(kv.first.Scalar());
      }
      std::sort(order.begin(), order.end());
      std::sort(scalar_keys.begin(), scalar_keys.end());
      for (std::size_t i = 1; i < scalar_keys.size(); ++i)
        if (scalar_keys[i] == scalar_keys[i - 1])
          throw amphora::InvalidArgument("the configuration repeats the key '" + scalar_keys[i] + "'");
      for (std::size_t i = 1; i < order.size(); ++i)
        if (order[i].first == order[i - 1].first)
          throw amphora::InvalidArgument("the configuration repeats the key '" + order[i].first + "'");
      out << YAML::BeginMap;
      for (const auto& [text, index] : order) {
        out << YAML::Key;
        emit(out, pairs[index].first, depth + 1, nodes);
        out << YAML::Value;
        emit(out, pairs[index].second, depth + 1, nodes);
      }
      out << YAML::EndMap;
      return;
    }
    case YAML::NodeType::Undefined:
      break;
  }
  throw amphora::InvalidArgument("the configuration holds an undefined YAML node");
}

}  // namespace detail

/// The configuration as canonical YAML: block style, every mapping's entries
/// ordered by their keys' canonical text, comments, anchors, aliases
/// (expanded) and layout dropped, scalars as written (quoted ones
/// double-quoted, explicit tags kept as verbatim tags). Files that differ
/// only in layout, comments, key order or quoting style give the same text;
/// scalars are not normalised (`0.001` and `1e-3` differ). Throws
/// InvalidArgument for a repeated key, a tree deeper than 128 levels or of
/// more than a million nodes once aliases are expanded.
inline std::string canonical_yaml(const YAML::Node& root) {
  YAML::Emitter out;
  std::size_t nodes = 0;
  detail::emit(out, root, 0, nodes);
  if (!out.good()) throw amphora::InvalidArgument("the configuration cannot be written as YAML: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

/// Parses YAML text of one document (none: a null configuration); throws
/// InvalidArgument naming `what` and the position, or for several documents.
inline Config parse_config(const std::string& text, const std::string& what) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw amphora::InvalidArgument(what + " is not YAML: " + e.what());
  }
  if (documents.size() > 1)
    throw amphora::InvalidArgument(what + " holds " + std::to_string(documents.size()) +
                                   " YAML documents; a configuration is one");
  return Config(documents.empty() ? YAML::Node() : documents.front());
}

inline bool operator==(const Config& a, const Config& b) { return canonical_yaml(a.root) == canonical_yaml(b.root); }

}  // namespace configured_model

template <>
struct amphora::materializer<configured_model::Config> {
  static constexpr std::string_view name = "configured_model.config";
  static constexpr int version = 1;
  static void save(const configured_model::Config& config, ArtifactWriter& out) {
    const std::string text = configured_model::canonical_yaml(config.root);
    out.write_file("config.yaml", std::as_bytes(std::span(text)));
    nlohmann::json keys = nlohmann::json::array();
    if (config.root.IsMap())
      for (const auto& kv : config.root)
        keys.push_back(kv.first.IsScalar() ? kv.first.Scalar() : configured_model::canonical_yaml(kv.first));
    std::sort(keys.begin(), keys.end());
    out.meta()["keys"] = std::move(keys);
  }
  static configured_model::Config load(const ArtifactReader& in) {
    const auto bytes = in.read_file("config.yaml");
    const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    try {
      return configured_model::parse_config(text, in.label() + " 'config.yaml'");
    } catch (const InvalidArgument& e) {
      throw CorruptData(e.what());  // the file was written canonical: not YAML now means damage
    }
  }
};

namespace configured_model {

/// One line of a training log.
struct LogEntry {
  std::int64_t step = 0;
  double loss = 0;
  double learning_rate = 0;
  bool operator==(const LogEntry&) const = default;
};
AMPHORA_MATERIALIZE(LogEntry, "configured_model.log_entry", 1, step, loss, learning_rate)

/// A model as its configuration, its weights by name and how it was trained.
struct Model {
  Config config;
  std::map<std::string, amphora::Tensor> weights;
  std::vector<LogEntry> training_log;
};
AMPHORA_MATERIALIZE(Model, "configured_model.model", 1, config, weights, training_log)

}  // namespace configured_model
