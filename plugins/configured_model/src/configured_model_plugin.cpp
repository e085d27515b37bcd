// The configured-model plugin: teaches any program loading it
// configured_model::Model (and its configuration and log entries), so that
// `amphora show`, `verify` and `export` handle a model without being built
// against its header, and `amphora import run.yaml` stores a configuration.

#include <amphora/plugin.hpp>
#include <amphora_configured_model/configured_model.hpp>

#include <fstream>
#include <sstream>

namespace {

configured_model::Config read_yaml(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw amphora::NotFound("cannot open " + file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return configured_model::parse_config(text.str(), file.string());
}

void write_yaml(const configured_model::Config& config, const std::filesystem::path& file) {
  std::ofstream out(file, std::ios::binary);
  out << configured_model::canonical_yaml(config.root);
  if (!out.flush()) throw amphora::IoError("cannot write " + file.string());
}

void add_configured_model(amphora::PluginRegistrar& registrar) {
  registrar.add<configured_model::Config>();
  registrar.add<configured_model::LogEntry>();
  registrar.add<configured_model::Model>();
  registrar.add_file_format<configured_model::Config>(".yaml", "a YAML configuration (stored canonical)", read_yaml,
                                                      write_yaml);
}

}  // namespace

AMPHORA_PLUGIN("amphora.configured_model", "1.0.0", add_configured_model)
