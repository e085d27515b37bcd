#pragma once
// JSON text in and out: the canonical form of a value and its digest (the
// bytes manifests are hashed as), the typed encoding pipelines key on
// (docs/FORMAT.md §3.3, §3.7), and the checks on JSON read from or written
// to a store.

#include <amphora/export.hpp>
#include <amphora/digest.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// The canonical text of `value`: no whitespace, object keys sorted by their
/// UTF-8 bytes at every depth, array order kept, non-ASCII left unescaped,
/// integers in decimal, floats as shortest round-trip digits (FORMAT.md §3.3).
/// Equal values give equal bytes in any process. Throws InvalidArgument (naming
/// the key path) for NaN or infinite numbers, invalid UTF-8, binary values or
/// nesting deeper than a store accepts.
std::string canonical_json(const nlohmann::json& value);

/// `sha256:` of canonical_json(value). Throws as canonical_json.
Digest json_digest(const nlohmann::json& value);

/// The typed encoding of `value` (FORMAT.md §3.7): a type byte per value,
/// fixed-width little-endian numbers, length-prefixed strings, object
/// members sorted by key. Unlike the canonical text it keeps what text would
/// blur: 1, 1.0 and "1" differ, a float is its exact bits (-0.0 is not 0.0;
/// every NaN is one NaN), and no value's bytes can run into the next's.
/// Pipelines key on it. Throws InvalidArgument (naming the key path) for
/// invalid UTF-8, binary values or nesting deeper than 64 levels.
std::string typed_encoding(const nlohmann::json& value);

/// `sha256:` of typed_encoding(value). Throws as typed_encoding.
Digest typed_digest(const nlohmann::json& value);

/// Appends `text` to `out` as a JSON string literal in the canonical form's
/// escaping. Throws InvalidArgument when `text` is not valid UTF-8 (`out`
/// then holds a partial literal).
void append_json_string(std::string& out, std::string_view text);
/// Appends `x` to `out` as the canonical form writes a float: the shortest
/// digits that read back to the same double, with ".0" on integral values.
/// Throws InvalidArgument for NaN or an infinity.
void append_json_number(std::string& out, double x);

/// Parses JSON read from disk, refusing nesting deeper than 64 levels so a
/// hostile document cannot exhaust the stack. Throws CorruptData carrying the
/// parser's message (which names the offending byte), OutOfResources.
nlohmann::json parse_untrusted_json(std::string_view text);

/// Throws InvalidArgument (naming `what` and the offending key path) unless
/// `value` can be stored and read back exactly: no NaN or infinite numbers
/// (JSON has none), only valid UTF-8 in strings and keys, and nesting no
/// deeper than parse_untrusted_json accepts.
void validate_storable_json(const nlohmann::json& value, std::string_view what);
/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points above U+10FFFF).
bool is_valid_utf8(std::string_view text);
/// `text` with every byte that starts no well-formed UTF-8 sequence replaced
/// by U+FFFD: a message whose bytes are not text, made storable as JSON.
std::string valid_utf8(std::string_view text);
/// `text` safe to print to a terminal: control characters (C0, DEL, C1),
/// the bidirectional controls (U+061C, U+200E/F, U+202A-E, U+2066-9), the
/// line and paragraph separators (U+2028/9) and bytes that are not
/// well-formed UTF-8 are escaped as \xNN or \uNNNN, so text from a store or
/// from a step's exception cannot send escape sequences or reorder a line.
std::string printable(std::string_view text);

}  // namespace amphora

AMPHORA_API_END
