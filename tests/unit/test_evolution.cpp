// Declared structs evolve by the rules docs/FORMAT.md §7.9 states: members
// added later load as their default initializers, removed ones are ignored,
// renames are declared with AMPHORA_RENAMED, a member stored as another type
// is a TypeMismatch naming it and both types, and amphora_migrate upgrades
// a value saved by an older version. Each version of a struct is its own C++
// type here, declared under the same persisted name, as two builds of a
// program would see it.

#include "support.hpp"

#include <amphora/describe.hpp>
#include <catch2/catch.hpp>

#include <map>
#include <optional>

using namespace amphora;

namespace v1 {
struct Model {
  std::string name;
  double lr = 0;
  std::int64_t epochs = 0;
  std::vector<float> weights;
};
AMPHORA_MATERIALIZE(Model, "evolve.model", 1, name, lr, epochs, weights)
struct Bundle {
  Model model;
  std::map<std::string, Model> variants;
};
AMPHORA_MATERIALIZE(Bundle, "evolve.bundle", 1, model, variants)
}  // namespace v1

namespace v2 {
// `lr` renamed `learning_rate`, `epochs` removed, `dropout`, `note`,
// `history` and `labels` added (with defaults and as optionals).
struct Model {
  std::string name;
  double learning_rate = 0;
  std::vector<float> weights;
  double dropout = 0.5;
  std::optional<std::string> note;
  std::vector<std::int64_t> history{7, 8};
  std::optional<std::vector<std::string>> labels;
};
AMPHORA_MATERIALIZE(Model, "evolve.model", 2, name, learning_rate, weights, dropout, note, history, labels)
AMPHORA_RENAMED(Model, "lr", "learning_rate")
struct Bundle {
  Model model;
  std::map<std::string, Model> variants;
  std::string owner = "nobody";
};
AMPHORA_MATERIALIZE(Bundle, "evolve.bundle", 2, model, variants, owner)
}  // namespace v2

namespace v3 {
// `name` now an integer id: a type change, refused by name.
struct Model {
  std::int64_t name = 0;
};
AMPHORA_MATERIALIZE(Model, "evolve.model", 3, name)
// `weights` now a string: a child of another type.
struct Weights {
  std::string weights;
};
AMPHORA_MATERIALIZE(Weights, "evolve.model", 3, weights)
}  // namespace v3

namespace v4 {
// A migration: version 1 stored `lr` as a percentage of 1e-4.
struct Model {
  std::string name;
  double learning_rate = 0;
  std::int64_t total_epochs = 0;
  int migrated_from = 0;
};
AMPHORA_MATERIALIZE(Model, "evolve.model", 4, name, learning_rate, total_epochs)
void amphora_migrate(Model& m, const StoredStruct& stored) {
  m.migrated_from = stored.version();
  if (stored.version() < 2) {
    m.learning_rate = stored.get<double>("lr") * 1e-4;
    m.total_epochs = stored.get<std::int64_t>("epochs");
  }
  CHECK_THROWS_AS(stored.get<double>("nonexistent"), NotFound);
  CHECK_THROWS_AS(stored.get<double>("name"), TypeMismatch);
}
}  // namespace v4

namespace {

v1::Model old_model() { return v1::Model{"resnet", 3.0, 12, {1.5f, 2.5f}}; }

}  // namespace

TEST_CASE("A member added later loads as its default; a removed one is ignored; a rename is followed",
          "[evolution][describe]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto saved = store.save(old_model()).digest;
  const auto now = store.load<v2::Model>(saved);
  CHECK(now.name == "resnet");
  CHECK(now.learning_rate == 3.0);  // stored as `lr`
  CHECK(now.weights == std::vector<float>{1.5f, 2.5f});
  CHECK(now.dropout == 0.5);  // added: its default initializer
  CHECK_FALSE(now.note.has_value());
  CHECK(now.history == std::vector<std::int64_t>{7, 8});
  CHECK_FALSE(now.labels.has_value());
  // Saved by the new version, it loads back whole, and the old `epochs` is gone.
  v2::Model edited = now;
  edited.note = "tuned";
  edited.labels = std::vector<std::string>{"cat"};
  auto again = store.save(edited).digest;
  CHECK(store.open_artifact(again).meta()["fields"].contains("learning_rate"));
  CHECK_FALSE(store.open_artifact(again).meta()["fields"].contains("epochs"));
  const auto back = store.load<v2::Model>(again);
  CHECK(back.note == std::optional<std::string>("tuned"));
  CHECK(back.labels == std::optional<std::vector<std::string>>(std::vector<std::string>{"cat"}));
  // A newer version's data is refused by an older build, as before.
  CHECK_THROWS_AS(store.load<v1::Model>(again), Unsupported);
  // verify accepts both versions.
  CHECK(store.verify().ok());
}

TEST_CASE("The rules apply to structs inside composites", "[evolution][describe][composite]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  v1::Bundle old{old_model(), {{"small", v1::Model{"tiny", 1.0, 1, {}}}}};
  auto saved = store.save(old).digest;
  const auto now = store.load<v2::Bundle>(saved);
  CHECK(now.owner == "nobody");
  CHECK(now.model.learning_rate == 3.0);
  CHECK(now.variants.at("small").name == "tiny");
  CHECK(now.variants.at("small").learning_rate == 1.0);
  CHECK(now.variants.at("small").dropout == 0.5);
}

TEST_CASE("A member stored as another type is a TypeMismatch naming the member and both types",
          "[evolution][describe][errors]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto saved = store.save(old_model()).digest;
  try {
    (void)store.load<v3::Model>(saved);
    FAIL("a string loaded as an integer");
  } catch (const TypeMismatch& e) {
    CHECK_THAT(e.what(), Catch::Contains("field 'name' holds a string \"resnet\"") &&
                             Catch::Contains("declared member type long cannot hold"));
  }
  // Two floats are the struct's own file 'weights.npy'; 20,000 a child tensor: both are named.
  try {
    (void)store.load<v3::Weights>(saved);
    FAIL("a vector of floats loaded as a string");
  } catch (const TypeMismatch& e) {
    CHECK_THAT(e.what(), Catch::Contains("field 'weights' is stored as the array file 'weights.npy'") &&
                             Catch::Contains("declared member type std::string cannot hold"));
  }
  v1::Model big = old_model();
  big.weights.assign(20000, 0.5f);
  try {
    (void)store.load<v3::Weights>(store.save(big).digest);
    FAIL("a vector of floats loaded as a string");
  } catch (const TypeMismatch& e) {
    CHECK_THAT(e.what(), Catch::Contains("field 'weights' (declared std::string)") &&
                             Catch::Contains("holds a 'amphora.tensor' artifact, not a 'amphora.string'"));
  }
}

TEST_CASE("amphora_migrate upgrades a value saved by an older version", "[evolution][describe]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto saved = store.save(old_model()).digest;
  const auto now = store.load<v4::Model>(saved);
  CHECK(now.migrated_from == 1);
  CHECK(now.learning_rate == Approx(3.0e-4));
  CHECK(now.total_epochs == 12);
  // A value of the current version is not migrated.
  auto current = store.save(now).digest;
  CHECK(store.load<v4::Model>(current).migrated_from == 0);
}
