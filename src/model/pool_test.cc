#include "model/pool.h"

#include "gtest/gtest.h"
#include "model/codec.h"

namespace gpuaas::model {
namespace {

GpuPool Pool() {
  GpuPool p;
  p.metadata.name = "llm-train";
  p.metadata.ns = "vision";
  p.spec.items = {{"H200-SXM-141GB", "full", 2}, {"H200-SXM-141GB", "3g.71gb", 4}};
  p.spec.workload_type = WorkloadType::kInference;
  p.spec.time_slicing_replicas = 4;
  p.spec.move_idle_instances = true;
  p.status.approval = GpuPool::Approval{true, "budget ok", "ops", std::chrono::system_clock::from_time_t(1764688445)};
  p.status.allocation = {{"alpha", "alpha.h200-01", "GPU-1", "full", 0, ""},
                         {"alpha", "alpha.h200-02", "GPU-2", "3g.71gb", 4, "MIG-9"}};
  return p;
}

TEST(PoolCodec, RoundTrips) {
  GpuPool p = Pool();
  absl::StatusOr<GpuPool> back = Decode<GpuPool>(Encode(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  Project pr;
  pr.metadata.name = "vision";
  pr.spec.display_name = "Vision team";
  pr.spec.quota = Project::Quota{{{"H200-SXM-141GB", 8}}, {{"H200-SXM-141GB", 28}}};
  EXPECT_EQ(*Decode<Project>(Encode(pr)), pr);
  Project open;
  open.metadata.name = "open";
  EXPECT_FALSE(Decode<Project>(Encode(open))->spec.quota.has_value());
}

TEST(PoolCodec, MoveIdleInstancesIsABooleanAndOffUnlessSaid) {
  std::string text = Encode(Pool());
  ASSERT_NE(text.find("\"moveIdleInstances\":true"), std::string::npos) << text;
  GpuPool plain = Pool();
  plain.spec.move_idle_instances = false;
  EXPECT_EQ(Encode(plain).find("moveIdleInstances"), std::string::npos);
  EXPECT_FALSE(Decode<GpuPool>(Encode(plain))->spec.move_idle_instances);
  text.replace(text.find("\"moveIdleInstances\":true"), 24, "\"moveIdleInstances\":\"yes\"");
  absl::StatusOr<GpuPool> r = Decode<GpuPool>(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("spec.moveIdleInstances: expected true or false"), std::string::npos) << r.status();
}

TEST(PoolCodec, TheReleaseRequestIsSpecAndAnOlderStoreReadsItFromTheReleasedCondition) {
  GpuPool p = Pool();
  p.spec.release_requested = GpuPool::Spec::ReleaseRequest{"alice", std::chrono::system_clock::from_time_t(1764688445)};
  const std::string text = Encode(p);
  ASSERT_NE(text.find("\"releaseRequested\":{\"time\":\"2025-12-02T15:14:05Z\",\"user\":\"alice\"}"),
            std::string::npos)
      << text;
  EXPECT_EQ(*Decode<GpuPool>(text), p);
  // Without its time it is refused, naming the field.
  std::string timeless = text;
  const std::string time_field = "\"time\":\"2025-12-02T15:14:05Z\",";
  timeless.replace(timeless.find(time_field), time_field.size(), "");
  absl::StatusOr<GpuPool> bad = Decode<GpuPool>(timeless);
  ASSERT_FALSE(bad.ok()) << timeless;
  EXPECT_NE(bad.status().ToString().find("spec.releaseRequested.time"), std::string::npos) << bad.status();
  // A pool stored before the field existed: its Released condition's transition is the request.
  GpuPool older = Pool();
  const Time when = std::chrono::system_clock::from_time_t(1764690000);
  older.status.conditions.push_back({std::string(kReleased), ConditionStatus::kFalse, "Releasing", "", when, 1});
  absl::StatusOr<GpuPool> read = Decode<GpuPool>(Encode(older));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->spec.release_requested);
  EXPECT_EQ(read->spec.release_requested->time, when);
  EXPECT_TRUE(PoolReleaseRequested(*read));
  EXPECT_FALSE(PoolReleaseRequested(Pool()));
}

TEST(PoolCodec, RejectsUnknownWorkloadType) {
  std::string text = Encode(Pool());
  text.replace(text.find("\"inference\""), 11, "\"batch\"");
  absl::StatusOr<GpuPool> r = Decode<GpuPool>(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("spec.workloadType: unknown value \"batch\"; expected one of "
                                       "training, inference, development"),
            std::string::npos);
}

TEST(PoolValidation, ExplainsBadItems) {
  EXPECT_TRUE(ValidatePool(Pool()).ok());
  auto bad = [](auto change, std::string_view fragment) {
    GpuPool p = Pool();
    change(p);
    absl::Status s = ValidatePool(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.ToString().find(fragment), std::string::npos) << s;
  };
  bad([](GpuPool& p) { p.spec.items[0].model = "Z100"; }, "spec.items[0].model: unknown GPU model \"Z100\"");
  bad([](GpuPool& p) { p.spec.items[1].profile = "3g.40gb"; }, "has no MIG profile \"3g.40gb\"; it has full, 1g.18gb");
  bad([](GpuPool& p) { p.spec.items[0].count = 0; }, "spec.items[0].count");
  bad([](GpuPool& p) { p.spec.items = {}; }, "at least one item");
  bad([](GpuPool& p) { p.spec.items[1].profile = "full"; }, "listed twice");
  bad([](GpuPool& p) { p.spec.items = {{"L40S-48GB", "1g.5gb", 1}}; }, "does not support MIG");
  bad([](GpuPool& p) { p.metadata.name = "Bad_Name"; }, "metadata.name");
  bad([](GpuPool& p) { p.spec.time_slicing_replicas = 1000; }, "replicas");
}

TEST(ProjectValidation, NamesAndQuotaModels) {
  Project p;
  p.metadata.name = "vision";
  EXPECT_TRUE(ValidateProject(p).ok());
  p.metadata.name = "a.b";
  EXPECT_FALSE(ValidateProject(p).ok());
  p.metadata.name = "vision";
  p.spec.quota = Project::Quota{{{"Z100", 1}}, {}};
  EXPECT_NE(ValidateProject(p).ToString().find("unknown GPU model"), std::string::npos);
}

}  // namespace
}  // namespace gpuaas::model

namespace gpuaas::model {
namespace {

TEST(MetadataValidation, AnnotationsAndDisplayNamesAreBounded) {
  Project p;
  p.metadata.name = "vision";
  p.metadata.annotations = {{"gpuaas.io/owner", "team vision"}, {"note", "\xea\xb0\x80"}};
  EXPECT_TRUE(ValidateProject(p).ok());
  p.metadata.annotations["big"] = std::string(kMaxAnnotationBytes, 'x');
  EXPECT_NE(ValidateProject(p).message().find("256 KiB"), std::string::npos) << ValidateProject(p);
  p.metadata.annotations.erase("big");
  p.metadata.annotations["bad key!"] = "v";
  EXPECT_FALSE(ValidateProject(p).ok());
  p.metadata.annotations.erase("bad key!");
  p.metadata.annotations["note"] = "\xff";
  EXPECT_FALSE(ValidateProject(p).ok());
  p.metadata.annotations.erase("note");
  p.spec.display_name = std::string(300, 'd');
  EXPECT_NE(ValidateProject(p).message().find("displayName"), std::string::npos);

  GpuPool pool;
  pool.metadata.name = "p";
  pool.metadata.ns = "vision";
  pool.spec.items = {{"H200-SXM-141GB", "full", 1}};
  ASSERT_TRUE(ValidatePool(pool).ok()) << ValidatePool(pool);
  pool.metadata.annotations["x"] = std::string(kMaxAnnotationBytes + 1, 'x');
  EXPECT_FALSE(ValidatePool(pool).ok());

  Workload w;
  w.metadata.name = "w";
  w.metadata.ns = "vision";
  w.spec.pool = "p";
  w.spec.resource = "nvidia.com/gpu";
  w.spec.count = 1;
  EXPECT_TRUE(ValidateWorkload(w).ok());
  w.metadata.annotations["x"] = std::string(kMaxAnnotationBytes + 1, 'x');
  EXPECT_FALSE(ValidateWorkload(w).ok());
}

}  // namespace
}  // namespace gpuaas::model

namespace gpuaas::model {
namespace {

TEST(PoolQuota, LivePoolsDevicesByClusterAndResource) {
  GpuPool a;
  a.status.allocation = {{"east", "east.n1", "GPU-1", "full", 0, ""},
                         {"east", "east.n1", "GPU-2", "full", 0, ""},
                         {"east", "east.n2", "GPU-3", "3g.71gb", 4, ""},
                         {"west", "west.n1", "GPU-4", "1g.18gb+me", 0, ""}};
  GpuPool released = a;
  SetCondition(released.status.conditions, {std::string(kReleased), ConditionStatus::kTrue, "Released", "", {}, 0});
  GpuPool rejected = a;
  rejected.status.approval = GpuPool::Approval{false, "no", "ops", {}};
  const std::vector<GpuPool> pools = {a, released, rejected};
  EXPECT_EQ(DevicesByCluster(pools),
            (std::map<std::string, std::map<std::string, int64_t>>{
                {"east", {{"nvidia.com/gpu", 2}, {"nvidia.com/mig-3g.71gb", 1}}},
                {"west", {{"nvidia.com/mig-1g.18gb.me", 1}}}}))
      << "released and rejected pools hold nothing";
}

TEST(NodeOwners, NodesOnePoolHoldsWholeAreItsAlone) {
  GpuPool train;
  train.metadata.name = "train";
  train.metadata.ns = "vision";
  // n1: both GPUs (one whole, one as two MIG instances); n2: one of its two GPUs.
  train.status.allocation = {{"east", "east.n1", "GPU-1", "full", 0, ""},
                             {"east", "east.n1", "GPU-2", "3g.71gb", 0, ""},
                             {"east", "east.n1", "GPU-2", "3g.71gb", 4, ""},
                             {"east", "east.n2", "GPU-3", "full", 0, ""}};
  GpuPool serve;
  serve.metadata.name = "serve";
  serve.metadata.ns = "nlp";
  serve.status.allocation = {{"east", "east.n3", "GPU-5", "full", 0, ""}, {"east", "east.n4", "GPU-7", "full", 0, ""}};
  GpuPool other;  // shares n3 with serve
  other.metadata.name = "other";
  other.metadata.ns = "nlp";
  other.status.allocation = {{"east", "east.n3", "GPU-6", "1g.18gb", 0, ""}};
  const std::map<std::string, int64_t> gpus = {{"east.n1", 2}, {"east.n2", 2}, {"east.n3", 2}, {"east.n4", 1}};
  serve.spec.time_slicing_replicas = 4;
  std::vector<GpuPool> pools = {train, serve, other};
  EXPECT_EQ(WholeNodeOwners(pools, gpus),
            (std::map<std::string, std::map<std::string, WholeNodeOwner>>{
                {"east", {{"n1", {"vision.train", 0}}, {"n4", {"nlp.serve", 4}}}}}));
  // Released, the pool owns nothing.
  SetCondition(pools[0].status.conditions, {std::string(kReleased), ConditionStatus::kTrue, "Released", "", {}, 0});
  EXPECT_EQ(WholeNodeOwners(pools, gpus).at("east").count("n1"), 0u);
  // Long names fit a label value, and stay distinct.
  GpuPool long_a = train, long_b = train;
  long_a.metadata.ns = std::string(40, 'a');
  long_a.metadata.name = std::string(40, 'b');
  long_b.metadata.ns = std::string(40, 'a');
  long_b.metadata.name = std::string(39, 'b') + "c";
  EXPECT_LE(NodePoolValue(long_a).size(), 63u);
  EXPECT_NE(NodePoolValue(long_a), NodePoolValue(long_b));
  EXPECT_EQ(NodePoolValue(long_a), NodePoolValue(long_a));
}

TEST(PoolsWithLoans, LentDevicesAreTheBorrowersAndAReservationIsNobodysBeforeItsStart) {
  const Time t0 = std::chrono::system_clock::from_time_t(1764547200);
  GpuPool train;
  train.metadata.ns = "vision";
  train.metadata.name = "train";
  train.spec.items = {{"H200-SXM-141GB", "full", 2}};
  train.status.allocation = {{"lab", "lab.n1", "GPU-1", "full", 0, ""}, {"lab", "lab.n1", "GPU-2", "full", 0, ""}};
  GpuPool eval = train;
  eval.metadata.name = "eval";
  eval.spec.start_time = t0 + std::chrono::hours(1);
  eval.status.allocation = {{"lab", "lab.n2", "GPU-3", "full", 0, ""}};
  Loan loan;
  loan.spec = {"nlp", "sweep", "vision", "train", "H200-SXM-141GB", "full", {{"GPU-2", ""}}, t0, std::nullopt, ""};
  auto lender = [&](std::string_view ns, std::string_view name) -> const GpuPool* {
    return ns == "vision" && name == "train" ? &train : nullptr;
  };
  // The lender keeps GPU-1; its reservation is not its own before the start.
  std::vector<GpuPool> vision = PoolsWithLoans("vision", {train, eval}, {&loan, 1}, lender, t0);
  ASSERT_EQ(vision.size(), 1u);
  ASSERT_EQ(vision[0].status.allocation.size(), 1u);
  EXPECT_EQ(vision[0].status.allocation[0].gpu_uuid, "GPU-1");
  EXPECT_EQ(PoolsWithLoans("vision", {train, eval}, {&loan, 1}, lender, t0 + std::chrono::hours(2)).size(), 2u);
  // The borrower gets GPU-2 as a pool of its own, in force.
  std::vector<GpuPool> nlp = PoolsWithLoans("nlp", {}, {&loan, 1}, lender, t0);
  ASSERT_EQ(nlp.size(), 1u);
  EXPECT_EQ(nlp[0].metadata.name, "loan.vision.train");
  ASSERT_EQ(nlp[0].status.allocation.size(), 1u);
  EXPECT_EQ(nlp[0].status.allocation[0].gpu_uuid, "GPU-2");
  EXPECT_EQ(DevicesByCluster(nlp), (std::map<std::string, std::map<std::string, int64_t>>{{"lab", {{"nvidia.com/gpu", 1}}}}));
  // Ended, the loan moves nothing.
  loan.spec.end = t0 + std::chrono::minutes(5);
  EXPECT_TRUE(PoolsWithLoans("nlp", {}, {&loan, 1}, lender, t0).empty());
  EXPECT_EQ(PoolsWithLoans("vision", {train}, {&loan, 1}, lender, t0)[0].status.allocation.size(), 2u);
}

}  // namespace
}  // namespace gpuaas::model
