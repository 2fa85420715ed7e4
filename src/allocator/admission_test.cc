// Workload admission as a pure function: slots, priority order, preemption, eviction and
// requeueing, without a store.
#include "allocator/admission.h"

#include "gtest/gtest.h"

namespace gpuaas::allocator {
namespace {

using Kind = AdmissionStep::Kind;
using model::PriorityClass;
using model::WorkloadPhase;

const Time kT0 = std::chrono::system_clock::from_time_t(1764688445);

model::GpuPool ReadyPool(int devices, int64_t replicas = 0) {
  model::GpuPool p;
  p.metadata.ns = "vision";
  p.metadata.name = "train";
  p.spec.items = {{"H200-SXM-141GB", "3g.71gb", devices}};
  p.spec.time_slicing_replicas = replicas;
  p.status.approval = model::GpuPool::Approval{true, "ok", "ops", kT0};
  for (int i = 0; i < devices; ++i) {
    p.status.allocation.push_back({"alpha", "alpha.h200-01", "GPU-" + std::to_string(i), "3g.71gb", 0,
                                   "MIG-" + std::to_string(i)});
  }
  model::SetCondition(p.status.conditions, {std::string(model::kReady), model::ConditionStatus::kTrue, "Ready", "", kT0, 1});
  return p;
}

model::Workload W(const std::string& name, PriorityClass prio, int seconds_after, int64_t count = 1) {
  model::Workload w;
  w.metadata.ns = "vision";
  w.metadata.name = name;
  w.metadata.creation_timestamp = kT0 + std::chrono::seconds(seconds_after);
  w.spec = {"train", "nvidia.com/mig-3g.71gb", count, prio};
  return w;
}

void Running(model::Workload& w, const std::string& device, int seconds_after) {
  w.status.phase = WorkloadPhase::kRunning;
  w.status.reason = "Admitted";
  w.status.devices = {{"GPU-" + device, "MIG-" + device}};
  w.status.start_time = kT0 + std::chrono::seconds(seconds_after);
}

std::vector<const model::Workload*> Ptrs(const std::vector<model::Workload>& ws) {
  std::vector<const model::Workload*> out;
  for (const model::Workload& w : ws) out.push_back(&w);
  return out;
}

TEST(Admission, FillsSlotsInPriorityThenAgeOrder) {
  const model::GpuPool pool = ReadyPool(2, /*replicas=*/2);
  std::vector<model::Workload> ws = {W("b-old", PriorityClass::kBatch, 1), W("b-new", PriorityClass::kBatch, 5),
                                     W("inf", PriorityClass::kInference, 9), W("b-mid", PriorityClass::kBatch, 3),
                                     W("b-last", PriorityClass::kBatch, 7)};
  const AdmissionDecision d = Admit(&pool, Ptrs(ws));
  std::vector<std::string> started;
  for (const AdmissionStep& s : d.steps) {
    if (s.kind == Kind::kStart) started.push_back(ws[s.workload].metadata.name);
  }
  // Four slots (2 devices x 2 replicas): inference first, then the oldest batch work.
  EXPECT_EQ(started, (std::vector<std::string>{"inf", "b-old", "b-mid", "b-new"}));
  ASSERT_EQ(d.Count(Kind::kWait, "Queued"), 1);
  EXPECT_EQ(d.steps.back().message, "no free 3g.71gb device in pool train (2 slot(s) each); queued");
}

TEST(Admission, InferencePreemptsTheNewestBatchOnlyWhenThatIsEnough) {
  const model::GpuPool pool = ReadyPool(2);
  std::vector<model::Workload> ws = {W("old", PriorityClass::kBatch, 0), W("new", PriorityClass::kBatch, 1),
                                     W("serve", PriorityClass::kInference, 2)};
  Running(ws[0], "0", 10);
  Running(ws[1], "1", 20);
  AdmissionDecision d = Admit(&pool, Ptrs(ws));
  ASSERT_EQ(d.steps.size(), 2u);
  EXPECT_EQ(d.steps[0].kind, Kind::kEnd);
  EXPECT_EQ(ws[d.steps[0].workload].metadata.name, "new");
  EXPECT_EQ(d.steps[0].reason, "Preempted");
  EXPECT_EQ(d.steps[0].phase, WorkloadPhase::kPending);
  EXPECT_EQ(d.steps[1].kind, Kind::kStart);
  EXPECT_EQ(d.steps[1].devices, (std::vector<model::WorkloadDevice>{{"GPU-1", "MIG-1"}}));

  // Three devices asked for, two in the pool: preempting cannot help, so nothing is preempted.
  ws[2].spec.count = 3;
  d = Admit(&pool, Ptrs(ws));
  EXPECT_EQ(d.Count(Kind::kEnd), 0);
  EXPECT_EQ(d.Count(Kind::kWait, "Queued"), 1);

  // Batch never preempts.
  ws[2].spec = {"train", "nvidia.com/mig-3g.71gb", 1, PriorityClass::kBatch};
  d = Admit(&pool, Ptrs(ws));
  EXPECT_EQ(d.Count(Kind::kEnd), 0);
}

TEST(Admission, ReleasedPoolEvictsAndMissingPoolToo) {
  model::GpuPool pool = ReadyPool(1);
  std::vector<model::Workload> ws = {W("a", PriorityClass::kBatch, 0), W("b", PriorityClass::kBatch, 1)};
  Running(ws[0], "0", 5);
  model::SetCondition(pool.status.conditions, {std::string(model::kReleased), model::ConditionStatus::kTrue, "Released", "", kT0, 1});
  AdmissionDecision d = Admit(&pool, Ptrs(ws));
  EXPECT_EQ(d.Count(Kind::kEnd, "PoolReleased"), 2);
  EXPECT_EQ(d.steps[0].phase, WorkloadPhase::kEvicted);
  d = Admit(nullptr, Ptrs(ws));
  EXPECT_EQ(d.Count(Kind::kEnd, "PoolReleased"), 2);
  EXPECT_EQ(d.steps[0].message, "pool train is gone or released");
}

TEST(Admission, RunOnALostDeviceQueuesAgainAndRestartsOnAFreeOne) {
  model::GpuPool pool = ReadyPool(2);
  std::vector<model::Workload> ws = {W("a", PriorityClass::kBatch, 0)};
  Running(ws[0], "9", 5);  // GPU-9 left the pool
  const AdmissionDecision d = Admit(&pool, Ptrs(ws));
  ASSERT_EQ(d.steps.size(), 2u);
  EXPECT_EQ(d.steps[0].reason, "DeviceFailed");
  EXPECT_EQ(d.steps[0].message, "device MIG-9 left pool train (its GPU failed); queued again");
  EXPECT_EQ(d.steps[1].kind, Kind::kStart);
  EXPECT_EQ(d.steps[1].devices[0].gpu_uuid, "GPU-0");
}

TEST(Admission, PoolNotReadyHoldsPendingWorkOnceAndIgnoresFinishedWork) {
  model::GpuPool pool = ReadyPool(1);
  model::SetCondition(pool.status.conditions, {std::string(model::kReady), model::ConditionStatus::kFalse, "Provisioning", "", kT0, 1});
  std::vector<model::Workload> ws = {W("a", PriorityClass::kBatch, 0), W("done", PriorityClass::kBatch, 1)};
  ws[1].status.phase = WorkloadPhase::kSucceeded;
  AdmissionDecision d = Admit(&pool, Ptrs(ws));
  ASSERT_EQ(d.steps.size(), 1u);
  EXPECT_EQ(d.steps[0].reason, "PoolNotReady");
  ws[0].status.reason = "PoolNotReady";
  ws[0].status.message = d.steps[0].message;
  EXPECT_TRUE(Admit(&pool, Ptrs(ws)).steps.empty());  // nothing to write the second time
}

}  // namespace
}  // namespace gpuaas::allocator
