// Record collections: schema inference, columnar building (from JSON values
// or JSON lines), record access, and the "amphora.records" materializer.
// docs/FORMAT.md §10 is the layout.

#include "column_files.hpp"
#include "record_node.hpp"

#include <amphora/array_encoding.hpp>
#include <amphora/json.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>
#include <amphora/parallel.hpp>

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace amphora {

namespace detail {

std::string_view kind_name(RecordKind kind) {
  switch (kind) {
    case RecordKind::null: return "null";
    case RecordKind::boolean: return "bool";
    case RecordKind::integer: return "int";
    case RecordKind::floating: return "float";
    case RecordKind::string: return "string";
    case RecordKind::list: return "list";
    case RecordKind::object: return "object";
    case RecordKind::json: return "json";
  }
  return "?";
}

}  // namespace detail

namespace {

using detail::RecordKind;
using detail::RecordNode;
using detail::SlotState;

// Nesting deeper than this is refused: no record format needs it, and the
// walks below recurse once per level.
constexpr int kMaxRecordDepth = 256;
// Below this many levels of columns a value is kept as JSON text instead, so
// that the schema (hashed metadata, itself nested) stays within the store's
// JSON nesting limit.
constexpr int kMaxColumnDepth = 16;

// ---------------------------------------------------------------------------
// Where an input value comes from, for error messages: a record of a span, or
// a line of a file.

struct Origin {
  const std::filesystem::path* file = nullptr;
  std::size_t index = 0;  // record index, or line number from 1
  std::string_view key = {};  // the innermost key holding the value, while inferring
  bool keyed = false;
  std::string str() const {
    std::string s = file ? file->string() + ":" + std::to_string(index) : "record " + std::to_string(index);
    if (keyed) s += ", key \"" + printable(key) + "\"";
    return s;
  }
  Origin within(std::string_view k) const { return {file, index, k, true}; }
};

[[noreturn]] void refuse(const Origin& at, const std::string& why) { throw InvalidArgument(at.str() + ": " + why); }

// ---------------------------------------------------------------------------
// Sources: the same inference and filling walk nlohmann values and simdjson
// on-demand values. A source value says its type and hands over its parts;
// simdjson's may be read only once, so each walk reads each value once.

enum class ValueType { null, boolean, integer, uint, floating, string, array, object };

// nlohmann::json or nlohmann::ordered_json.
template <class J>
struct NlohmannSource {
  using Value = const J&;  // how a value is passed
  static constexpr bool kValidatedUtf8 = false;  // a std::string holds any bytes
  static ValueType type(Value v, const Origin& at) {
    switch (v.type()) {
      case J::value_t::null: return ValueType::null;
      case J::value_t::boolean: return ValueType::boolean;
      case J::value_t::number_integer: return ValueType::integer;
      case J::value_t::number_unsigned:
        return v.template get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                   ? ValueType::integer
                   : ValueType::uint;
      case J::value_t::number_float: {
        const double x = v.template get<double>();
        if (!std::isfinite(x)) refuse(at, std::string("holds ") + (std::isnan(x) ? "NaN" : "an infinity") + ", which JSON cannot represent");
        return ValueType::floating;
      }
      case J::value_t::string: return ValueType::string;
      case J::value_t::array: return ValueType::array;
      case J::value_t::object: return ValueType::object;
      case J::value_t::binary: refuse(at, "holds binary data, which JSON cannot represent");
      case J::value_t::discarded: break;
    }
    refuse(at, "holds a discarded value");
  }
  static bool boolean(Value v, const Origin&) { return v.template get<bool>(); }
  static std::int64_t integer(Value v, const Origin&) { return v.template get<std::int64_t>(); }
  static std::uint64_t uint(Value v, const Origin&) { return v.template get<std::uint64_t>(); }
  static double floating(Value v, const Origin&) { return v.template get<double>(); }
  static std::string_view string(Value v, const Origin&) { return v.template get_ref<const std::string&>(); }
  template <class F>
  static void each_item(Value v, const Origin&, F&& f) {
    for (const auto& item : v) f(item);
  }
  template <class F>
  static void each_field(Value v, const Origin&, F&& f) {
    for (auto it = v.begin(); it != v.end(); ++it) f(std::string_view(it.key()), it.value());
  }
};

// One line of JSON lines, parsed on demand by simdjson.
struct SimdjsonSource {
  using Value = simdjson::ondemand::value&;  // how a value is passed
  static constexpr bool kValidatedUtf8 = true;  // the parser checks the whole line, keys and strings included
  template <class T>
  static T take(simdjson::simdjson_result<T>&& r, const Origin& at) {
    T out{};
    if (auto e = std::move(r).get(out)) refuse(at, std::string("is not valid JSON (") + simdjson::error_message(e) + ")");
    return out;
  }
  static ValueType type(Value v, const Origin& at) {
    switch (take(v.type(), at)) {
      case simdjson::ondemand::json_type::null: {
        if (!take(v.is_null(), at)) refuse(at, "is not valid JSON (a bad literal)");
        return ValueType::null;
      }
      case simdjson::ondemand::json_type::boolean: return ValueType::boolean;
      case simdjson::ondemand::json_type::number: {
        // simdjson 3.0 classes an integer past 64 bits as one of 64 bits and
        // fails only when it is read: try the read here.
        using simdjson::ondemand::number_type;
        number_type kind{};
        double x = 0;
        std::int64_t i = 0;
        std::uint64_t u = 0;
        // get_double checks the number's syntax and range; parse_double gives its value.
        if (v.get_number_type().get(kind) ||
            (kind == number_type::floating_point_number && (v.get_double().get(x) || !parse_double(v, x))) ||
            (kind == number_type::signed_integer && v.get_int64().get(i)) ||
            (kind == number_type::unsigned_integer && v.get_uint64().get(u)))
          refuse(at, "holds the number " + number_text(v) +
                         ", which no int64, uint64 or float64 holds; write it as a string to keep it");
        switch (kind) {
          case simdjson::ondemand::number_type::signed_integer: return ValueType::integer;
          case simdjson::ondemand::number_type::unsigned_integer: return ValueType::uint;
          case simdjson::ondemand::number_type::floating_point_number: return ValueType::floating;
        }
        break;
      }
      case simdjson::ondemand::json_type::string: return ValueType::string;
      case simdjson::ondemand::json_type::array: return ValueType::array;
      case simdjson::ondemand::json_type::object: return ValueType::object;
    }
    refuse(at, "holds a number simdjson cannot classify");
  }
  // The number as written.
  static std::string_view number_token(Value v) {
    std::string_view raw = v.raw_json_token();
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r' || raw.back() == '\n')) raw.remove_suffix(1);
    return raw;
  }
  // At most 40 bytes of it, for messages.
  static std::string number_text(Value v) {
    const std::string_view raw = number_token(v);
    return raw.size() > 40 ? std::string(raw.substr(0, 40)) + "..." : std::string(raw);
  }
  // The float64 nearest the number as written, false past float64's range.
  // Not simdjson's get_double: Debian's simdjson 3.0 misreads a decimal of
  // more than 19 digits whose integer part is 0 (0.4444444444444444444444
  // read as 0.0017), a bug fixed upstream in 3.6.3. from_chars rounds
  // correctly; what it calls out of range, strtod settles: an underflow is
  // the nearest subnormal or zero, as Python and pandas read it.
  static bool parse_double(Value v, double& out) {
    const std::string_view raw = number_token(v);
    auto [end, error] = std::from_chars(raw.data(), raw.data() + raw.size(), out);
    if (end != raw.data() + raw.size()) return false;
    if (error == std::errc()) return true;
    if (error != std::errc::result_out_of_range) return false;
    const std::string text(raw);
    out = std::strtod(text.c_str(), nullptr);
    return std::isfinite(out);
  }
  static bool boolean(Value v, const Origin& at) { return take(v.get_bool(), at); }
  static std::int64_t integer(Value v, const Origin& at) { return take(v.get_int64(), at); }
  static std::uint64_t uint(Value v, const Origin& at) { return take(v.get_uint64(), at); }
  static double floating(Value v, const Origin& at) {
    double x = take(v.get_double(), at);  // the syntax check type() made
    if (!parse_double(v, x))
      refuse(at, "holds the number " + number_text(v) + ", which no int64, uint64 or float64 holds; write it as a string to keep it");
    return x;
  }
  static std::string_view string(Value v, const Origin& at) { return take(v.get_string(), at); }
  template <class F>
  static void each_item(Value v, const Origin& at, F&& f) {
    auto array = take(v.get_array(), at);
    for (auto item : array) {
      simdjson::ondemand::value value = take(std::move(item), at);
      f(value);
    }
  }
  template <class F>
  static void each_field(Value v, const Origin& at, F&& f) {
    auto object = take(v.get_object(), at);
    for (auto member : object) {
      auto field = take(std::move(member), at);
      const std::string_view key = take(field.unescaped_key(), at);
      f(key, field.value());
    }
  }
};

// ---------------------------------------------------------------------------
// Pass 1: the shape of every value at each place in the records.

constexpr std::uint16_t bit(ValueType t) { return static_cast<std::uint16_t>(1u << static_cast<unsigned>(t)); }

struct Shape {
  std::uint16_t types = 0;  // bit(ValueType) of every value seen here
  bool negative = false;    // an integer below zero
  bool too_deep = false;    // below kMaxColumnDepth: kept as JSON
  std::size_t slots = 0;    // values seen here (for a field: records holding it)
  std::unique_ptr<Shape> items;
  std::vector<std::string> names;  // object: fields in order of first appearance
  std::vector<std::unique_ptr<Shape>> fields;
  std::unordered_map<std::string, std::size_t> index;
  std::size_t objects = 0;             // objects seen here
  std::vector<std::size_t> last_seen;  // per field: the object (1-based) it last occurred in
  bool order_varies = false;

  std::size_t find_or_add(std::string_view key, std::size_t hint) {
    if (hint < names.size() && names[hint] == key) return hint;
    auto it = index.find(std::string(key));
    if (it != index.end()) return it->second;
    names.emplace_back(key);
    fields.push_back(std::make_unique<Shape>());
    last_seen.push_back(0);
    index.emplace(names.back(), names.size() - 1);
    return names.size() - 1;
  }
};

// Places (columns) a collection may have, nested ones included: each costs
// its files and their entries in the manifest, and every record a slot in
// each, so a few bytes of input naming new keys must not multiply them.
constexpr std::size_t kMaxPlaces = 16384;

void count_new_place(std::size_t& places, const Origin& at) {
  if (++places > kMaxPlaces)
    refuse(at, "brings the distinct fields and lists, nested ones included, past " + std::to_string(kMaxPlaces) +
                   ", the most a record collection holds");
}

// `places`: the places in the whole shape so far, counted as they appear.
template <class S>
void infer(Shape& s, typename S::Value v, const Origin& at, int depth, std::size_t& places) {
  ++s.slots;
  const ValueType t = S::type(v, at);
  // A list or object at depth d is level d + 1: the 257th is refused, empty or not.
  if ((t == ValueType::array || t == ValueType::object) && depth >= kMaxRecordDepth)
    refuse(at, "nests deeper than " + std::to_string(kMaxRecordDepth) + " levels");
  s.types |= bit(t);
  switch (t) {
    case ValueType::null: return;
    case ValueType::boolean: (void)S::boolean(v, at); return;
    case ValueType::integer: s.negative |= S::integer(v, at) < 0; return;
    case ValueType::uint: (void)S::uint(v, at); return;
    case ValueType::floating: (void)S::floating(v, at); return;
    case ValueType::string: (void)S::string(v, at); return;
    case ValueType::array:
      if (depth >= kMaxColumnDepth) s.too_deep = true;
      if (!s.items) {
        count_new_place(places, at);
        s.items = std::make_unique<Shape>();
      }
      S::each_item(v, at, [&](auto&& item) { infer<S>(*s.items, item, at, depth + 1, places); });
      return;
    case ValueType::object: {
      if (depth >= kMaxColumnDepth) s.too_deep = true;
      const std::size_t object = ++s.objects;
      std::size_t next = 0;
      bool first = true;
      std::size_t previous = 0;
      S::each_field(v, at, [&](std::string_view key, auto&& member) {
        const std::size_t before = s.names.size();
        const std::size_t k = s.find_or_add(key, next);
        if (s.names.size() != before) count_new_place(places, at.within(key));
        if (s.last_seen[k] == object) refuse(at, "repeats the key \"" + std::string(key) + "\"");
        s.last_seen[k] = object;
        if (!first && k < previous) s.order_varies = true;
        first = false;
        previous = k;
        next = k + 1;
        infer<S>(*s.fields[k], member, at.within(key), depth + 1, places);
      });
      return;
    }
  }
}

// What is stored at a place, decided from its shape.
RecordKind decide(const Shape& s, bool& is_unsigned) {
  is_unsigned = false;
  const std::uint16_t values = s.types & static_cast<std::uint16_t>(~bit(ValueType::null));
  if (values == 0) return RecordKind::null;
  if (s.too_deep && (values & (bit(ValueType::array) | bit(ValueType::object)))) return RecordKind::json;
  if (values == bit(ValueType::boolean)) return RecordKind::boolean;
  if (values == bit(ValueType::integer)) return RecordKind::integer;
  if ((values & ~(bit(ValueType::integer) | bit(ValueType::uint))) == 0) {
    // Beyond int64: unsigned, unless negative values share the place.
    if (s.negative) return RecordKind::json;
    is_unsigned = true;
    return RecordKind::integer;
  }
  if (values == bit(ValueType::floating)) return RecordKind::floating;
  if (values == bit(ValueType::string)) return RecordKind::string;
  if (values == bit(ValueType::array)) return RecordKind::list;
  if (values == bit(ValueType::object)) return RecordKind::object;
  return RecordKind::json;  // types disagree: this place alone keeps JSON text
}

// ---------------------------------------------------------------------------
// Pass 2: the columns.

// Text that the source has not already checked to be UTF-8 is checked here.
template <class S>
void require_utf8(std::string_view text, const Origin& at, const char* what) {
  if constexpr (!S::kValidatedUtf8)
    if (!is_valid_utf8(text)) refuse(at, what);
}

// Compact JSON text of a source value of type `t`, keys in the source's order.
template <class S>
void write_text(std::string& out, typename S::Value v, ValueType t, const Origin& at) {
  switch (t) {
    case ValueType::null: out += "null"; return;
    case ValueType::boolean: out += S::boolean(v, at) ? "true" : "false"; return;
    case ValueType::integer: {
      char buf[24];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, S::integer(v, at)).ptr);
      return;
    }
    case ValueType::uint: {
      char buf[24];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, S::uint(v, at)).ptr);
      return;
    }
    case ValueType::floating: append_json_number(out, S::floating(v, at)); return;
    case ValueType::string: {
      const auto s = S::string(v, at);
      require_utf8<S>(s, at, "holds a string that is not valid UTF-8");
      append_json_string(out, s);
      return;
    }
    case ValueType::array: {
      out += '[';
      bool first = true;
      S::each_item(v, at, [&](auto&& item) {
        if (!first) out += ',';
        first = false;
        write_text<S>(out, item, S::type(item, at), at);
      });
      out += ']';
      return;
    }
    case ValueType::object: {
      out += '{';
      bool first = true;
      S::each_field(v, at, [&](std::string_view key, auto&& member) {
        if (!first) out += ',';
        first = false;
        require_utf8<S>(key, at, "has a key that is not valid UTF-8");
        append_json_string(out, key);
        out += ':';
        write_text<S>(out, member, S::type(member, at), at);
      });
      out += '}';
      return;
    }
  }
}

struct Builder {
  RecordKind kind = RecordKind::null;
  bool is_unsigned = false;
  std::vector<std::uint8_t> states;   // SlotState per slot
  std::vector<std::uint8_t> bools;
  std::vector<std::uint64_t> words;   // integers (two's complement) or float bits
  std::vector<std::int64_t> offsets;  // list, string, json: slots + 1
  std::string text;                   // string, json
  std::vector<std::string> names;
  std::vector<Builder> children;      // object: fields; list: the items
  std::unordered_map<std::string_view, std::size_t> index;
  bool order_varies = false;
  std::vector<std::uint32_t> order_codes;
  std::map<std::vector<std::uint32_t>, std::uint32_t> order_index;
  std::vector<std::size_t> present;    // object: per field, the slot it last held a value in (+1)
  std::vector<std::uint32_t> sequence; // object: the fields of the current slot, in order

  explicit Builder(const Shape& s) {
    kind = decide(s, is_unsigned);
    if (kind == RecordKind::list || kind == RecordKind::string || kind == RecordKind::json) offsets.push_back(0);
    if (kind == RecordKind::list) children.emplace_back(*s.items);
    if (kind == RecordKind::object) {
      names = s.names;
      children.reserve(s.fields.size());
      for (const auto& f : s.fields) children.emplace_back(*f);
      for (std::size_t k = 0; k < names.size(); ++k) index.emplace(names[k], k);
      order_varies = s.order_varies;
      present.assign(names.size(), 0);
    }
  }

  std::size_t slots() const { return states.size(); }

  // A slot without a value: null, or a key the record lacks. An object's
  // fields get a missing slot each, so every column stays one per slot.
  void absent(SlotState state) {
    states.push_back(static_cast<std::uint8_t>(state));
    switch (kind) {
      case RecordKind::null: return;
      case RecordKind::boolean: bools.push_back(0); return;
      case RecordKind::integer: case RecordKind::floating: words.push_back(0); return;
      case RecordKind::list: case RecordKind::string: case RecordKind::json: offsets.push_back(offsets.back()); return;
      case RecordKind::object:
        for (auto& c : children) c.absent(SlotState::missing);
        if (order_varies) order_codes.push_back(code_of({}));
        return;
    }
  }

  std::uint32_t code_of(const std::vector<std::uint32_t>& order) {
    auto [it, added] = order_index.emplace(order, static_cast<std::uint32_t>(order_index.size()));
    (void)added;
    return it->second;
  }
};

[[noreturn]] void changed(const Origin& at) {
  refuse(at, "differs from what the first pass read (was the file changed while it was imported?)");
}

template <class S>
void fill(Builder& b, typename S::Value v, const Origin& at) {
  const ValueType t = S::type(v, at);
  if (t == ValueType::null) return b.absent(SlotState::null);
  if (b.kind == RecordKind::json) {  // a null stays a null slot, so a mostly-null JSON column costs a bit per slot
    b.states.push_back(static_cast<std::uint8_t>(SlotState::value));
    write_text<S>(b.text, v, t, at);
    b.offsets.push_back(static_cast<std::int64_t>(b.text.size()));
    return;
  }
  switch (b.kind) {
    case RecordKind::null: changed(at);
    case RecordKind::boolean:
      if (t != ValueType::boolean) changed(at);
      b.bools.push_back(S::boolean(v, at) ? 1 : 0);
      break;
    case RecordKind::integer:
      if (t == ValueType::integer)
        b.words.push_back(static_cast<std::uint64_t>(S::integer(v, at)));
      else if (t == ValueType::uint)
        b.words.push_back(S::uint(v, at));
      else
        changed(at);
      if (t == ValueType::integer && b.is_unsigned && static_cast<std::int64_t>(b.words.back()) < 0) changed(at);
      break;
    case RecordKind::floating: {
      if (t != ValueType::floating) changed(at);
      const double x = S::floating(v, at);
      std::uint64_t w;
      std::memcpy(&w, &x, sizeof w);
      b.words.push_back(w);
      break;
    }
    case RecordKind::string: {
      if (t != ValueType::string) changed(at);
      const auto s = S::string(v, at);
      require_utf8<S>(s, at, "holds a string that is not valid UTF-8");
      b.text.append(s);
      b.offsets.push_back(static_cast<std::int64_t>(b.text.size()));
      break;
    }
    case RecordKind::list: {
      if (t != ValueType::array) changed(at);
      Builder& items = b.children[0];
      S::each_item(v, at, [&](auto&& item) { fill<S>(items, item, at); });
      b.offsets.push_back(static_cast<std::int64_t>(items.slots()));
      break;
    }
    case RecordKind::object: {
      if (t != ValueType::object) changed(at);
      const std::size_t slot = b.slots() + 1;
      b.sequence.clear();
      S::each_field(v, at, [&](std::string_view key, auto&& member) {
        require_utf8<S>(key, at, "has a key that is not valid UTF-8");
        auto it = b.index.find(key);
        if (it == b.index.end()) changed(at);
        const std::size_t k = it->second;
        if (b.present[k] == slot) changed(at);
        b.present[k] = slot;
        b.sequence.push_back(static_cast<std::uint32_t>(k));
        fill<S>(b.children[k], member, at);
      });
      for (std::size_t k = 0; k < b.children.size(); ++k)
        if (b.present[k] != slot) b.children[k].absent(SlotState::missing);
      if (b.order_varies) b.order_codes.push_back(b.code_of(b.sequence));
      break;
    }
    case RecordKind::json: break;
  }
  b.states.push_back(static_cast<std::uint8_t>(SlotState::value));
}

// ---------------------------------------------------------------------------
// Builders to nodes.


std::shared_ptr<const Buffer> bitmap_where(const std::vector<std::uint8_t>& states, SlotState wanted) {
  return Buffer::adopt(detail::pack_bits(states.size(), [&](std::size_t i) { return states[i] == static_cast<std::uint8_t>(wanted); }));
}

RecordNode finish(Builder&& b) {
  RecordNode n;
  n.kind = b.kind;
  n.is_unsigned = b.is_unsigned;
  n.slots = b.slots();
  // A missing slot holds no value either way: the validity bitmap is for nulls.
  const bool any_null = std::any_of(b.states.begin(), b.states.end(),
                                    [](std::uint8_t s) { return s == static_cast<std::uint8_t>(SlotState::null); });
  const bool any_missing = std::any_of(b.states.begin(), b.states.end(),
                                       [](std::uint8_t s) { return s == static_cast<std::uint8_t>(SlotState::missing); });
  // A null column, or an object without fields, has no other file whose
  // length confirms its slot count: it keeps its bitmap even when full.
  const bool unconfirmed = n.kind == RecordKind::null || (n.kind == RecordKind::object && b.children.empty());
  if (any_null || unconfirmed) n.valid = bitmap_where(b.states, SlotState::value);
  if (any_missing) n.missing = bitmap_where(b.states, SlotState::missing);
  switch (n.kind) {
    case RecordKind::null: break;
    case RecordKind::boolean: n.values = Buffer::adopt(std::move(b.bools)); break;
    case RecordKind::integer: case RecordKind::floating: n.values = Buffer::adopt(std::move(b.words)); break;
    case RecordKind::string: case RecordKind::json:
      n.values = Buffer::adopt(std::move(b.offsets));
      n.bytes = Buffer::adopt(std::vector<char>(b.text.begin(), b.text.end()));
      break;
    case RecordKind::list:
      n.values = Buffer::adopt(std::move(b.offsets));
      n.children.push_back(finish(std::move(b.children[0])));
      break;
    case RecordKind::object:
      n.names = std::move(b.names);
      for (auto& c : b.children) n.children.push_back(finish(std::move(c)));
      if (b.order_varies) {
        n.order_codes = Buffer::adopt(std::move(b.order_codes));
        n.orders.resize(b.order_index.size());
        for (auto& [order, code] : b.order_index) n.orders[code] = order;
      }
      break;
  }
  return n;
}

// ---------------------------------------------------------------------------
// JSON lines, read in blocks.

// A line longer than this is refused rather than held: no record needs it,
// and the buffer holding it is what bounds an import's memory.
constexpr std::size_t kMaxLineBytes = std::size_t{256} << 20;

// Calls f(line, line number) for each non-blank line of `file`, read in
// blocks so that memory stays bounded by the longest line plus a block.
// Returns the bytes read.
template <class F>
std::uint64_t each_line(const std::filesystem::path& file, const std::function<void(std::uint64_t)>& progress,
                        std::uint64_t& done, F&& f) {
  InputFile in = InputFile::open(file);
  constexpr std::size_t kBlock = std::size_t{8} << 20;
  std::vector<char> buf;
  std::size_t have = 0, line_no = 0;
  std::size_t clean = 0;  // leading bytes of `buf` already searched and holding no newline
  std::uint64_t total = 0;
  bool eof = false;
  // The first block is no larger than the file (and one byte to see its
  // end), so that a small file costs little.
  std::size_t block = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, in.size() + 1));
  while (!eof) {
    // Fill one block (a read may return less than asked before the end).
    if (buf.size() < have + block) buf.resize(have + block);
    for (std::size_t filled = 0; filled < block;) {
      const std::size_t got = in.read(MutableBytes(reinterpret_cast<std::byte*>(buf.data() + have), block - filled));
      if (got == 0) {
        eof = true;
        break;
      }
      have += got, filled += got, total += got, done += got;
    }
    if (progress) progress(done);
    std::size_t start = 0;
    while (true) {
      // A long line is searched once, not again with every block it spans.
      const std::size_t from = std::max(start, clean);
      const char* nl = static_cast<const char*>(std::memchr(buf.data() + from, '\n', have - from));
      if (!nl && !eof) break;
      const std::size_t end = nl ? static_cast<std::size_t>(nl - buf.data()) : have;
      ++line_no;
      std::string_view line(buf.data() + start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // a byte order mark
      if (line.find_first_not_of(" \t\r") != std::string_view::npos) f(line, line_no);
      start = nl ? end + 1 : have;
      if (!nl) break;
    }
    std::memmove(buf.data(), buf.data() + start, have - start);
    have -= start;
    clean = have;
    block = kBlock;
    if (have > kMaxLineBytes)
      throw InvalidArgument(file.string() + ":" + std::to_string(line_no + 1) + ": the line is longer than " +
                            std::to_string(kMaxLineBytes >> 20) + " MiB");
  }
  return total;
}

// Parses one line as "[line]" so that any JSON value, scalars included, is
// an on-demand value; the brackets also let a second value on the line show.
class LineParser {
 public:
  template <class F>
  void parse(std::string_view line, const Origin& at, F&& f) {
    const std::size_t need = line.size() + 2 + simdjson::SIMDJSON_PADDING;
    if (padded_.size() < need) padded_.resize(need);
    padded_[0] = '[';
    std::memcpy(padded_.data() + 1, line.data(), line.size());
    padded_[line.size() + 1] = ']';
    simdjson::ondemand::document doc;
    if (auto e = parser_.iterate(padded_.data(), line.size() + 2, padded_.size()).get(doc))
      refuse(at, std::string("is not valid JSON (") + simdjson::error_message(e) + ")");
    auto array = SimdjsonSource::take(doc.get_array(), at);
    std::size_t count = 0;
    for (auto item : array) {
      simdjson::ondemand::value value = SimdjsonSource::take(std::move(item), at);
      if (++count > 1) refuse(at, "holds more than one JSON value");
      f(value);
    }
    if (count == 0) refuse(at, "holds no JSON value");
    // Fully read, the document has no current location; text after the value has one.
    const char* rest = nullptr;
    if (!doc.current_location().get(rest)) refuse(at, "is not valid JSON (text after the value)");
  }

 private:
  simdjson::ondemand::parser parser_;
  std::vector<char> padded_;
};

RecordCollection make_collection(RecordNode&& root, std::size_t size) {
  root.label = "record collection";
  return detail::RecordAccess::make(std::make_shared<const RecordNode>(std::move(root)), size);
}

template <class J>
RecordCollection build_from(std::span<const J> records) {
  using S = NlohmannSource<J>;
  Shape shape;
  std::size_t places = 1;
  for (std::size_t i = 0; i < records.size(); ++i) infer<S>(shape, records[i], Origin{nullptr, i}, 0, places);
  Builder b(shape);
  for (std::size_t i = 0; i < records.size(); ++i) fill<S>(b, records[i], Origin{nullptr, i});
  return make_collection(finish(std::move(b)), records.size());
}

}  // namespace

// ---------------------------------------------------------------------------
// Record access.

namespace detail {

SlotState state_at(const RecordNode& n, std::size_t i) {
  if (n.missing && bit_at(*n.missing, i)) return SlotState::missing;
  if (n.kind == RecordKind::null || (n.valid && !bit_at(*n.valid, i))) return SlotState::null;
  return SlotState::value;
}

std::string_view text_at(const RecordNode& n, std::size_t i) {
  const std::size_t k = n.codes ? reinterpret_cast<const std::uint32_t*>(n.codes->data())[i] : i;
  const auto* o = reinterpret_cast<const std::int64_t*>(n.values->data());
  return {reinterpret_cast<const char*>(n.bytes->data()) + o[k], static_cast<std::size_t>(o[k + 1] - o[k])};
}

namespace {

void append_value(std::string& out, const RecordNode& n, std::size_t i);

void append_slot(std::string& out, const RecordNode& n, std::size_t i) {
  if (state_at(n, i) == SlotState::value)
    append_value(out, n, i);
  else
    out += "null";
}

void append_value(std::string& out, const RecordNode& n, std::size_t i) {
  switch (n.kind) {
    case RecordKind::null: out += "null"; return;
    case RecordKind::boolean: out += n.values->data()[i] != std::byte{0} ? "true" : "false"; return;
    case RecordKind::integer: {
      std::uint64_t w;
      std::memcpy(&w, n.values->data() + i * 8, 8);
      char buf[24];
      char* end = n.is_unsigned ? std::to_chars(buf, buf + sizeof buf, w).ptr
                                : std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(w)).ptr;
      out.append(buf, end);
      return;
    }
    case RecordKind::floating: {
      double x;
      std::memcpy(&x, n.values->data() + i * 8, 8);
      append_json_number(out, x);
      return;
    }
    case RecordKind::string: append_json_string(out, text_at(n, i)); return;
    case RecordKind::json: out += text_at(n, i); return;
    case RecordKind::list: {
      const auto* o = reinterpret_cast<const std::int64_t*>(n.values->data());
      out += '[';
      for (auto j = o[i]; j < o[i + 1]; ++j) {
        if (j > o[i]) out += ',';
        append_slot(out, n.children[0], static_cast<std::size_t>(j));
      }
      out += ']';
      return;
    }
    case RecordKind::object: {
      out += '{';
      bool first = true;
      auto field = [&](std::size_t k) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, n.names[k]);
        out += ':';
        append_slot(out, n.children[k], i);
      };
      if (!n.order_codes) {
        for (std::size_t k = 0; k < n.children.size(); ++k)
          if (state_at(n.children[k], i) != SlotState::missing) field(k);
      } else {
        const auto& order = n.orders[reinterpret_cast<const std::uint32_t*>(n.order_codes->data())[i]];
        std::size_t present = 0;
        for (std::size_t k = 0; k < n.children.size(); ++k) present += state_at(n.children[k], i) != SlotState::missing;
        for (std::uint32_t k : order) {
          if (state_at(n.children[k], i) == SlotState::missing)
            throw CorruptData("the key order of slot " + std::to_string(i) + " names field '" + n.names[k] +
                              "', which the slot lacks");
          field(k);
        }
        if (order.size() != present)
          throw CorruptData("the key order of slot " + std::to_string(i) + " lists " + std::to_string(order.size()) +
                            " of its " + std::to_string(present) + " fields");
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

nlohmann::json schema_entry(RecordKind kind, bool is_unsigned, bool nullable, bool optional, bool per_record) {
  nlohmann::json s = {{"kind", kind_name(kind)}, {"nullable", nullable}, {"optional", optional}};
  if (kind == RecordKind::integer) s["dtype"] = is_unsigned ? "uint64" : "int64";
  if (kind == RecordKind::object) s["key_order"] = per_record ? "per_record" : "schema";
  return s;
}

nlohmann::json schema_of(const RecordNode& n) {
  nlohmann::json s = schema_entry(n.kind, n.is_unsigned, static_cast<bool>(n.valid), static_cast<bool>(n.missing),
                                  static_cast<bool>(n.order_codes));
  if (n.kind == RecordKind::list) s["items"] = schema_of(n.children[0]);
  if (n.kind == RecordKind::object) {
    s["fields"] = nlohmann::json::array();
    for (std::size_t k = 0; k < n.children.size(); ++k) {
      nlohmann::json f = schema_of(n.children[k]);
      f["name"] = n.names[k];
      s["fields"].push_back(std::move(f));
    }
  }
  return s;
}

}  // namespace detail

// The empty collection as from_json builds it (a null root with its empty
// bitmap), so that it saves and loads like any other.
RecordCollection::RecordCollection() { *this = from_json(std::span<const nlohmann::json>{}); }

RecordCollection::RecordCollection(std::shared_ptr<const RecordNode> root, std::size_t size)
    : root_(std::move(root)), size_(size) {}

RecordCollection RecordCollection::from_json(std::span<const nlohmann::ordered_json> records) {
  return build_from(records);
}
RecordCollection RecordCollection::from_json(std::span<const nlohmann::json> records) {
  return build_from(records);
}

void detail::read_jsonl_chunks(const std::filesystem::path& file, int passes, std::size_t chunk_bytes,
                               const std::function<void(int, RecordNode&&, std::size_t)>& take,
                               const std::function<void(std::uint64_t)>& progress) {
  Shape shape;
  LineParser parser;
  std::size_t places = 1;
  std::uint64_t done = 0;
  std::size_t count = 0;
  const std::uint64_t first = each_line(file, progress, done, [&](std::string_view line, std::size_t line_no) {
    const Origin at{&file, line_no};
    parser.parse(line, at, [&](SimdjsonSource::Value v) { infer<SimdjsonSource>(shape, v, at, 0, places); });
    ++count;
  });
  // A chunk holds a slot per record in every place, present or not (about
  // ten bytes each while built): with many distinct keys, fewer records make
  // a chunk, so that its memory stays near 5 x chunk_bytes whatever the
  // number of places.
  const std::size_t chunk_records =
      chunk_bytes == 0 ? std::numeric_limits<std::size_t>::max() : std::max<std::size_t>(1, chunk_bytes / (2 * places));
  for (int pass = 0; pass < passes; ++pass) {
    std::optional<Builder> b(std::in_place, shape);
    std::size_t filled = 0, records = 0, bytes = 0;
    auto hand_over = [&] {
      take(pass, finish(std::move(*b)), records);
      b.emplace(shape);
      records = bytes = 0;
    };
    const std::uint64_t again = each_line(file, progress, done, [&](std::string_view line, std::size_t line_no) {
      const Origin at{&file, line_no};
      if (++filled > count) changed(at);
      parser.parse(line, at, [&](SimdjsonSource::Value v) { fill<SimdjsonSource>(*b, v, at); });
      ++records;
      bytes += line.size();
      if (chunk_bytes != 0 && (bytes >= chunk_bytes || records >= chunk_records)) hand_over();
    });
    if (filled != count || first != again) changed(Origin{&file, filled});
    if (records > 0 || count == 0) hand_over();
  }
}

RecordCollection RecordCollection::read_jsonl(const std::filesystem::path& file,
                                              const std::function<void(std::uint64_t)>& progress) {
  std::optional<RecordCollection> read;
  detail::read_jsonl_chunks(
      file, 1, 0, [&](int, detail::RecordNode&& root, std::size_t records) { read = make_collection(std::move(root), records); },
      progress);
  return std::move(*read);
}

std::string RecordCollection::record_json(std::size_t i) const {
  if (i >= size_)
    throw InvalidArgument("record " + std::to_string(i) + " is out of range (" + std::to_string(size_) + " records)");
  std::string out;
  try {
    detail::append_slot(out, *root_, i);
  } catch (const InvalidArgument& e) {
    // Built collections hold only what JSON can; a loaded one may not.
    throw CorruptData(root_->label + ": record " + std::to_string(i) + ": " + e.what());
  } catch (const CorruptData& e) {
    throw CorruptData(root_->label + ": record " + std::to_string(i) + ": " + e.what());
  }
  return out;
}

nlohmann::ordered_json RecordCollection::record(std::size_t i) const {
  return nlohmann::ordered_json::parse(record_json(i));
}

void RecordCollection::write_jsonl(const std::filesystem::path& file) const {
  std::string text;
  for (std::size_t i = 0; i < size_; ++i) {
    text += record_json(i);
    text += '\n';
  }
  const ConstBytes data(reinterpret_cast<const std::byte*>(text.data()), text.size());
  write_file_atomically(file, std::span<const ConstBytes>(&data, 1));
}

nlohmann::json RecordCollection::schema() const { return detail::schema_of(*root_); }

bool RecordCollection::equals(const RecordCollection& other) const {
  if (size_ != other.size_) return false;
  for (std::size_t i = 0; i < size_; ++i)
    if (record_json(i) != other.record_json(i)) return false;
  return true;
}

}  // namespace amphora
