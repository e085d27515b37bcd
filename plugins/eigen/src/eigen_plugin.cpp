// The Eigen plugin: registers the dynamic-size Eigen matrices and vectors
// of float, double and int32 (MatrixXf, MatrixXd, MatrixXi, VectorXf,
// VectorXd, VectorXi) and of int64, so that a program without Eigen (the
// `amphora` command) verifies them by their materializer's own checks and
// loads them type-erased.

#include <amphora/plugin.hpp>
#include <amphora_eigen/eigen.hpp>

namespace {

using MatrixXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic>;
using VectorXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, 1>;

void add_eigen(amphora::PluginRegistrar& registrar) {
  registrar.add<Eigen::MatrixXf>();
  registrar.add<Eigen::MatrixXd>();
  registrar.add<Eigen::MatrixXi>();
  registrar.add<MatrixXl>();
  registrar.add<Eigen::VectorXf>();
  registrar.add<Eigen::VectorXd>();
  registrar.add<Eigen::VectorXi>();
  registrar.add<VectorXl>();
}

}  // namespace

AMPHORA_PLUGIN("amphora.eigen", "1.0.0", add_eigen)
