// Saving and loading record collections (docs/FORMAT.md §10.2): one set of
// files per place of the schema, written in parallel, checked on load.

#include "column_files.hpp"
#include "record_node.hpp"

#include <amphora/array_encoding.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>
#include <amphora/parallel.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace amphora {

namespace {

using detail::RecordKind;
using detail::RecordNode;

constexpr std::string_view kRootPath = "records";
// More slots than any file could back: refused before any size arithmetic.
constexpr std::size_t kMaxSlots = std::size_t{1} << 48;

// Every node with its path, parents before children.
void flatten(const RecordNode& n, const std::string& path, std::vector<std::pair<const RecordNode*, std::string>>& out) {
  out.emplace_back(&n, path);
  if (n.kind == RecordKind::list) flatten(n.children[0], path + "/items", out);
  if (n.kind == RecordKind::object)
    for (std::size_t k = 0; k < n.children.size(); ++k) flatten(n.children[k], path + "/" + std::to_string(k), out);
}

template <class T>
std::span<const T> as_span(const Buffer& b) {
  return {reinterpret_cast<const T*>(b.data()), b.size() / sizeof(T)};
}

std::vector<std::string_view> texts_of(const RecordNode& n) {
  std::vector<std::string_view> views(n.slots);
  for (std::size_t i = 0; i < n.slots; ++i) views[i] = detail::text_at(n, i);
  return views;
}

template <class T>
T word_at(const RecordNode& n, std::size_t i) {
  T v;
  std::memcpy(&v, n.values->data() + i * sizeof(T), sizeof(T));
  return v;
}

std::int64_t length_at(const RecordNode& n, std::size_t i) {
  return word_at<std::int64_t>(n, i + 1) - word_at<std::int64_t>(n, i);
}

// Informative statistics of a node, for `amphora show`: nulls and missing
// keys, and over the slots holding a value the range of numbers, the lengths
// of lists. Gathered slot by slot, from one node or from the chunks of one.
struct NodeStats {
  std::uint64_t nulls = 0, missing = 0;
  bool any = false;  // a slot held a value whose range is kept
  std::pair<std::int64_t, std::int64_t> irange{0, 0};
  std::pair<std::uint64_t, std::uint64_t> urange{0, 0};
  std::pair<double, double> frange{0, 0};

  void add_slot(const RecordNode& n, std::size_t i, detail::SlotState state) {
    nulls += state == detail::SlotState::null;
    missing += state == detail::SlotState::missing;
    if (state != detail::SlotState::value) return;
    if (n.kind == RecordKind::integer && n.is_unsigned) widen(urange, word_at<std::uint64_t>(n, i));
    else if (n.kind == RecordKind::integer) widen(irange, word_at<std::int64_t>(n, i));
    else if (n.kind == RecordKind::floating) widen(frange, word_at<double>(n, i));
    else if (n.kind == RecordKind::list) widen(irange, length_at(n, i));
  }

  /// `optional`: whether the node has a missing-key bitmap.
  nlohmann::json json(RecordKind kind, bool is_unsigned, bool optional) const {
    nlohmann::json st = nlohmann::json::object();
    st["null_count"] = nulls;
    if (optional) st["missing_count"] = missing;
    // JSON has no infinities or NaN: a bound that is not finite (only a
    // hand-made artifact holds one) is null, as is the range of no values.
    auto bounds = [&](const char* lo_key, const char* hi_key, const auto& range) {
      using T = std::decay_t<decltype(range.first)>;
      auto shown = [&](T v) {
        if constexpr (std::is_floating_point_v<T>)
          if (!std::isfinite(v)) return nlohmann::json();
        return any ? nlohmann::json(v) : nlohmann::json();
      };
      st[lo_key] = shown(range.first);
      st[hi_key] = shown(range.second);
    };
    if (kind == RecordKind::integer && is_unsigned) bounds("min", "max", urange);
    if (kind == RecordKind::integer && !is_unsigned) bounds("min", "max", irange);
    if (kind == RecordKind::floating) bounds("min", "max", frange);
    if (kind == RecordKind::list) bounds("min_length", "max_length", irange);
    return st;
  }

 private:
  template <class T>
  void widen(std::pair<T, T>& range, T v) {
    if (!any || v < range.first) range.first = v;
    if (!any || v > range.second) range.second = v;
    any = true;
  }
};

nlohmann::json stats_of(const RecordNode& n) {
  NodeStats stats;
  for (std::size_t i = 0; i < n.slots; ++i) stats.add_slot(n, i, detail::state_at(n, i));
  return stats.json(n.kind, n.is_unsigned, static_cast<bool>(n.missing));
}

// A key order as stored in P.orders: its field indices as little-endian uint32.
std::string order_bytes(const std::vector<std::uint32_t>& order) {
  std::string bytes(order.size() * 4, '\0');
  for (std::size_t j = 0; j < order.size(); ++j)
    for (int b = 0; b < 4; ++b) bytes[j * 4 + b] = static_cast<char>((order[j] >> (8 * b)) & 0xffu);
  return bytes;
}

// Writes one node's own files; returns the string encoding chosen (strings only).
std::string save_node(const RecordNode& n, const std::string& path, ArtifactWriter& out, nlohmann::json& stats) {
  stats = stats_of(n);
  if (n.valid) out.write_array<std::uint8_t>(path + ".valid.npy", as_span<std::uint8_t>(*n.valid));
  if (n.missing) out.write_array<std::uint8_t>(path + ".missing.npy", as_span<std::uint8_t>(*n.missing));
  const std::int64_t slots = static_cast<std::int64_t>(n.slots);
  const std::span<const std::int64_t> shape(&slots, 1);
  switch (n.kind) {
    case RecordKind::null: break;
    case RecordKind::boolean: out.write_array(path + ".npy", DType::bool_, shape, n.values->bytes()); break;
    case RecordKind::integer:
      out.write_array(path + ".npy", n.is_unsigned ? DType::uint64 : DType::int64, shape, n.values->bytes(),
                      {.squeeze = true});
      break;
    case RecordKind::floating: {
      // Short decimals as scaled integers when every value is one (tried
      // directly: the check is the encoding's own first pass).
      try {
        out.write_array(path + ".npy", DType::float64, shape, n.values->bytes(), {.decimal = true, .squeeze = true});
      } catch (const InvalidArgument&) {
        out.write_array(path + ".npy", DType::float64, shape, n.values->bytes());
      }
      break;
    }
    case RecordKind::string: {
      // A loaded column may be in dictionary form; a built one is merged text.
      const detail::StringColumn strings =
          n.codes ? detail::write_string_column(out, path, texts_of(n))
                  : detail::write_string_column(out, path, n.bytes->bytes(), as_span<std::int64_t>(*n.values));
      // Distinct among the values: a null or missing slot's empty text is
      // none. Exact within the dictionary limits, estimated beyond them.
      if (dictionary_within_limits(strings.dict)) {
        std::vector<bool> used(strings.dict.dictionary.size(), false);
        for (std::size_t i = 0; i < n.slots; ++i)
          if (detail::state_at(n, i) == detail::SlotState::value) used[strings.dict.codes[i]] = true;
        stats["distinct"] = std::count(used.begin(), used.end(), true);
      } else {
        DistinctEstimator distinct;
        for (std::size_t i = 0; i < n.slots; ++i)
          if (detail::state_at(n, i) == detail::SlotState::value) distinct.add(detail::text_at(n, i));
        stats["distinct"] = distinct.estimate();
      }
      return strings.dictionary ? "dictionary" : "plain";
    }
    case RecordKind::json: out.write_strings(path, n.bytes->bytes(), as_span<std::int64_t>(*n.values)); break;
    case RecordKind::list:
      out.write_array<std::int64_t>(path + ".offsets.npy", as_span<std::int64_t>(*n.values),
                                    {.delta = true, .squeeze = true});
      break;
    case RecordKind::object:
      if (n.order_codes) {
        out.write_array<std::uint32_t>(path + ".order.npy", as_span<std::uint32_t>(*n.order_codes), {.squeeze = true});
        std::vector<std::string> orders;
        for (const auto& o : n.orders) orders.push_back(order_bytes(o));
        out.write_strings(path + ".orders", orders);
      }
      break;
  }
  return {};
}

// The schema: entry(node, i) for each node, i its place in flatten's order,
// with the items and fields of lists and objects nested in it.
template <class Entry>
nlohmann::json schema_tree(const RecordNode& n, const Entry& entry, std::size_t& next) {
  nlohmann::json s = entry(n, next++);
  if (n.kind == RecordKind::list) s["items"] = schema_tree(n.children[0], entry, next);
  if (n.kind == RecordKind::object) {
    s["fields"] = nlohmann::json::array();
    for (std::size_t k = 0; k < n.children.size(); ++k) {
      nlohmann::json f = schema_tree(n.children[k], entry, next);
      f["name"] = n.names[k];
      s["fields"].push_back(std::move(f));
    }
  }
  return s;
}

}  // namespace

void materializer<RecordCollection>::save(const RecordCollection& records, ArtifactWriter& out) {
  const RecordNode& root = detail::RecordAccess::root(records);
  std::vector<std::pair<const RecordNode*, std::string>> nodes;
  flatten(root, std::string(kRootPath), nodes);
  std::vector<std::string> encodings(nodes.size());
  std::vector<nlohmann::json> stats(nodes.size());
  std::vector<std::exception_ptr> failures(nodes.size());
  parallel_for(nodes.size(), [&](std::size_t i) {
    try {
      encodings[i] = save_node(*nodes[i].first, nodes[i].second, out, stats[i]);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  });
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
  std::size_t next = 0;
  out.meta()["count"] = records.size();
  out.meta()["schema"] = schema_tree(
      root,
      [&](const RecordNode& n, std::size_t i) {
        nlohmann::json s = detail::schema_of(n);
        if (n.kind == RecordKind::string) s["encoding"] = encodings[i];
        s.update(stats[i]);
        return s;
      },
      next);
}

// ---------------------------------------------------------------------------
// Importing JSON lines without holding them: the file is read in chunks,
// once to plan every node's files (counts, ranges, dictionaries, key
// orders), once to write them. What is written equals what save() writes
// for the collection read whole, file for file.

namespace {

using detail::SlotState;

// What the first pass learns of one node; the same figures save_node and
// stats_of compute over the whole node.
struct NodePlan {
  RecordKind kind = RecordKind::null;
  bool is_unsigned = false, unconfirmed = false, order_varies = false;
  std::uint64_t slots = 0;
  NodeStats stats;
  bool any_word = false;  // over every slot (what squeeze sees)
  std::int64_t wlo = 0, whi = 0;
  std::uint64_t uwlo = 0, uwhi = 0;
  DecimalScan decimals;
  StreamingDictionary strings;
  bool empty_text = false, empty_value = false;
  DistinctEstimator value_distinct;
  std::uint64_t text_bytes = 0;
  std::int64_t longest = 0;
  std::map<std::vector<std::uint32_t>, std::uint32_t> order_index;
  std::vector<const std::vector<std::uint32_t>*> orders;

  template <class T>
  static void widen(bool any, T& lo, T& hi, T v) {
    if (!any || v < lo) lo = v;
    if (!any || v > hi) hi = v;
  }

  void add(const RecordNode& n) {
    kind = n.kind;
    is_unsigned = n.is_unsigned;
    unconfirmed = n.kind == RecordKind::null || (n.kind == RecordKind::object && n.children.empty());
    order_varies = static_cast<bool>(n.order_codes);
    for (std::size_t i = 0; i < n.slots; ++i) {
      const SlotState state = detail::state_at(n, i);
      stats.add_slot(n, i, state);
      const bool value = state == SlotState::value;
      switch (n.kind) {
        case RecordKind::integer:
          if (is_unsigned)
            widen(any_word, uwlo, uwhi, word_at<std::uint64_t>(n, i));
          else
            widen(any_word, wlo, whi, word_at<std::int64_t>(n, i));
          any_word = true;
          break;
        case RecordKind::floating: decimals.add(word_at<double>(n, i)); break;
        case RecordKind::string: {
          const std::string_view t = detail::text_at(n, i);
          strings.add(t);
          text_bytes += t.size();
          empty_text |= t.empty();
          if (value) empty_value |= t.empty(), value_distinct.add(t);
          break;
        }
        case RecordKind::json: text_bytes += detail::text_at(n, i).size(); break;
        case RecordKind::list: longest = std::max(longest, length_at(n, i)); break;
        case RecordKind::object:
          if (n.order_codes) {
            const auto& order = n.orders[as_span<std::uint32_t>(*n.order_codes)[i]];
            auto [it, added] = order_index.emplace(order, static_cast<std::uint32_t>(order_index.size()));
            if (added) orders.push_back(&it->first);
          }
          break;
        default: break;
      }
    }
    slots += n.slots;
  }

  bool nullable() const { return stats.nulls > 0 || unconfirmed; }
  bool optional() const { return stats.missing > 0; }

  // The node's schema entry without its children: schema_of and stats_of.
  nlohmann::json schema(bool dictionary) const {
    nlohmann::json s = detail::schema_entry(kind, is_unsigned, nullable(), optional(), order_varies);
    s.update(stats.json(kind, is_unsigned, optional()));
    if (kind == RecordKind::string) {
      s["encoding"] = dictionary ? "dictionary" : "plain";
      // Distinct among the values, as save_node counts them.
      s["distinct"] = strings.within_limits()
                          ? strings.distinct() - (empty_text && !empty_value ? 1 : 0)
                          : value_distinct.estimate();
    }
    return s;
  }
};

// The recipe encode_array gives for values whose only figures it uses are
// these bounds (squeeze, and delta of values starting at `lo`).
template <class T>
nlohmann::json bounds_recipe(T lo, T hi, std::uint64_t count, const ArrayEncoding& encoding) {
  const T bounds[] = {lo, hi};
  nlohmann::json recipe = encode_array(dtype_of<T>::value, std::as_bytes(std::span<const T>(bounds)), encoding).recipe;
  recipe["count"] = count;
  return recipe;
}

std::size_t stored_width(const nlohmann::json& recipe) {
  return dtype_size(dtype_from_name(recipe["stored_dtype"].get<std::string>()));
}

// The second pass's writer of one node: save_node's files, appended chunk
// by chunk.
class NodeWriter {
 public:
  // `batch`: the bytes each of this node's streams gathers (batch_share).
  NodeWriter(ArtifactWriter& out, const std::string& path, const NodePlan& plan, std::size_t batch) : plan_(plan) {
    if (plan.nullable()) valid_.emplace(out.open_array(path + ".valid.npy", DType::uint8, (plan.slots + 7) / 8), batch);
    if (plan.optional()) missing_.emplace(out.open_array(path + ".missing.npy", DType::uint8, (plan.slots + 7) / 8), batch);
    switch (plan.kind) {
      case RecordKind::null: break;
      case RecordKind::boolean: values_.emplace(out.open_array(path + ".npy", DType::bool_, plan.slots), batch); break;
      case RecordKind::integer: {
        nlohmann::json recipe = plan.is_unsigned ? bounds_recipe(plan.uwlo, plan.uwhi, plan.slots, {.squeeze = true})
                                                 : bounds_recipe(plan.wlo, plan.whi, plan.slots, {.squeeze = true});
        width_ = stored_width(recipe);
        values_.emplace(out.open_encoded_array(path + ".npy", std::move(recipe)), batch);
        break;
      }
      case RecordKind::floating:
        if (plan.decimals.digits() >= 0) {
          // encode_array's decimal recipe: the digits, and squeeze's width for the scaled bounds.
          nlohmann::json recipe = {{"dtype", "float64"},
                                   {"count", plan.slots},
                                   {"decimal_digits", plan.decimals.digits()},
                                   {"transforms", {"decimal", "squeeze"}},
                                   {"stored_dtype", bounds_recipe(plan.decimals.lo(), plan.decimals.hi(), 0,
                                                                  {.squeeze = true})["stored_dtype"]}};
          width_ = stored_width(recipe);
          values_.emplace(out.open_encoded_array(path + ".npy", std::move(recipe)), batch);
        } else {
          values_.emplace(out.open_array(path + ".npy", DType::float64, plan.slots), batch);
        }
        break;
      case RecordKind::string:
        dictionary_ = plan.strings.dictionary_is_smaller();
        if (dictionary_) {
          nlohmann::json recipe = detail::squeezed_codes_recipe(plan.slots, plan.strings.words().size());
          width_ = stored_width(recipe);
          out.write_strings(path + ".dict", plan.strings.words());
          values_.emplace(out.open_encoded_array(path + ".codes.npy", std::move(recipe)), batch);
          break;
        }
        [[fallthrough]];
      case RecordKind::json:
        values_.emplace(out.open_array(path + ".offsets.npy", DType::int64, plan.slots + 1), batch);
        values_->add(std::int64_t{0});
        bytes_.emplace(out.open_stream(path + ".bytes", plan.text_bytes), batch);
        break;
      case RecordKind::list: {
        nlohmann::json recipe =
            bounds_recipe(std::int64_t{0}, plan.longest, plan.slots + 1, {.delta = true, .squeeze = true});
        width_ = stored_width(recipe);
        values_.emplace(out.open_encoded_array(path + ".offsets.npy", std::move(recipe)), batch);
        narrow(0);  // the first offset's difference
        break;
      }
      case RecordKind::object:
        if (plan.order_varies) {
          nlohmann::json recipe = detail::squeezed_codes_recipe(plan.slots, plan.orders.size());
          width_ = stored_width(recipe);
          values_.emplace(out.open_encoded_array(path + ".order.npy", std::move(recipe)), batch);
          std::vector<std::string> orders;
          for (const auto* o : plan.orders) orders.push_back(order_bytes(*o));
          out.write_strings(path + ".orders", orders);
        }
        break;
    }
  }

  void add(const RecordNode& n) {
    for (std::size_t i = 0; i < n.slots; ++i) {
      const SlotState state = detail::state_at(n, i);
      if (valid_) valid_->add(state == SlotState::value);
      if (missing_) missing_->add(state == SlotState::missing);
      switch (n.kind) {
        case RecordKind::null: break;
        case RecordKind::boolean: values_->add(n.values->data()[i]); break;
        case RecordKind::integer: {
          // Only what the plan saw fits the width it chose.
          const auto w = word_at<std::uint64_t>(n, i);
          const auto signed_w = static_cast<std::int64_t>(w);
          if (plan_.is_unsigned ? (w < plan_.uwlo || w > plan_.uwhi) : (signed_w < plan_.wlo || signed_w > plan_.whi))
            changed();
          narrow(w);
          break;
        }
        case RecordKind::floating:
          if (plan_.decimals.digits() >= 0) {
            std::int64_t d = 0;
            if (!DecimalScan::scaled(word_at<double>(n, i), plan_.decimals.digits(), d) || d < plan_.decimals.lo() ||
                d > plan_.decimals.hi())
              changed();
            narrow(static_cast<std::uint64_t>(d));
          } else {
            values_->add(word_at<double>(n, i));
          }
          break;
        case RecordKind::string:
          if (dictionary_) {
            std::uint32_t code = 0;
            try {
              code = plan_.strings.code_of(detail::text_at(n, i));
            } catch (const InvalidArgument&) {
              changed();
            }
            narrow(code);
            break;
          }
          [[fallthrough]];
        case RecordKind::json: {
          const std::string_view t = detail::text_at(n, i);
          bytes_->add(t.data(), t.size());
          offset_ += static_cast<std::int64_t>(t.size());
          values_->add(offset_);
          break;
        }
        case RecordKind::list:
          if (length_at(n, i) > plan_.longest) changed();
          narrow(static_cast<std::uint64_t>(length_at(n, i)));
          break;
        case RecordKind::object:
          if (n.order_codes) {
            const auto& order = n.orders[as_span<std::uint32_t>(*n.order_codes)[i]];
            auto it = plan_.order_index.find(order);
            if (it == plan_.order_index.end()) changed();
            narrow(it->second);
          }
          break;
      }
    }
  }

  void close() {
    if (bytes_ && static_cast<std::uint64_t>(offset_) != plan_.text_bytes) changed();
    if (valid_) valid_->close();
    if (missing_) missing_->close();
    if (values_) values_->close();
    if (bytes_) bytes_->close();
  }

 private:
  [[noreturn]] static void changed() {
    throw InvalidArgument("the file changed while it was imported (it is read three times); import it again");
  }

  // Appends the low `width_` bytes (little-endian) of a value squeeze has
  // already proved fits them.
  void narrow(std::uint64_t v) { values_->add(&v, width_); }

  const NodePlan& plan_;
  std::optional<detail::BitStream> valid_, missing_;
  std::optional<detail::Batched<ArrayStream>> values_;
  std::optional<detail::Batched<FileStream>> bytes_;
  std::size_t width_ = 8;
  bool dictionary_ = false;
  std::int64_t offset_ = 0;
};

}  // namespace

void import_jsonl(const std::filesystem::path& file, ArtifactWriter& out) {
  std::vector<NodePlan> plans;
  std::vector<std::string> paths;
  std::vector<NodeWriter> writers;
  std::vector<bool> dictionary;
  RecordNode shape;  // the first chunk's tree: names and nesting for the schema
  std::size_t count = 0;
  detail::read_jsonl_chunks(
      file, 2, std::size_t{4} << 20,
      [&](int pass, RecordNode&& root, std::size_t records) {
        std::vector<std::pair<const RecordNode*, std::string>> nodes;
        flatten(root, std::string(kRootPath), nodes);
        if (pass == 0) {
          if (plans.empty()) plans.resize(nodes.size());
          if (plans.size() != nodes.size()) throw InvalidArgument(file.string() + ": the schema changed between chunks");
          for (std::size_t i = 0; i < nodes.size(); ++i) plans[i].add(*nodes[i].first);
          count += records;
          return;
        }
        if (writers.empty()) {
          writers.reserve(plans.size());
          const std::size_t batch = detail::batch_share(4 * plans.size());  // at most four streams a node
          for (std::size_t i = 0; i < plans.size(); ++i) writers.emplace_back(out, nodes[i].second, plans[i], batch);
          shape = std::move(root);
          nodes.clear();
          flatten(shape, std::string(kRootPath), nodes);
        }
        try {
          for (std::size_t i = 0; i < nodes.size(); ++i) writers[i].add(*nodes[i].first);
        } catch (const InvalidArgument& e) {
          throw InvalidArgument(file.string() + ": " + e.what());
        }
      },
      [&](std::uint64_t done) { out.report_progress(done / 3); });
  try {
    for (auto& w : writers) w.close();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(file.string() + ": " + e.what());
  }
  // The schema: the shape's names and nesting with the planned figures.
  std::size_t next = 0;
  out.meta()["count"] = count;
  out.meta()["schema"] = schema_tree(
      shape,
      [&](const RecordNode&, std::size_t i) {
        const NodePlan& p = plans[i];
        return p.schema(p.kind == RecordKind::string && p.strings.dictionary_is_smaller());
      },
      next);

}

// ---------------------------------------------------------------------------
// Loading

namespace {

// Reads slots [begin, end) of each node of `total` slots: all of them (the
// files mapped and checked whole) or a range (only its part of each file
// read, and checked; a list's offsets, delta-coded, are read whole).
class Loader {
 public:
  explicit Loader(const ArtifactReader& in) : in_(in) {}

  RecordNode node(const nlohmann::json& s, const std::string& path, std::size_t total, std::size_t begin,
                  std::size_t end, bool may_be_missing) {
    const bool whole = begin == 0 && end == total;
    const std::size_t slots = end - begin;
    const std::string where = in_.label() + ": records column '" + path + "'";
    auto bad = [&](const std::string& why) { throw CorruptData(where + " " + why); };
    if (!s.is_object() || !s.contains("kind") || !s["kind"].is_string() || !s.contains("nullable") ||
        !s["nullable"].is_boolean() || !s.contains("optional") || !s["optional"].is_boolean())
      bad("has a schema entry without a kind, nullable or optional flag");
    RecordNode n;
    n.slots = slots;
    const std::string kind = s["kind"].get<std::string>();
    static constexpr RecordKind kKinds[] = {RecordKind::null,   RecordKind::boolean, RecordKind::integer,
                                            RecordKind::floating, RecordKind::string, RecordKind::list,
                                            RecordKind::object, RecordKind::json};
    auto it = std::find_if(std::begin(kKinds), std::end(kKinds), [&](RecordKind k) { return detail::kind_name(k) == kind; });
    if (it == std::end(kKinds)) throw Unsupported(where + " has unknown kind '" + kind + "'");
    n.kind = *it;
    if (s["optional"].get<bool>() && !may_be_missing) bad("is marked optional, but only an object's fields can be missing");
    if (total > kMaxSlots) bad("claims " + std::to_string(total) + " slots");
    const bool unconfirmed =
        n.kind == RecordKind::null || (n.kind == RecordKind::object && s.contains("fields") && s["fields"].empty());
    if (unconfirmed && !s["nullable"].get<bool>()) bad("lacks the validity bitmap its kind requires");
    if (s["nullable"].get<bool>()) n.valid = bitmap(path + ".valid.npy", total, begin, end, where);
    if (s["optional"].get<bool>()) n.missing = bitmap(path + ".missing.npy", total, begin, end, where);

    auto whole_array = [&](const std::string& file, DType dtype, std::size_t count) {
      require(file, where);
      ArrayView a = in_.read_array(file, dtype, 1);
      if (a.size() != count)
        bad("holds " + std::to_string(a.size()) + " values in '" + file + "' where the schema has " +
            std::to_string(count));
      return a;
    };
    auto array = [&](const std::string& file, DType dtype, std::size_t count) {
      if (whole) return whole_array(file, dtype, count);
      require(file, where);
      return in_.read_array_range(file, dtype, count, begin, end);
    };
    switch (n.kind) {
      case RecordKind::null: break;
      case RecordKind::boolean: n.values = array(path + ".npy", DType::bool_, total).buffer(); break;
      case RecordKind::integer: {
        const std::string dtype = s.value("dtype", std::string());
        if (dtype != "int64" && dtype != "uint64") bad("has integer dtype '" + dtype + "' (int64 or uint64)");
        n.is_unsigned = dtype == "uint64";
        n.values = array(path + ".npy", n.is_unsigned ? DType::uint64 : DType::int64, total).buffer();
        break;
      }
      case RecordKind::floating: n.values = array(path + ".npy", DType::float64, total).buffer(); break;
      case RecordKind::string: {
        const std::string encoding = s.value("encoding", std::string());
        if (encoding == "plain") {
          strings(n, path, total, begin, end, where);
        } else if (encoding == "dictionary" && whole) {
          const detail::DictionaryColumn dict = detail::read_dictionary_column(in_, path, slots, 0, slots, where);
          n.values = dict.words.offsets().buffer();
          n.bytes = dict.words.bytes_buffer();
          n.codes = dict.codes.buffer();
        } else if (encoding == "dictionary") {
          const detail::DictionaryColumn dict = detail::read_dictionary_rows(in_, path, total, begin, end, where);
          n.values = dict.words.offsets().buffer();
          n.bytes = dict.words.bytes_buffer();
          n.codes = dict.codes.buffer();
        } else {
          throw Unsupported(where + " has unknown string encoding '" + encoding + "'");
        }
        break;
      }
      case RecordKind::json: {
        strings(n, path, total, begin, end, where);
        check_json(n, where);
        break;
      }
      case RecordKind::list: {
        ArrayView offsets = whole_array(path + ".offsets.npy", DType::int64, total + 1);
        auto o = offsets.values<std::int64_t>();
        validate_offsets(o, static_cast<std::uint64_t>(std::max<std::int64_t>(o.back(), 0)), where,
                         "its items number " + std::to_string(o.back()));
        if (!s.contains("items")) bad("is a list without 'items'");
        const auto first = static_cast<std::size_t>(o[begin]), last = static_cast<std::size_t>(o[end]);
        if (whole) {
          n.values = offsets.buffer();
        } else {
          auto rebased = Buffer::allocate((slots + 1) * sizeof(std::int64_t));
          auto* r = reinterpret_cast<std::int64_t*>(rebased->mutable_data());
          for (std::size_t i = 0; i <= slots; ++i) r[i] = o[begin + i] - o[begin];
          n.values = std::move(rebased);
        }
        n.children.push_back(node(s["items"], path + "/items", static_cast<std::size_t>(o.back()), first, last, false));
        break;
      }
      case RecordKind::object: {
        if (!s.contains("fields") || !s["fields"].is_array()) bad("is an object without 'fields'");
        std::set<std::string, std::less<>> seen;
        for (std::size_t k = 0; k < s["fields"].size(); ++k) {
          const auto& f = s["fields"][k];
          if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) bad("has field " + std::to_string(k) + " without a name");
          const std::string name = f["name"].get<std::string>();
          if (!is_valid_utf8(name) || !seen.insert(name).second) bad("has a repeated or non-UTF-8 field name");
          n.names.push_back(name);
          n.children.push_back(node(f, path + "/" + std::to_string(k), total, begin, end, true));
        }
        const std::string order = s.value("key_order", std::string("schema"));
        if (order == "per_record") {
          key_orders(n, path, total, begin, end, where);
        } else if (order != "schema") {
          throw Unsupported(where + " has unknown key_order '" + order + "'");
        }
        break;
      }
    }
    return n;
  }

 private:
  void require(const std::string& file, const std::string& where) const { detail::require_file(in_, file, where); }

  // Bits [begin, end) of a bitmap of `total`, moved to start at bit 0.
  std::shared_ptr<const Buffer> bitmap(const std::string& file, std::size_t total, std::size_t begin, std::size_t end,
                                       const std::string& where) {
    if (begin == 0 && end == total) return detail::read_bitmap(in_, file, total, where).buffer();
    require(file, where);
    ArrayView bytes = in_.read_array_range(file, DType::uint8, (total + 7) / 8, begin / 8, (end + 7) / 8);
    if (begin % 8 == 0) return bytes.buffer();
    const Buffer& from = *bytes.buffer();
    auto bits = Buffer::allocate((end - begin + 7) / 8);
    std::memset(bits->mutable_data(), 0, bits->size());
    for (std::size_t i = begin; i < end; ++i)
      if (detail::bit_at(from, i - begin / 8 * 8))
        bits->mutable_data()[(i - begin) / 8] |= static_cast<std::byte>(1u << ((i - begin) % 8));
    return bits;
  }

  void strings(RecordNode& n, const std::string& path, std::size_t total, std::size_t begin, std::size_t end,
               const std::string& where) {
    require(path + ".offsets.npy", where);
    require(path + ".bytes", where);
    StringsView v = begin == 0 && end == total ? in_.read_strings(path) : in_.read_strings_range(path, total, begin, end);
    if (v.size() != end - begin)
      throw CorruptData(where + " holds " + std::to_string(v.size()) + " strings where the schema has " +
                        std::to_string(total));
    n.values = v.offsets().buffer();
    n.bytes = v.bytes_buffer();
  }

  // Every JSON text is one JSON value, so export writes only JSON.
  void check_json(const RecordNode& n, const std::string& where) {
    std::size_t longest = 0;
    for (std::size_t i = 0; i < n.slots; ++i) longest = std::max(longest, detail::text_at(n, i).size());
    simdjson::dom::parser parser;
    if (parser.allocate(std::max<std::size_t>(longest, 64), 257) != simdjson::SUCCESS)
      throw OutOfResources(where + ": cannot allocate a JSON parser");
    std::vector<char> padded;
    for (std::size_t i = 0; i < n.slots; ++i) {
      if (detail::state_at(n, i) != detail::SlotState::value) continue;
      const std::string_view text = detail::text_at(n, i);
      padded.assign(text.size() + simdjson::SIMDJSON_PADDING, '\0');
      std::memcpy(padded.data(), text.data(), text.size());
      simdjson::dom::element e;
      if (auto err = parser.parse(padded.data(), text.size(), false).get(e))
        throw CorruptData(where + ": slot " + std::to_string(i) + " is not JSON (" + simdjson::error_message(err) + ")");
    }
  }

  void key_orders(RecordNode& n, const std::string& path, std::size_t total, std::size_t begin, std::size_t end,
                  const std::string& where) {
    require(path + ".order.npy", where);
    require(path + ".orders.offsets.npy", where);
    require(path + ".orders.bytes", where);
    ArrayView codes = begin == 0 && end == total ? in_.read_array(path + ".order.npy", DType::uint32, 1)
                                                 : in_.read_array_range(path + ".order.npy", DType::uint32, total, begin, end);
    if (codes.size() != n.slots)
      throw CorruptData(where + " holds " + std::to_string(codes.size()) + " key orders for " + std::to_string(total) + " slots");
    StringsView orders = in_.read_strings(path + ".orders");
    for (std::size_t j = 0; j < orders.size(); ++j) {
      const std::string_view o = orders[j];
      if (o.size() % 4 != 0) throw CorruptData(where + ": key order " + std::to_string(j) + " is not whole uint32s");
      std::vector<std::uint32_t> order(o.size() / 4);
      std::vector<bool> used(n.children.size(), false);
      for (std::size_t m = 0; m < order.size(); ++m) {
        std::uint32_t k = 0;
        for (int b = 0; b < 4; ++b) k |= static_cast<std::uint32_t>(static_cast<unsigned char>(o[m * 4 + b])) << (8 * b);
        if (k >= n.children.size() || used[k])
          throw CorruptData(where + ": key order " + std::to_string(j) + " names field " + std::to_string(k) +
                            " twice or of " + std::to_string(n.children.size()));
        used[k] = true;
        order[m] = k;
      }
      n.orders.push_back(std::move(order));
    }
    auto c = codes.values<std::uint32_t>();
    for (std::size_t i = 0; i < c.size(); ++i)
      if (c[i] >= n.orders.size())
        throw CorruptData(where + ": slot " + std::to_string(begin + i) + " has key order " + std::to_string(c[i]) + " of " +
                          std::to_string(n.orders.size()));
    n.order_codes = codes.buffer();
  }

  const ArtifactReader& in_;
};

}  // namespace

RecordCollection load_records(const ArtifactReader& in, const RecordSelection& selection) {
  in.require_materializer(materializer<RecordCollection>::name, materializer<RecordCollection>::version,
                          "a record collection");
  const auto count = in.meta<std::size_t>("count");
  const auto [begin, end] = selection.rows.value_or(std::pair<std::size_t, std::size_t>{0, count});
  if (begin > end || end > count)
    throw InvalidArgument(in.label() + ": records [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") are outside [0, " + std::to_string(count) + ")");
  const auto schema = in.meta<nlohmann::json>("schema");
  RecordNode root = Loader(in).node(schema, std::string(kRootPath), count, begin, end, false);
  root.label = in.label();
  return detail::RecordAccess::make(std::make_shared<const RecordNode>(std::move(root)), end - begin);
}

void materializer<RecordCollection>::validate(const ArtifactReader& in) {
  const RecordCollection records = load_records(in);
  for (std::size_t i = 0; i < records.size(); ++i) (void)records.record_json(i);
}

}  // namespace amphora
