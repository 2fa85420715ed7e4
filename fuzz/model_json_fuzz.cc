// Fuzz target for the JSON object decoders (model/codec.h). Properties: no decoder crashes or
// leaks on any input, and whatever decodes re-encodes to JSON that decodes to an equal object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/codec.h"

namespace {

template <typename T>
void RoundTrip(std::string_view input) {
  absl::StatusOr<T> obj = gpuaas::model::Decode<T>(input);
  if (!obj.ok()) return;
  absl::StatusOr<T> again = gpuaas::model::Decode<T>(gpuaas::model::Encode(*obj));
  if (!again.ok() || !(*again == *obj)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  RoundTrip<gpuaas::model::Cluster>(input);
  RoundTrip<gpuaas::model::NodeCapacity>(input);
  RoundTrip<gpuaas::model::GpuCapacity>(input);
  RoundTrip<gpuaas::model::SpecAndCount>(input);
  RoundTrip<gpuaas::model::Project>(input);
  RoundTrip<gpuaas::model::GpuPool>(input);
  RoundTrip<gpuaas::model::MigLayout>(input);
  RoundTrip<gpuaas::model::Workload>(input);
  RoundTrip<gpuaas::model::Profile>(input);
  (void)gpuaas::model::DecodeMeta(input);
  return 0;
}
