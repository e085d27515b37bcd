#include <amphora/builtins.hpp>
#include <amphora/npy.hpp>
#include <amphora/tensor.hpp>

namespace amphora {

void register_builtins(Registry& registry) {
  registry.add<Tensor>("built-in");
  registry.add_file_format<Tensor>(
      ".npy", "NumPy array",
      // read_npy reads into private memory, so a program rewriting or
      // truncating the file meanwhile cannot change what is stored.
      [](const std::filesystem::path& file) { return read_npy(file); },
      [](const Tensor& tensor, const std::filesystem::path& file) { write_npy(tensor, file); });
}

}  // namespace amphora
