// The README's sparse-matrix example, compiled and run:
//   amphora_sparse_demo STORE_DIR
// Saves a 3 x 4 CSR matrix, loads it back, and writes it as graph.npz beside
// the store for scipy.sparse.load_npz.

#include <amphora/amphora.hpp>
#include <amphora/sparse.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_sparse_demo STORE_DIR\n";
    return 2;
  }
  try {
    auto store = amphora::Store::open(argv[1], {.create = true});

    // [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]]
    auto m = amphora::SparseMatrix::csr(
        3, 4, amphora::Tensor::from_values<double>({4}, std::vector<double>{1, 2, 3, 4}),
        amphora::Tensor::from_values<std::int32_t>({4}, std::vector<std::int32_t>{0, 2, 1, 3}),   // columns
        amphora::Tensor::from_values<std::int32_t>({4}, std::vector<std::int32_t>{0, 2, 2, 4}));  // row starts
    store.save(m, {.name = "graph"});

    auto back = store.load<amphora::SparseMatrix>("graph");  // validated, arrays mapped
    std::cout << "graph: " << back.rows() << " x " << back.cols() << ", " << back.nnz() << " entries, "
              << amphora::to_string(back.format()) << "\n";
    amphora::write_npz(back, std::filesystem::path(argv[1]).parent_path() / "graph.npz");
    return back.bit_equal(m) ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_sparse_demo: " << e.what() << "\n";
    return 1;
  }
}
