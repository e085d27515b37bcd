// A materializer's format evolves by version: its migration chain upgrades
// what older versions stored, one version at a time; an artifact older than
// the chain or newer than the materializer is refused naming both versions;
// Store::migrate rewrites an old artifact at the current versions. Each
// version is its own C++ type here under one persisted name, as successive
// builds of a program would see it.

#include "support.hpp"
#include "fault_medium.hpp"

#include <amphora/describe.hpp>
#include <amphora/everyday.hpp>
#include <catch2/catch.hpp>

using namespace amphora;

namespace mv1 {
// Version 1 stored the rate as a percentage.
struct Setting {
  std::string label;
  double rate_percent = 0;
};
void to_json(nlohmann::json& j, const Setting& s) { j = {{"label", s.label}, {"rate_percent", s.rate_percent}}; }
void from_json(const nlohmann::json& j, Setting& s) {
  j.at("label").get_to(s.label);
  j.at("rate_percent").get_to(s.rate_percent);
}
}  // namespace mv1
AMPHORA_JSON_MATERIALIZER(mv1::Setting, "migrate.setting", 1);

namespace mv1 {
struct Holder {
  std::string owner;
  Setting setting;
};
AMPHORA_MATERIALIZE(Holder, "migrate.holder", 1, owner, setting)
}  // namespace mv1

namespace mv1 {
// What no version-1 writer made: a document without its rate.
struct Bare {
  std::string label;
};
void to_json(nlohmann::json& j, const Bare& b) { j = {{"label", b.label}}; }
void from_json(const nlohmann::json& j, Bare& b) { j.at("label").get_to(b.label); }
}  // namespace mv1
AMPHORA_JSON_MATERIALIZER(mv1::Bare, "migrate.setting", 1);

namespace mv2 {
// Version 2 stores a fraction.
struct Setting {
  std::string label;
  double rate = 0;
};
void to_json(nlohmann::json& j, const Setting& s) { j = {{"label", s.label}, {"rate", s.rate}}; }
void from_json(const nlohmann::json& j, Setting& s) {
  j.at("label").get_to(s.label);
  j.at("rate").get_to(s.rate);
}
}  // namespace mv2

namespace mv3 {
// Version 3 adds a schedule, "constant" for what older versions stored.
struct Setting {
  std::string label;
  double rate = 0;
  std::string schedule;
  bool operator==(const Setting&) const = default;
};
void to_json(nlohmann::json& j, const Setting& s) {
  j = {{"label", s.label}, {"rate", s.rate}, {"schedule", s.schedule}};
}
void from_json(const nlohmann::json& j, Setting& s) {
  j.at("label").get_to(s.label);
  j.at("rate").get_to(s.rate);
  j.at("schedule").get_to(s.schedule);
}
// The steps, shared by the chains below.
inline void percent_to_fraction(nlohmann::json& v1) {
  v1["rate"] = v1.at("rate_percent").get<double>() / 100;
  v1.erase("rate_percent");
}
inline void constant_schedule(nlohmann::json& v2) { v2["schedule"] = "constant"; }

// The same version 3, in a build that dropped the readers of version 1.
struct Trimmed : Setting {};
void to_json(nlohmann::json& j, const Trimmed& s) { to_json(j, static_cast<const Setting&>(s)); }
void from_json(const nlohmann::json& j, Trimmed& s) { from_json(j, static_cast<Setting&>(s)); }
}  // namespace mv3

template <>
struct amphora::materializer<mv2::Setting> : amphora::json_materializer<mv2::Setting> {
  static constexpr std::string_view name = "migrate.setting";
  static constexpr int version = 2;
  static constexpr auto migrations = amphora::migration_chain<nlohmann::json>(mv3::percent_to_fraction);
};

template <>
struct amphora::materializer<mv3::Setting> : amphora::json_materializer<mv3::Setting> {
  static constexpr std::string_view name = "migrate.setting";
  static constexpr int version = 3;
  static constexpr auto migrations =
      amphora::migration_chain<nlohmann::json>(mv3::percent_to_fraction, mv3::constant_schedule);
};

template <>
struct amphora::materializer<mv3::Trimmed> : amphora::json_materializer<mv3::Trimmed> {
  static constexpr std::string_view name = "migrate.setting";
  static constexpr int version = 3;
  static constexpr auto migrations = amphora::migration_chain_from<nlohmann::json, 2>(mv3::constant_schedule);
};

namespace mfragile {
// A type whose upgrade from version 1 throws what the stored document asks.
struct V1 {
  std::string raise;
};
void to_json(nlohmann::json& j, const V1& v) { j = {{"raise", v.raise}}; }
void from_json(const nlohmann::json& j, V1& v) { j.at("raise").get_to(v.raise); }
struct V2 {
  std::string raise;
};
void to_json(nlohmann::json& j, const V2& v) { j = {{"raise", v.raise}, {"upgraded", true}}; }
void from_json(const nlohmann::json& j, V2& v) { j.at("raise").get_to(v.raise); }
inline void raise_what_is_asked(nlohmann::json& v1) {
  const auto what = v1.at("raise").get<std::string>();
  if (what == "bad_alloc") throw std::bad_alloc();
  if (what == "int") throw 42;
  v1["upgraded"] = true;
}
}  // namespace mfragile
AMPHORA_JSON_MATERIALIZER(mfragile::V1, "migrate.fragile", 1);
template <>
struct amphora::materializer<mfragile::V2> : amphora::json_materializer<mfragile::V2> {
  static constexpr std::string_view name = "migrate.fragile";
  static constexpr int version = 2;
  static constexpr auto migrations = amphora::migration_chain<nlohmann::json>(mfragile::raise_what_is_asked);
};

namespace mv3 {
struct Holder {
  std::string owner;
  Setting setting;
};
AMPHORA_MATERIALIZE(Holder, "migrate.holder", 1, owner, setting)
}  // namespace mv3

namespace mv4 {
struct Setting {
  std::string label;
};
void to_json(nlohmann::json& j, const Setting& s) { j = {{"label", s.label}}; }
void from_json(const nlohmann::json& j, Setting& s) { j.at("label").get_to(s.label); }
}  // namespace mv4
AMPHORA_JSON_MATERIALIZER(mv4::Setting, "migrate.setting", 4);

// A record struct whose version 2 adds a member: record lists keep its
// version in their metadata ("element_version").
namespace rv1 {
struct Row {
  std::int64_t step = 0;
  double loss = 0;
};
AMPHORA_MATERIALIZE(Row, "migrate.row", 1, step, loss)
}  // namespace rv1
namespace rv2 {
struct Row {
  std::int64_t step = 0;
  double loss = 0;
  std::string note = "none";
};
AMPHORA_MATERIALIZE(Row, "migrate.row", 2, step, loss, note)
}  // namespace rv2

// A hand-written materializer upgrading its metadata: version 1 stored
// milliseconds under "millis", version 2 stores seconds and a unit.
namespace gauge {
struct V1 {
  std::int64_t millis = 0;
};
struct V2 {
  double seconds = 0;
  std::string unit;
};
}  // namespace gauge

template <>
struct amphora::materializer<gauge::V1> {
  static constexpr std::string_view name = "migrate.gauge";
  static constexpr int version = 1;
  static void save(const gauge::V1& g, ArtifactWriter& out) { out.meta()["millis"] = g.millis; }
  static gauge::V1 load(const ArtifactReader& in) { return {in.meta<std::int64_t>("millis")}; }
};

template <>
struct amphora::materializer<gauge::V2> {
  static constexpr std::string_view name = "migrate.gauge";
  static constexpr int version = 2;
  static constexpr auto migrations = amphora::migration_chain<nlohmann::json>([](nlohmann::json& v1) {
    v1["seconds"] = static_cast<double>(v1.at("millis").get<std::int64_t>()) / 1000;
    v1["unit"] = "s";
    v1.erase("millis");
  });
  static void save(const gauge::V2& g, ArtifactWriter& out) {
    out.meta()["seconds"] = g.seconds;
    out.meta()["unit"] = g.unit;
  }
  static gauge::V2 load(const ArtifactReader& in) {
    nlohmann::json meta = in.meta();
    amphora::upgrade<gauge::V2>(in, meta);
    return {meta.at("seconds").get<double>(), meta.at("unit").get<std::string>()};
  }
};

namespace {

// The message of the E that `f` throws; another exception fails the test.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("nothing was thrown");
  return {};
}

std::shared_ptr<Registry> registry_of_version3() {
  auto registry = Registry::with_defaults();
  registry->add<mv3::Setting>();
  registry->add<mv3::Holder>();
  return registry;
}

}  // namespace

TEST_CASE("a migration chain runs the steps from the stored version on, in order", "[migration]") {
  constexpr auto chain = migration_chain<std::string>([](std::string& s) { s += "2"; }, [](std::string& s) { s += "3"; },
                                                      [](std::string& s) { s += "4"; });
  STATIC_REQUIRE(chain.first == 1);
  STATIC_REQUIRE(chain.last == 4);
  for (auto [stored, expected] : std::vector<std::pair<int, std::string>>{{1, "v234"}, {2, "v34"}, {3, "v4"}, {4, "v"}}) {
    std::string value = "v";
    chain.upgrade(value, stored, "x");
    CHECK(value == expected);
  }
  std::string value = "v";
  CHECK_THAT(message_of<Unsupported>([&] { (void)chain.upgrade(value, 5, "artifact abc"); }), Catch::Matchers::Equals(
                           "artifact abc was written by format version 5, newer than the version 4 this build reads"));
  CHECK_THAT(message_of<Unsupported>([&] { (void)chain.upgrade(value, 0, "artifact abc"); }), Catch::Matchers::Contains("format version 0, older than the oldest version (1)"));
  CHECK(value == "v");

  constexpr auto trimmed = migration_chain_from<std::string, 3>([](std::string& s) { s += "4"; });
  STATIC_REQUIRE(trimmed.first == 3);
  STATIC_REQUIRE(trimmed.last == 4);
  CHECK_THAT(message_of<Unsupported>([&] { (void)trimmed.upgrade(value, 2, "artifact abc"); }), Catch::Matchers::Contains("format version 2, older than the oldest version (3) this build "
                                                 "reads: migrate it with a build that still reads it"));
}

TEST_CASE("a JSON materializer reads every older version through its migrations", "[migration]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const auto from1 = store.save(mv1::Setting{"warmup", 5}).digest;
  const auto from2 = store.save(mv2::Setting{"decay", 0.25}).digest;
  const auto from3 = store.save(mv3::Setting{"cosine", 0.5, "cosine"}).digest;
  CHECK(store.open_artifact(from1).format_version() == 1);

  CHECK(store.load<mv3::Setting>(from1) == mv3::Setting{"warmup", 0.05, "constant"});
  CHECK(store.load<mv3::Setting>(from2) == mv3::Setting{"decay", 0.25, "constant"});
  CHECK(store.load<mv3::Setting>(from3) == mv3::Setting{"cosine", 0.5, "cosine"});
  CHECK(store.load<mv2::Setting>(from1).rate == 0.05);

  SECTION("a newer version is refused naming both versions") {
    const auto from4 = store.save(mv4::Setting{"new"}).digest;
    CHECK_THAT(message_of<Unsupported>([&] { (void)store.load<mv3::Setting>(from4); }), Catch::Matchers::Contains("'migrate.setting' format version 4, newer than the version 3"));
    CHECK_THAT(message_of<Unsupported>([&] { (void)store.load<mv2::Setting>(from3); }), Catch::Matchers::Contains("format version 3, newer than the version 2"));
  }
  SECTION("a version older than the chain is refused naming both versions") {
    CHECK(static_cast<mv3::Setting>(store.load<mv3::Trimmed>(from2)) == mv3::Setting{"decay", 0.25, "constant"});
    CHECK_THAT(message_of<Unsupported>([&] { (void)store.load<mv3::Trimmed>(from1); }), Catch::Matchers::Contains("was written by format version 1, older than the oldest version (2)"));
  }
  SECTION("a step meeting what its version cannot hold is damage, named with both versions") {
    const auto bare = store.save(mv1::Bare{"bare"}).digest;
    CHECK_THAT(message_of<CorruptData>([&] { (void)store.load<mv3::Setting>(bare); }), Catch::Matchers::Contains("('migrate.setting') could not be upgraded from format version 1 to 3"));
  }
  SECTION("a step out of memory is OutOfResources; one throwing a non-standard exception is damage") {
    const auto fine = store.save(mfragile::V1{"nothing"}).digest;
    const auto hungry = store.save(mfragile::V1{"bad_alloc"}).digest;
    const auto odd = store.save(mfragile::V1{"int"}).digest;
    CHECK(store.load<mfragile::V2>(fine).raise == "nothing");
    CHECK_THAT(message_of<OutOfResources>([&] { (void)store.load<mfragile::V2>(hungry); }),
               Catch::Matchers::Contains("('migrate.fragile') could not be upgraded from format version 1: out of memory"));
    CHECK_THAT(message_of<CorruptData>([&] { (void)store.load<mfragile::V2>(odd); }),
               Catch::Matchers::Contains("from format version 1 to 2: a step threw something that is not a std::exception"));
  }
}

TEST_CASE("a hand-written materializer upgrades what it decodes with amphora::upgrade", "[migration]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const auto old = store.save(gauge::V1{1500}).digest;
  const auto now = store.load<gauge::V2>(old);
  CHECK(now.seconds == 1.5);
  CHECK(now.unit == "s");
  const auto current = store.save(gauge::V2{2.5, "min"}).digest;
  CHECK(store.load<gauge::V2>(current).unit == "min");
  CHECK_THROWS_AS(store.load<gauge::V1>(current), Unsupported);
}

TEST_CASE("Store::migrate rewrites an old artifact at the current version", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(mv1::Setting{"warmup", 5}, {.name = "setting"});
  }
  auto store = Store::open(dir.path(), {.registry = registry_of_version3()});
  const auto old_digest = store.resolve("setting");

  const auto result = store.migrate("setting");
  CHECK(result.rewritten);
  CHECK(result.from == old_digest);
  CHECK(result.to != old_digest);
  CHECK(result.name == "setting");
  CHECK(result.version == 2);
  REQUIRE(result.upgrades.size() == 1);
  CHECK(result.upgrades[0].materializer == "migrate.setting");
  CHECK(result.upgrades[0].from == 1);
  CHECK(result.upgrades[0].to == 3);
  CHECK(result.upgrades[0].artifacts == 1);

  CHECK(store.resolve("setting") == result.to);
  CHECK(store.open_artifact("setting").format_version() == 3);
  CHECK(store.load<mv3::Setting>("setting") == mv3::Setting{"warmup", 0.05, "constant"});
  // The new version's record says where it came from; the old one stays.
  const auto record = store.versions("setting").back().record;
  CHECK(record["migrated_from"]["digest"] == old_digest.str());
  CHECK(record["migrated_from"]["ref"] == "setting");
  CHECK(record["migrated_from"]["upgraded"][0]["from"] == 1);
  CHECK(record["materializer_version"] == 3);
  CHECK(store.load<mv3::Setting>("setting@1") == store.load<mv3::Setting>("setting@2"));
  CHECK(store.verify().ok());

  SECTION("a current artifact is left alone") {
    const auto again = store.migrate("setting");
    CHECK_FALSE(again.rewritten);
    CHECK(again.to == again.from);
    CHECK(again.upgrades.empty());
    CHECK(store.version_numbers("setting") == std::vector<std::uint64_t>{1, 2});
  }
  SECTION("NAME@N other than the latest needs a name: its copy would become the latest") {
    CHECK_THAT(message_of<InvalidArgument>([&] { (void)store.migrate("setting@1"); }),
               Catch::Matchers::Contains("'setting@1' is not the latest version of 'setting'"));
    CHECK(store.version_numbers("setting") == std::vector<std::uint64_t>{1, 2});
    const auto on_purpose = store.migrate("setting@1", "setting");
    CHECK(on_purpose.rewritten);
    CHECK(on_purpose.version == 3);
    CHECK(on_purpose.to == result.to);  // the same bytes as the first migration
    CHECK(store.versions("setting").back().record["migrated_from"]["ref"] == "setting@1");
    const auto elsewhere = store.migrate("setting@1", "setting-archive");
    CHECK(elsewhere.version == 1);
  }
  SECTION("a digest ref needs a name") {
    CHECK_THAT(message_of<InvalidArgument>([&] { (void)store.migrate(old_digest.str()); }), Catch::Matchers::Contains("is not a name") && Catch::Matchers::Contains("--name NAME"));
    const auto named = store.migrate(old_digest.str(), "setting-v3");
    CHECK(named.rewritten);
    CHECK(named.name == "setting-v3");
    CHECK(named.version == 1);
    CHECK_THROWS_AS(store.migrate(old_digest.str(), "bad name/.."), InvalidArgument);
  }
}

TEST_CASE("Store::migrate leaves a version saved while it ran the latest", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(mv1::Setting{"warmup", 5}, {.name = "setting"});
  }
  auto faulty = std::make_shared<testing::FaultMedium>(open_local_medium(dir.path(), false));
  auto store = Store::open({.registry = registry_of_version3(), .medium = faulty});
  const auto old_digest = store.resolve("setting");
  // Another writer saves `setting` just as migrate is about to record its
  // copy (when it takes the lease that numbering versions holds).
  const mv3::Setting theirs{"cooldown", 0.5, "linear"};
  faulty->on("before:lease", [&] { store.save(theirs, {.name = "setting"}); }, "names");
  CHECK_THAT(message_of<InvalidArgument>([&] { (void)store.migrate("setting"); }),
             Catch::Matchers::Contains("'setting' got a new version while setting was migrated"));
  REQUIRE(faulty->triggered() == 1);
  CHECK(store.version_numbers("setting") == std::vector<std::uint64_t>{1, 2});
  CHECK(store.load<mv3::Setting>("setting") == theirs);
  CHECK(store.resolve("setting@1") == old_digest);
  // Run again, it migrates nothing: the latest is current.
  CHECK_FALSE(store.migrate("setting").rewritten);
}

TEST_CASE("Store::migrate rewrites a composite whose child is outdated", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(mv1::Holder{"ada", {"warmup", 5}}, {.name = "holder"});
  }
  auto store = Store::open(dir.path(), {.registry = registry_of_version3()});
  const auto result = store.migrate("holder");
  CHECK(result.rewritten);
  REQUIRE(result.upgrades.size() == 1);
  CHECK(result.upgrades[0].materializer == "migrate.setting");
  const auto holder = store.load<mv3::Holder>("holder");
  CHECK(holder.owner == "ada");
  CHECK(holder.setting == mv3::Setting{"warmup", 0.05, "constant"});
  CHECK(store.open_artifact("holder").open_child("setting").format_version() == 3);
  CHECK_FALSE(store.migrate("holder").rewritten);
}

TEST_CASE("Containers and record lists migrate through their C++ type", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(std::map<std::string, mv1::Setting>{{"a", {"warmup", 5}}, {"b", {"decay", 50}}}, {.name = "settings"});
    writer.save(std::vector<mv1::Holder>{{"ada", {"warmup", 5}}}, {.name = "holders"});
  }
  auto store = Store::open(dir.path(), {.registry = registry_of_version3()});
  // A type-erased tool cannot rebuild a map's own artifact: said, with the way out.
  CHECK_THAT(message_of<Unsupported>([&] { (void)store.migrate("settings"); }),
             Catch::Matchers::Contains("amphora.map") && Catch::Matchers::Contains("Store::migrate<T>(ref)"));
  CHECK(store.version_numbers("settings") == std::vector<std::uint64_t>{1});
  const auto map = store.migrate<std::map<std::string, mv3::Setting>>("settings");
  CHECK(map.rewritten);
  REQUIRE(map.upgrades.size() == 1);
  CHECK(map.upgrades[0].artifacts == 2);
  CHECK(store.load<std::map<std::string, mv3::Setting>>("settings").at("b") == mv3::Setting{"decay", 0.5, "constant"});
  CHECK_FALSE(store.migrate<std::map<std::string, mv3::Setting>>("settings").rewritten);

  // Records keep their struct's version in the record list's metadata:
  // an old one is seen, and rewritten through the list's C++ type.
  const auto holders = store.migrate<std::vector<mv3::Holder>>("holders");
  CHECK(holders.rewritten);
  CHECK(store.load<std::vector<mv3::Holder>>("holders").at(0).setting == mv3::Setting{"warmup", 0.05, "constant"});
  CHECK_FALSE(store.migrate<std::vector<mv3::Holder>>("holders").rewritten);
}

TEST_CASE("Store::migrate sees an old record struct in a record list's metadata", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(std::vector<rv1::Row>{{1, 2.5}, {2, 1.5}}, {.name = "rows"});
  }
  auto registry = registry_of_version3();
  registry->add<rv2::Row>();
  auto store = Store::open(dir.path(), {.registry = registry});
  REQUIRE(store.open_artifact("rows").manifest().materializer == "amphora.record_list");
  // The list itself is at its current version; its records are not.
  CHECK_THAT(message_of<Unsupported>([&] { (void)store.migrate("rows"); }),
             Catch::Matchers::Contains("Store::migrate<T>(ref)"));
  const auto result = store.migrate<std::vector<rv2::Row>>("rows");
  CHECK(result.rewritten);
  REQUIRE(result.upgrades.size() == 1);
  CHECK(result.upgrades[0].materializer == "migrate.row");
  CHECK(result.upgrades[0].from == 1);
  CHECK(result.upgrades[0].to == 2);
  CHECK(store.open_artifact("rows").meta()["element_version"] == 2);
  const auto rows = store.load<std::vector<rv2::Row>>("rows");
  CHECK(rows.at(1).loss == 1.5);
  CHECK(rows.at(1).note == "none");
  CHECK_FALSE(store.migrate<std::vector<rv2::Row>>("rows").rewritten);
}

TEST_CASE("Store::migrate refuses what this build cannot read", "[migration]") {
  test::TempDir dir;
  {
    auto writer = test::make_store(dir.path());
    writer.save(mv4::Setting{"future"}, {.name = "future"});
    writer.save(gauge::V1{3}, {.name = "gauge"});
  }
  auto store = Store::open(dir.path(), {.registry = registry_of_version3()});
  // Newer than registered: the load refuses, naming both versions; nothing is written.
  CHECK_THAT(message_of<Unsupported>([&] { (void)store.migrate("future"); }), Catch::Matchers::Contains("format version 4, newer than the version 3"));
  CHECK(store.version_numbers("future") == std::vector<std::uint64_t>{1});
  // Not registered: named, even for a digest ref (before asking for a name).
  CHECK_THAT(message_of<Unsupported>([&] { (void)store.migrate(store.resolve("gauge").str()); }),
             Catch::Matchers::Contains("'migrate.gauge'") && Catch::Matchers::Contains("not registered"));
  CHECK_THAT(message_of<Unsupported>([&] { (void)store.migrate("gauge"); }), Catch::Matchers::Contains("'migrate.gauge'") && Catch::Matchers::Contains("not registered"));
  CHECK(store.version_numbers("gauge") == std::vector<std::uint64_t>{1});
  CHECK_THROWS_AS(store.migrate("missing"), NotFound);
}
