// A plugin whose format evolves, built twice (EVOLVING_VERSION 1 and 2) into
// test-plugins/evolving-v1 and evolving-v2 as two releases of one plugin:
// version 1 of "test.setting" stored the rate as a percentage, version 2
// stores a fraction and reads version 1 through its migration chain.

#include <amphora/materializer.hpp>
#include <amphora/plugin.hpp>

#include <fstream>

#ifndef EVOLVING_VERSION
#error "build with EVOLVING_VERSION=1 or 2"
#endif

namespace evolving {

struct Setting {
  std::string label;
  double rate = 0;  // a fraction
};

#if EVOLVING_VERSION == 1
void to_json(nlohmann::json& j, const Setting& s) { j = {{"label", s.label}, {"rate_percent", s.rate * 100}}; }
void from_json(const nlohmann::json& j, Setting& s) {
  j.at("label").get_to(s.label);
  s.rate = j.at("rate_percent").get<double>() / 100;
}
#else
void to_json(nlohmann::json& j, const Setting& s) { j = {{"label", s.label}, {"rate", s.rate}}; }
void from_json(const nlohmann::json& j, Setting& s) {
  j.at("label").get_to(s.label);
  j.at("rate").get_to(s.rate);
}
inline void percent_to_fraction(nlohmann::json& v1) {
  v1["rate"] = v1.at("rate_percent").get<double>() / 100;
  v1.erase("rate_percent");
}
#endif

}  // namespace evolving

template <>
struct amphora::materializer<evolving::Setting> : amphora::json_materializer<evolving::Setting> {
  static constexpr std::string_view name = "test.setting";
  static constexpr int version = EVOLVING_VERSION;
#if EVOLVING_VERSION == 2
  static constexpr auto migrations = amphora::migration_chain<nlohmann::json>(evolving::percent_to_fraction);
#endif
};

namespace {

// "label rate" on one line, the rate a fraction.
evolving::Setting read_setting(const std::filesystem::path& file) {
  std::ifstream in(file);
  evolving::Setting s;
  if (!(in >> s.label >> s.rate)) throw amphora::InvalidArgument(file.string() + " is not 'label rate'");
  return s;
}

void write_setting(const evolving::Setting& s, const std::filesystem::path& file) {
  std::ofstream out(file);
  out << s.label << ' ' << s.rate << '\n';
}

void add_setting(amphora::PluginRegistrar& r) {
  r.add<evolving::Setting>();
  r.add_file_format<evolving::Setting>(".setting", "a setting as 'label rate'", read_setting, write_setting);
}

#define EVOLVING_TEXT_(v) #v
#define EVOLVING_TEXT(v) EVOLVING_TEXT_(v)

}  // namespace

AMPHORA_PLUGIN("test.evolving", EVOLVING_TEXT(EVOLVING_VERSION) ".0.0", add_setting)
