#pragma once
// JSON text in and out: the canonical writer behind canonical_json, write_json
// and manifests, and the parser behind parse_untrusted_json. Internal to the
// framework.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace amphora::detail {

/// Appends the canonical text of `value` (FORMAT.md §3.3: nlohmann::json's
/// compact dump, non-ASCII unescaped) to `out`, checking as it goes what
/// validate_storable_json checks (nesting depth only when `limit_depth`).
/// Throws InvalidArgument naming `what` and the key path.
void append_canonical_json(std::string& out, const nlohmann::json& value, std::string_view what,
                           bool limit_depth = true);

/// append_canonical_json, without a depth limit, of `value` as the member
/// `key` of an enclosing object: paths in errors start ".key".
void append_canonical_member(std::string& out, const nlohmann::json& value, std::string_view what,
                             const std::string& key);

/// Appends `value` as nlohmann's dump(indent) writes it with strict UTF-8
/// (byte for byte; compact when `indent` < 0), checked as the canonical
/// writer checks but at any depth, and several times faster: for the
/// records a store writes (names, cache entries, runs). Throws
/// InvalidArgument naming `what` and the key path.
void append_json_text(std::string& out, const nlohmann::json& value, int indent, std::string_view what);

}  // namespace amphora::detail
