#pragma once
// Equality of JSON values with their types, for the fuzz targets' round
// trips: integers by value whether stored signed or unsigned, floats bit for
// bit (any NaN equals any NaN), arrays item by item, objects key by key in
// their order (nlohmann::json keeps keys sorted, ordered_json as written).

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fuzz {

template <class Json>
bool same_json(const Json& a, const Json& b) {
  using T = typename Json::value_t;
  auto integer = [](const Json& v) { return v.type() == T::number_integer || v.type() == T::number_unsigned; };
  if (integer(a) && integer(b)) {
    if (a.type() == b.type()) return a == b;
    const auto& s = a.type() == T::number_integer ? a : b;
    const auto& u = a.type() == T::number_integer ? b : a;
    return s.template get<std::int64_t>() >= 0 &&
           static_cast<std::uint64_t>(s.template get<std::int64_t>()) == u.template get<std::uint64_t>();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::number_float: {
      const double x = a.template get<double>(), y = b.template get<double>();
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case T::array:
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!same_json(a[i], b[i])) return false;
      return true;
    case T::object: {
      if (a.size() != b.size()) return false;
      for (auto x = a.begin(), y = b.begin(); x != a.end(); ++x, ++y)
        if (x.key() != y.key() || !same_json(x.value(), y.value())) return false;
      return true;
    }
    default:
      return a == b;
  }
}

}  // namespace fuzz
