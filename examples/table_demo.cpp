// The README's table example, compiled and run:
//   amphora_table_demo STORE_DIR
// Saves a two-column table with a null, reads back one column of two rows.

#include <amphora/amphora.hpp>
#include <amphora/table.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_table_demo STORE_DIR\n";
    return 2;
  }
  try {
    auto store = amphora::Store::open(argv[1], {.create = true});
    auto table = amphora::Table::make({
        {"city", amphora::Column::of(std::vector<std::string>{"Z\u00fcrich", "Oslo", ""}, {true, true, false})},
        {"visits", amphora::Column::of(std::vector<std::int64_t>{12, 7, 0})},
    });
    store.save(table, {.name = "visits"});
    auto some = amphora::load_table(store.open_artifact("visits"),
                                    {.columns = {"visits"}, .rows = std::pair<std::size_t, std::size_t>{1, 3}});
    auto visits = some.column("visits").values().values<std::int64_t>();
    std::cout << "visits rows 1-2: " << visits[0] << ", " << visits[1] << "; city nulls: "
              << store.load<amphora::Table>("visits").column("city").null_count() << "\n";
    return some.equals(table.select(std::vector<std::string>{"visits"}).slice(1, 3)) ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_table_demo: " << e.what() << "\n";
    return 1;
  }
}
