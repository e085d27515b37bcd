#pragma once
// The areas of a store, for the layers built on Store inside the framework
// (pipelines: the action cache, run records, name lookups). Not installed:
// programs go through Store's own methods.

#include <amphora/store.hpp>

#include "store_areas.hpp"

namespace amphora::detail {

struct StoreAccess {
  static const NameIndex& names(const Store& store);
  static const ActionCache& cache(const Store& store);
  static const RunLog& runs(const Store& store);
  static const ArtifactArea& artifacts(const Store& store);
};

}  // namespace amphora::detail
