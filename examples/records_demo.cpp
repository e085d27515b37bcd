// The README's record collection example, compiled and run:
//   amphora_records_demo STORE_DIR
// Saves two COCO-style annotations, reads record 1 back alone (and record 0 from
// its part of the column files), and round-trips
// them through a JSON lines file in the store directory.

#include <amphora/amphora.hpp>
#include <amphora/record_collection.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_records_demo STORE_DIR\n";
    return 2;
  }
  try {
    auto store = amphora::Store::open(argv[1], {.create = true});
    std::vector<nlohmann::ordered_json> annotations = {
        {{"filepath", "a.jpg"}, {"width", 640}, {"bboxes", {{12.5, 30.25, 200.0, 310.75}}}, {"labels", {"cat"}}},
        {{"filepath", "b.jpg"}, {"width", 480}, {"bboxes", nlohmann::ordered_json::array()}, {"labels", nlohmann::ordered_json::array()}}};
    auto records = amphora::RecordCollection::from_json(annotations);
    store.save(records, {.name = "coco"});
    auto back = store.load<amphora::RecordCollection>("coco");
    nlohmann::ordered_json second = back.record(1);
    auto some = amphora::load_records(store.open_artifact("coco"), {.rows = std::pair{0, 1}});  // only their bytes
    const auto file = std::filesystem::path(argv[1]) / "coco.jsonl";
    back.write_jsonl(file);
    auto from_file = amphora::RecordCollection::read_jsonl(file);
    std::cout << "record 1: " << second.dump() << "\nschema of 'bboxes' items: "
              << back.schema()["fields"][2]["items"]["items"]["kind"] << "\n";
    return second == annotations[1] && some.size() == 1 && some.record(0) == annotations[0] && from_file.equals(records) ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_records_demo: " << e.what() << "\n";
    return 1;
  }
}
