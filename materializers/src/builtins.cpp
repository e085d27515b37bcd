#include <amphora/builtins.hpp>
#include <amphora/npy.hpp>
#include <amphora/tensor.hpp>

namespace amphora {

void register_builtins(Registry& registry) {
  registry.add<Tensor>("built-in");
  registry.add_file_format<Tensor>(
      ".npy", "NumPy array",
      [](const std::filesystem::path& file) {
        // A file mapped in place could be rewritten or truncated by another
        // program while it is hashed and stored; import a private copy.
        Tensor t = read_npy(file);
        return t.buffer()->writable() ? t : t.copy();
      },
      [](const Tensor& tensor, const std::filesystem::path& file) { write_npy(tensor, file); });
}

}  // namespace amphora
