#pragma once
// What saving a table column in memory and importing one from a CSV file
// share, so that both store the same bytes and metadata (docs/FORMAT.md §9).
// Internal to the materializers.

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <type_traits>

namespace amphora::detail {

/// The payload files of column `k` start with this path.
inline std::string column_path(std::size_t k) { return "columns/" + std::to_string(k); }

/// The smallest and largest non-null, non-NaN value of a column, given one
/// at a time in row order.
template <class T>
struct ValueRange {
  bool any = false;
  T lo{}, hi{};

  void add(T v) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(v)) return;
    if (!any || v < lo) lo = v;
    if (!any || v > hi) hi = v;
    any = true;
  }

  /// Sets meta "min" and "max" (null when there was no value, and for an
  /// infinite float: JSON has no infinities).
  void write(nlohmann::json& meta) const {
    auto bound = [&](T v) {
      if constexpr (std::is_floating_point_v<T>)
        if (!std::isfinite(v)) return nlohmann::json();
      return any ? nlohmann::json(v) : nlohmann::json();
    };
    meta["min"] = bound(lo);
    meta["max"] = bound(hi);
  }
};

}  // namespace amphora::detail
