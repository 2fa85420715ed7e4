// The compiled catalogue tables. Only src/catalog may include this.
#ifndef GPUAAS_CATALOG_INTERNAL_CATALOG_DATA_H_
#define GPUAAS_CATALOG_INTERNAL_CATALOG_DATA_H_

#include <vector>

#include "catalog/catalog.h"

namespace gpuaas::catalog::internal {

// MIG-capable models, generated from gpu-catalog/mig-profiles.json (catalog_data.cc).
const std::vector<GpuModel>& MigModels();

// GPUs without MIG, which gpuaas hands out as full GPUs only (catalog.cc).
const std::vector<GpuModel>& FullOnlyModels();

}  // namespace gpuaas::catalog::internal

#endif  // GPUAAS_CATALOG_INTERNAL_CATALOG_DATA_H_
