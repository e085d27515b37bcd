// Canonical JSON text and the parse of untrusted JSON. Both are on the path of
// every save and load of JSON-holding values (configs, record fields, name
// records, manifests), so each does its work in one pass: the writer checks
// while it writes, and the parser builds the document from simdjson's tape.

#include "json_text.hpp"

#include <amphora/json.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>
#include <amphora/parallel.hpp>

#include <simdjson.h>

#include <cstdio>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>

namespace amphora {

namespace {

constexpr int kMaxJsonDepth = 64;

// Writing and building a document are both mostly per-item work: an array
// of at least two blocks of this many items is done a block per core.
constexpr std::size_t kArrayBlock = 256;
bool split_array(std::size_t items) { return items >= 2 * kArrayBlock && parallel_threads() > 1; }

// Where in a document a check failed, built only when one does: walking a
// large document must not allocate a path string per node.
struct JsonPath {
  const JsonPath* parent;
  const std::string* key;  // or, when null, `index`
  std::size_t index;
  std::string str() const {
    std::string head = parent ? parent->str() : std::string();
    return key ? head + "." + *key : head + "[" + std::to_string(index) + "]";
  }
};

// Appends to a string through a raw cursor: the writer emits a few bytes at
// a time, and std::string::push_back is not inlined. A writer asks for room
// for the most it may write, writes through the pointer and commits where it
// stopped. The string is cut to what was written when the appender goes.
class Appender {
 public:
  explicit Appender(std::string& s) : s_(s), start_(s.size()), n_(s.size()) {}
  ~Appender() { s_.resize(n_); }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  [[gnu::always_inline]] char* room(std::size_t k) {
    if (s_.size() - n_ < k) grow(k);
    return s_.data() + n_;
  }
  [[gnu::always_inline]] void commit(const char* end) { n_ = static_cast<std::size_t>(end - s_.data()); }

  [[gnu::always_inline]] void put(char c) {
    char* w = room(1);
    *w = c;
    commit(w + 1);
  }
  void put(const char* p, std::size_t k) {
    char* w = room(k);
    std::memcpy(w, p, k);
    commit(w + k);
  }
  void put(std::string_view v) { put(v.data(), v.size()); }

 private:
  // By as much again as this appender has written (64 bytes at least), so a
  // long walk grows geometrically while a short one (a string appended to a
  // large text, as manifests and records are written) fills only a few bytes
  // beyond its own: resize zero-fills what it adds, and growing to the
  // string's capacity made every short append cost the whole text's slack.
  [[gnu::noinline]] void grow(std::size_t k) { s_.resize(n_ + k + std::max<std::size_t>(64, n_ - start_)); }
  std::string& s_;
  std::size_t start_;
  std::size_t n_;
};

// How the canonical form writes each byte of a string: as it is (0), escaped
// (1: quote, backslash, control characters), or as part of a multi-byte
// UTF-8 sequence (2), which is validated.
constexpr std::array<std::uint8_t, 256> kByteClass = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 1;
  t['"'] = t['\\'] = 1;
  for (int c = 0x80; c < 0x100; ++c) t[c] = 2;
  return t;
}();

// Walks a document once, checking what JSON text cannot hold exactly and,
// when `out` is given, writing the canonical text: nlohmann::json's compact
// dump with non-ASCII kept as UTF-8 (its keys are already in byte order).
class CanonicalWalk {
 public:
  // `indent` >= 0 writes nlohmann's indented layout instead of the compact
  // one: a member or item per line, `indent` spaces a level, ": " after keys.
  CanonicalWalk(Appender* out, std::string_view what, int max_depth, int indent = -1)
      : out_(out), what_(what), max_depth_(max_depth), indent_(indent) {}

  void value(const nlohmann::json& v, const JsonPath* at, int depth) {
    if (depth > max_depth_)
      throw InvalidArgument(where(at) + " nests deeper than " + std::to_string(max_depth_) + " levels");
    switch (v.type()) {
      case nlohmann::json::value_t::null: return put("null");
      case nlohmann::json::value_t::boolean: return put(v.get<bool>() ? "true" : "false");
      case nlohmann::json::value_t::number_integer: return integer(v.get<std::int64_t>());
      case nlohmann::json::value_t::number_unsigned: return integer(v.get<std::uint64_t>());
      case nlohmann::json::value_t::number_float: return number(v.get<double>(), at);
      case nlohmann::json::value_t::string:
        return string(v.get_ref<const std::string&>(), at, "holds a string that is not valid UTF-8");
      case nlohmann::json::value_t::object: {
        const auto& members = v.get_ref<const nlohmann::json::object_t&>();
        put('{');
        bool first = true;
        for (const auto& [key, member] : members) {
          if (!first) put(',');
          first = false;
          line(depth + 1);
          string(key, at, "has a key that is not valid UTF-8");
          put(indent_ < 0 ? ":" : ": ");
          JsonPath here{at, &key, 0};
          value(member, &here, depth + 1);
        }
        if (!members.empty()) line(depth);
        return put('}');
      }
      case nlohmann::json::value_t::array: {
        const auto& items = v.get_ref<const nlohmann::json::array_t&>();
        if (out_ && split_array(items.size())) return blocks(items, at, depth);
        put('[');
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) put(',');
          line(depth + 1);
          JsonPath here{at, nullptr, i};
          value(items[i], &here, depth + 1);
        }
        if (!items.empty()) line(depth);
        return put(']');
      }
      case nlohmann::json::value_t::binary:
        throw InvalidArgument(where(at) + " holds binary data, which JSON cannot represent");
      case nlohmann::json::value_t::discarded:
        throw InvalidArgument(where(at) + " holds a discarded value, which JSON cannot represent");
    }
  }

  void number(double x, const JsonPath* at) {
    if (!std::isfinite(x))
      throw InvalidArgument(where(at) + " holds " + (std::isnan(x) ? "NaN" : "an infinity") +
                            ", which JSON cannot represent");
    if (!out_) return;
    // nlohmann's own shortest round-trip formatting, so the bytes are the
    // ones its dump gives (a ".0" on integral values, its exponent style).
    char* w = out_->room(64);
    out_->commit(nlohmann::detail::to_chars(w, w + 64, x));
  }

  // Escapes as nlohmann's dump does without ensure_ascii: the two-character
  // forms for \b \t \n \f \r " and \, \u00xx for other control characters,
  // every other byte as it is. Eight bytes at a time while none of them
  // needs a look (most names and values).
  void string(std::string_view s, const JsonPath* at, const char* invalid) {
    const char* p = s.data();
    const char* const end = p + s.size();
    bool ascii = true;
    if (!out_) {
      for (; p < end; ++p) ascii &= static_cast<unsigned char>(*p) < 0x80;
    } else {
      // Room is asked for a slice at a time: six bytes per byte at worst,
      // which for a long string would be a large reservation for nothing.
      constexpr std::size_t kSlice = 4096;
      auto slice_room = [&] { return out_->room(6 * std::min<std::size_t>(kSlice, end - p) + 2); };  // + the quotes
      char* w = slice_room();
      *w++ = '"';
      for (;;) {
        const char* const stop = p + std::min<std::size_t>(kSlice, end - p);
        while (p < stop) {
          if (stop - p >= 8) {
            std::uint64_t word;
            std::memcpy(&word, p, 8);
            if (!needs_a_look(word)) {
              std::memcpy(w, p, 8);
              w += 8;
              p += 8;
              continue;
            }
          }
          const auto c = static_cast<unsigned char>(*p++);
          const std::uint8_t kind = kByteClass[c];
          if (kind == 1) {
            w = escape(w, c);
            continue;
          }
          ascii &= kind == 0;
          *w++ = static_cast<char>(c);
        }
        if (p == end) break;
        out_->commit(w);
        w = slice_room();
      }
      *w++ = '"';
      out_->commit(w);
    }
    if (!ascii && !is_valid_utf8(s)) throw InvalidArgument(where(at) + " " + invalid);
  }

 private:
  // Whether any of eight bytes is a control character, a quote, a
  // backslash or part of a multi-byte sequence (the classic has-less-than
  // and has-zero-byte tests, exact for these constants).
  static bool needs_a_look(std::uint64_t x) {
    constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    auto has_zero = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
    const std::uint64_t below_space = (x - ones * 0x20) & ~x & highs;
    return ((x & highs) | below_space | has_zero(x ^ (ones * '"')) | has_zero(x ^ (ones * '\\'))) != 0;
  }

  static char* escape(char* w, unsigned char c) {
    static const char hex[] = "0123456789abcdef";
    *w++ = '\\';
    switch (c) {
      case '"': *w++ = '"'; break;
      case '\\': *w++ = '\\'; break;
      case '\b': *w++ = 'b'; break;
      case '\t': *w++ = 't'; break;
      case '\n': *w++ = 'n'; break;
      case '\f': *w++ = 'f'; break;
      case '\r': *w++ = 'r'; break;
      default:
        std::memcpy(w, "u00", 3);
        w[3] = hex[c >> 4];
        w[4] = hex[c & 15];
        w += 5;
    }
    return w;
  }

  // A long array (a config's list of layers, say) is written a block of
  // items per core, each block into a text of its own, joined in order. A
  // failure is reported from the first failing block, as one pass would.
  void blocks(const nlohmann::json::array_t& items, const JsonPath* at, int depth) {
    const std::size_t count = (items.size() + kArrayBlock - 1) / kArrayBlock;
    std::vector<std::string> texts(count);
    std::vector<std::exception_ptr> failures(count);
    parallel_for(count, [&](std::size_t b) {
      try {
        Appender text(texts[b]);
        CanonicalWalk walk(&text, what_, max_depth_, indent_);
        for (std::size_t i = b * kArrayBlock; i < std::min(items.size(), (b + 1) * kArrayBlock); ++i) {
          if (i) text.put(',');
          walk.line(depth + 1);
          JsonPath here{at, nullptr, i};
          walk.value(items[i], &here, depth + 1);
        }
      } catch (...) {
        failures[b] = std::current_exception();
      }
    });
    for (const auto& failure : failures)
      if (failure) std::rethrow_exception(failure);
    put('[');
    for (const auto& text : texts) out_->put(text);
    line(depth);
    put(']');
  }

  // Where the indented layout starts a line: a newline and the level's
  // spaces; nothing in the compact one.
  void line(int depth) {
    if (indent_ < 0 || !out_) return;
    const auto spaces = static_cast<std::size_t>(indent_) * static_cast<std::size_t>(depth);
    char* w = out_->room(spaces + 1);
    *w++ = '\n';
    std::memset(w, ' ', spaces);
    out_->commit(w + spaces);
  }

  std::string where(const JsonPath* at) const { return std::string(what_) + (at ? " at " + at->str() : ""); }

  [[gnu::always_inline]] void put(char c) {
    if (out_) out_->put(c);
  }
  void put(std::string_view s) {
    if (out_) out_->put(s);
  }

  template <class Integer>
  void integer(Integer n) {
    if (!out_) return;
    char* w = out_->room(24);
    out_->commit(std::to_chars(w, w + 24, n).ptr);
  }

  Appender* out_;
  std::string_view what_;
  int max_depth_;
  int indent_;
};

}  // namespace

namespace {

// The length of the well-formed UTF-8 sequence at `p`, or 0 when there is none.
std::size_t utf8_sequence(const unsigned char* p, const unsigned char* end) {
  unsigned c = *p;
  if (c < 0x80) return 1;
  int extra;
  std::uint32_t cp, min;
  if ((c & 0xe0) == 0xc0) extra = 1, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0) extra = 2, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0) extra = 3, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (end - p <= extra) return 0;
  for (int k = 1; k <= extra; ++k) {
    if ((p[k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return static_cast<std::size_t>(extra) + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    auto n = utf8_sequence(p, end);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

std::string valid_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    auto n = utf8_sequence(p, end);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for each byte that starts no sequence
      ++p;
    } else {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    }
  }
  return out;
}

void validate_storable_json(const nlohmann::json& value, std::string_view what) {
  CanonicalWalk(nullptr, what, kMaxJsonDepth - 4).value(value, nullptr, 0);
}

std::string canonical_json(const nlohmann::json& value) {
  std::string text;
  detail::append_canonical_json(text, value, "JSON value");
  return text;
}

Digest json_digest(const nlohmann::json& value) { return Digest(Sha256::of(canonical_json(value))); }

namespace {

// Writes the typed encoding of a value; `path` names where it is, for errors.
class TypedWriter {
 public:
  explicit TypedWriter(std::string& out) : out_(out) {}

  void value(const nlohmann::json& v, const std::string& path, int depth) {
    using Type = nlohmann::json::value_t;
    switch (v.type()) {
      case Type::null: out_ += 'n'; return;
      case Type::boolean: out_ += v.get<bool>() ? 't' : 'f'; return;
      case Type::number_integer: out_ += 'i'; return word(static_cast<std::uint64_t>(v.get<std::int64_t>()));
      case Type::number_unsigned: {
        // The same integer is the same key, however it was parsed.
        const auto u = v.get<std::uint64_t>();
        out_ += u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? 'i' : 'u';
        return word(u);
      }
      case Type::number_float: {
        const double x = v.get<double>();
        std::uint64_t bits = 0x7FF8000000000000ull;  // every NaN alike: its payload is no part of the value
        if (!std::isnan(x)) std::memcpy(&bits, &x, sizeof bits);
        out_ += 'd';
        return word(bits);
      }
      case Type::string: out_ += 's'; return text(v.get_ref<const std::string&>(), path);
      case Type::array: {
        nest(depth, path);
        out_ += 'a';
        word(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) value(v[i], path + "[" + std::to_string(i) + "]", depth + 1);
        return;
      }
      case Type::object: {
        nest(depth, path);
        out_ += 'o';
        word(v.size());
        std::vector<const std::string*> keys;
        for (const auto& item : v.items()) keys.push_back(&item.key());
        std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
        for (const std::string* key : keys) {
          const std::string at = path + "/" + *key;
          text(*key, at);
          value(v.at(*key), at, depth + 1);
        }
        return;
      }
      case Type::binary: case Type::discarded: break;
    }
    throw InvalidArgument("a typed encoding cannot hold the binary value at '" + (path.empty() ? "/" : path) + "'");
  }

 private:
  void word(std::uint64_t w) {
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((w >> (8 * i)) & 0xFF);
  }
  void text(const std::string& s, const std::string& path) {
    if (!is_valid_utf8(s)) throw InvalidArgument("the string at '" + (path.empty() ? "/" : path) + "' is not valid UTF-8");
    word(s.size());
    out_ += s;
  }
  static void nest(int depth, const std::string& path) {
    if (depth >= kMaxJsonDepth)
      throw InvalidArgument("the value at '" + (path.empty() ? "/" : path) + "' nests deeper than " +
                            std::to_string(kMaxJsonDepth) + " levels");
  }
  std::string& out_;
};

}  // namespace

std::string typed_encoding(const nlohmann::json& value) {
  std::string out;
  TypedWriter(out).value(value, "", 0);
  return out;
}

Digest typed_digest(const nlohmann::json& value) { return Digest(Sha256::of(typed_encoding(value))); }

void append_json_string(std::string& out, std::string_view text) {
  Appender a(out);
  CanonicalWalk(&a, "a JSON string", 0).string(text, nullptr, "is not valid UTF-8");
}

void append_json_number(std::string& out, double x) {
  Appender a(out);
  CanonicalWalk(&a, "a JSON number", 0).number(x, nullptr);
}

void detail::append_json_text(std::string& out, const nlohmann::json& value, int indent, std::string_view what) {
  Appender text(out);
  CanonicalWalk(&text, what, std::numeric_limits<int>::max(), indent).value(value, nullptr, 0);
}

void detail::append_canonical_json(std::string& out, const nlohmann::json& value, std::string_view what,
                                   bool limit_depth) {
  Appender text(out);
  CanonicalWalk(&text, what, limit_depth ? kMaxJsonDepth - 4 : std::numeric_limits<int>::max()).value(value, nullptr, 0);
}

void detail::append_canonical_member(std::string& out, const nlohmann::json& value, std::string_view what,
                                    const std::string& key) {
  Appender text(out);
  const JsonPath at{nullptr, &key, 0};
  CanonicalWalk(&text, what, std::numeric_limits<int>::max()).value(value, &at, 1);
}

// ---------------------------------------------------------------------------

namespace {

// The deepest nesting of arrays and objects in `text`, brackets inside
// strings not counted. Linear and allocation-free.
int json_nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// nlohmann's types for what simdjson read: non-negative integers unsigned,
// negative ones signed, and a repeated key keeps its last value, as
// nlohmann::json::parse does.
struct TooDeep {};  // caught by parse_untrusted_json, which words the message
[[noreturn]] void too_deep() { throw TooDeep{}; }

// `depth`: containers around `e`, counted as json_nesting counts them.
nlohmann::json from_tape(simdjson::dom::element e, int depth) {
  using Type = simdjson::dom::element_type;
  const Type type = e.type();
  if ((type == Type::OBJECT || type == Type::ARRAY) && depth >= kMaxJsonDepth) too_deep();
  switch (type) {
    case Type::OBJECT: {
      nlohmann::json object(nlohmann::json::value_t::object);
      auto& members = object.get_ref<nlohmann::json::object_t&>();
      simdjson::dom::object fields = e.get_object().value_unsafe();
      for (auto field : fields)
        members.insert_or_assign(members.end(), std::string(field.key), from_tape(field.value, depth + 1));
      return object;
    }
    case Type::ARRAY: {
      nlohmann::json array(nlohmann::json::value_t::array);
      auto& items = array.get_ref<nlohmann::json::array_t&>();
      simdjson::dom::array elements = e.get_array().value_unsafe();
      const std::size_t count = elements.size();
      // Building the document is mostly allocation; a long array (a config's
      // list of layers, say) is built a block of elements per core.
      if (!split_array(count)) {
        items.reserve(count);
        for (auto element : elements) items.push_back(from_tape(element, depth + 1));
        return array;
      }
      std::vector<simdjson::dom::element> tape;
      tape.reserve(count);
      for (auto element : elements) tape.push_back(element);
      items.resize(count);
      parallel_for((count + kArrayBlock - 1) / kArrayBlock, [&](std::size_t b) {
        for (std::size_t i = b * kArrayBlock; i < std::min(count, (b + 1) * kArrayBlock); ++i)
          items[i] = from_tape(tape[i], depth + 1);
      });
      return array;
    }
    case Type::STRING: return std::string(e.get_string().value_unsafe());
    case Type::INT64: {
      std::int64_t n = e.get_int64().value_unsafe();
      return n >= 0 ? nlohmann::json(static_cast<std::uint64_t>(n)) : nlohmann::json(n);
    }
    case Type::UINT64: return e.get_uint64().value_unsafe();
    case Type::DOUBLE: return e.get_double().value_unsafe();
    case Type::BOOL: return e.get_bool().value_unsafe();
    case Type::NULL_VALUE: return nullptr;
  }
  return nullptr;
}

}  // namespace

namespace {

nlohmann::json parse_checked(std::string_view text) {
  // One parser per thread keeps its buffers between documents; documents
  // beyond 64 MiB get a parser of their own, so none stays that large.
  // simdjson counts depth its own way (an object's members one level below
  // the object), so its limit only bounds its stack; from_tape applies ours.
  constexpr std::size_t kKeptCapacity = 64u << 20;
  constexpr std::size_t kParserDepth = 2 * kMaxJsonDepth + 2;
  thread_local simdjson::dom::parser kept;
  thread_local bool kept_ready = kept.allocate(simdjson::SIMDJSON_PADDING, kParserDepth) == simdjson::SUCCESS;
  std::unique_ptr<simdjson::dom::parser> own;
  simdjson::dom::parser* parser = &kept;
  if (text.size() > kKeptCapacity || !kept_ready) {
    own = std::make_unique<simdjson::dom::parser>(text.size());
    if (own->allocate(text.size(), kParserDepth) != simdjson::SUCCESS) throw std::bad_alloc();
    parser = own.get();
  }
  simdjson::dom::element root;
  const auto error = parser->parse(text.data(), text.size(), true).get(root);
  if (error == simdjson::SUCCESS) return from_tape(root, 0);
  if (error == simdjson::DEPTH_ERROR || json_nesting(text) > kMaxJsonDepth) too_deep();
  // What simdjson refuses (a syntax error, but also a byte-order mark or an
  // integer beyond 64 bits, which nlohmann accepts) gets nlohmann's verdict
  // and its error message, which names the offending byte.
  return nlohmann::json::parse(text);
}

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text) {
  // No JSON text holds a raw NUL (in a string it is written \u0000); both
  // parsers below would stop at one and read the text before it as the
  // whole, so "[1]\0anything" would pass for [1].
  if (const void* nul = std::memchr(text.data(), 0, text.size()))
    throw CorruptData("a NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - text.data()) +
                      ", which no JSON text holds");
  try {
    return parse_checked(text);
  } catch (const TooDeep&) {
    throw CorruptData("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels, the most a JSON document may nest");
  } catch (const nlohmann::json::exception& e) {
    throw CorruptData(e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfResources("out of memory parsing " + std::to_string(text.size()) + " bytes of JSON");
  }
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buf[12];
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0, n = text.size();
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence is kept unless it encodes a C1 control;
    // any other byte (a stray 8-bit C1 byte included) is shown as \xNN.
    std::size_t len = utf8_sequence(p + i, p + n);
    if (len == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    std::uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3f);
    // C1 controls; and what reorders or breaks what a terminal shows: the
    // bidirectional marks, embeddings, overrides and isolates, and the
    // line and paragraph separators.
    const bool hidden = (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
                        (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
    if (hidden) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace amphora
