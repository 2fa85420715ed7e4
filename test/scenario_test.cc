// Scenario tests: each file in test/scenarios/ is a fleet, projects and a list of steps
// (requests, approvals, releases, workloads, controller passes) with the expected outcomes. The
// runner drives the real service and controllers against simulated clusters.
#include <filesystem>
#include <set>

#include "cluster/simulated/fleet.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "service/pools.h"
#include "store/objects.h"
#include "store/sqlite_store.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("test/scenarios")) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class Scenario : public ::testing::TestWithParam<std::string> {
 protected:
  template <typename T>
  std::vector<T> All(const std::string& ns = "") {
    std::vector<T> out;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::ListObjects<T>(tx, ns);
      if (r.ok()) out = *r;
      return r.status();
    }).ok());
    return out;
  }
  std::optional<model::GpuPool> Pool(const std::string& name) {
    for (model::GpuPool& p : All<model::GpuPool>()) {
      if (p.metadata.name == name) return p;
    }
    return std::nullopt;
  }
  static std::vector<model::PoolItem> Items(const YAML::Node& n) {
    std::vector<model::PoolItem> items;
    for (const YAML::Node& i : n) {
      const std::string s = i.as<std::string>();  // MODEL/PROFILE=COUNT
      const size_t slash = s.find('/'), eq = s.rfind('=');
      items.push_back({s.substr(0, slash), s.substr(slash + 1, eq - slash - 1), std::stoll(s.substr(eq + 1))});
    }
    return items;
  }

  FakeClock clock_{std::chrono::system_clock::from_time_t(1764688445)};
  std::unique_ptr<store::Store> store_;
};

TEST_P(Scenario, Runs) {
  const YAML::Node doc = YAML::LoadFile(GetParam());
  YAML::Emitter fleet_yaml;
  fleet_yaml << doc["fleet"];
  absl::StatusOr<cluster::simulated::FleetSpec> fleet = cluster::simulated::ParseFleet(fleet_yaml.c_str());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  store_ = std::move(*store::OpenStore("sqlite::memory:"));
  std::vector<std::unique_ptr<cluster::simulated::SimulatedCluster>> sims;
  std::map<std::string, cluster::ClusterDriver*> drivers;
  std::map<std::string, int64_t> gpus_by_model;
  for (const auto& c : fleet->clusters) {
    sims.push_back(std::make_unique<cluster::simulated::SimulatedCluster>(c));
    drivers[c.name] = sims.back().get();
    for (const auto& np : c.node_pools) gpus_by_model[np.model] += np.count * np.gpus_per_node;
  }
  store::ObjectCache cache(*store_);
  ASSERT_TRUE(cache.Load(controller::ControlPlaneKinds()).ok());
  telemetry::Hub hub;
  controller::ControlPlane cp(*store_, cache, clock_, drivers, hub);
  service::PoolService svc(*store_, clock_, [&] { return gpus_by_model; });
  auto sync = [&] { cp.RunUntilIdle(); };
  sync();
  for (const YAML::Node& p : doc["projects"]) {
    model::Project project;
    project.metadata.name = p["name"].as<std::string>();
    if (p["fullGpus"] || p["migComputeSlices"]) {
      model::Project::Quota q;
      for (const auto& kv : p["fullGpus"]) q.full_gpus[kv.first.as<std::string>()] = kv.second.as<int64_t>();
      for (const auto& kv : p["migComputeSlices"]) q.mig_compute_slices[kv.first.as<std::string>()] = kv.second.as<int64_t>();
      project.spec.quota = q;
    }
    ASSERT_TRUE(svc.CreateProject(project, "ops").ok());
  }
  int step_no = 0;
  for (const YAML::Node& step : doc["steps"]) {
    SCOPED_TRACE(fmt::format("{} step {}", GetParam(), ++step_no));
    const std::string kind = step.begin()->first.as<std::string>();
    const YAML::Node r = step.begin()->second;
    if (kind == "request") {
      model::GpuPool p;
      p.metadata.name = r["pool"].as<std::string>();
      p.metadata.ns = r["project"].as<std::string>();
      p.spec.items = Items(r["items"]);
      if (r["timeSlicing"]) p.spec.time_slicing_replicas = r["timeSlicing"].as<int64_t>();
      auto created = svc.CreatePool(p, "alice");
      ASSERT_TRUE(created.ok()) << created.status();
      if (!r["approve"] || r["approve"].as<bool>()) {
        ASSERT_TRUE(svc.Approve(p.metadata.ns, p.metadata.name, true, "ok", "ops").ok());
      }
    } else if (kind == "refuse") {
      model::GpuPool p;
      p.metadata.name = r["pool"].as<std::string>();
      p.metadata.ns = r["project"].as<std::string>();
      p.spec.items = Items(r["items"]);
      auto created = svc.CreatePool(p, "alice");
      ASSERT_FALSE(created.ok());
      EXPECT_EQ(absl::StatusCodeToString(created.status().code()),
                [&] {
                  std::string c = r["code"].as<std::string>();  // CamelCase, e.g. ResourceExhausted
                  std::string up;
                  for (size_t i = 0; i < c.size(); ++i) {
                    if (i > 0 && std::isupper(static_cast<unsigned char>(c[i]))) up += '_';
                    up += static_cast<char>(std::toupper(static_cast<unsigned char>(c[i])));
                  }
                  return up;
                }());
      EXPECT_NE(created.status().ToString().find(r["messageContains"].as<std::string>()), std::string::npos)
          << created.status();
    } else if (kind == "reject") {
      const std::string name = r["pool"].as<std::string>();
      ASSERT_TRUE(svc.Approve(Pool(name)->metadata.ns, name, false, r["reason"].as<std::string>(), "ops").ok());
    } else if (kind == "release") {
      const std::string name = r.as<std::string>();
      ASSERT_TRUE(svc.Release(Pool(name)->metadata.ns, name, "alice").ok());
    } else if (kind == "converge") {
      for (int i = 0; i < r.as<int>(); ++i) {  // seconds of the fake clock
        cp.RunUntilIdle();
        clock_.Advance(std::chrono::seconds(1));
      }
    } else if (kind == "pods") {
      // A workload outside gpuaas on a GPU (and all its MIG instances).
      const std::string node = r["node"].as<std::string>();
      const int index = r["gpu"].as<int>();
      for (auto& s : sims) {
        const cluster::ObservedCluster oc = *s->Observe();
        for (const auto& n : oc.nodes) {
          if (n.name != node) continue;
          const auto& g = n.gpus[static_cast<size_t>(index)];
          s->SetInUse(g.uuid, true);
          for (const auto& m : g.mig_instances) s->SetInUse(m.uuid, true);
        }
      }
      sync();
    } else if (kind == "workload") {
      model::Workload w;
      w.metadata.name = r["name"].as<std::string>();
      w.metadata.ns = r["project"].as<std::string>();
      w.spec = {r["pool"].as<std::string>(), r["resource"].as<std::string>(),
                r["count"] ? r["count"].as<int64_t>() : 1,
                r["priority"].as<std::string>() == "inference" ? model::PriorityClass::kInference
                                                                : model::PriorityClass::kBatch};
      ASSERT_TRUE(svc.CreateWorkload(w, "alice").ok());
      clock_.Advance(std::chrono::seconds(1));
    } else if (kind == "deleteWorkload") {
      ASSERT_TRUE(svc.DeleteWorkload(r["project"].as<std::string>(), r["name"].as<std::string>(), "alice").ok());
    } else if (kind == "expectWorkload") {
      bool found = false;
      for (const model::Workload& w : All<model::Workload>(r["project"].as<std::string>())) {
        if (w.metadata.name != r["name"].as<std::string>()) continue;
        found = true;
        EXPECT_EQ(std::string(model::ToString(w.status.phase)), r["phase"].as<std::string>()) << w.status.message;
        if (r["reason"]) {
          EXPECT_EQ(w.status.reason, r["reason"].as<std::string>());
        }
      }
      EXPECT_TRUE(found);
    } else if (kind == "expect") {
      std::optional<model::GpuPool> p = Pool(r["pool"].as<std::string>());
      ASSERT_TRUE(p.has_value());
      auto cond = [&](std::string_view type) { return model::FindCondition(p->status.conditions, type); };
      std::string conditions;
      for (const auto& c : p->status.conditions) {
        conditions += fmt::format("{}={}/{}: {}; ", c.type, model::ToString(c.status), c.reason, c.message);
      }
      if (r["ready"]) {
        const bool ready = cond("Ready") && cond("Ready")->status == model::ConditionStatus::kTrue;
        EXPECT_EQ(ready, r["ready"].as<bool>()) << conditions;
      }
      if (r["devices"]) {
        EXPECT_EQ(p->status.allocation.size(), r["devices"].as<size_t>()) << conditions;
      }
      if (r["nodes"]) {
        std::set<std::string> nodes;
        for (const auto& d : p->status.allocation) nodes.insert(d.node);
        EXPECT_EQ(nodes.size(), r["nodes"].as<size_t>());
      }
      if (r["migLayouts"]) {
        EXPECT_EQ(All<model::MigLayout>().size(), r["migLayouts"].as<size_t>());
      }
      if (r["allocated"]) {
        ASSERT_NE(cond("Allocated"), nullptr) << conditions;
        EXPECT_EQ(cond("Allocated")->reason, r["allocated"].as<std::string>()) << conditions;
      }
      if (r["messageContains"]) {
        EXPECT_NE(conditions.find(r["messageContains"].as<std::string>()), std::string::npos) << conditions;
      }
      if (r["released"]) {
        EXPECT_EQ(cond("Released") && cond("Released")->status == model::ConditionStatus::kTrue,
                  r["released"].as<bool>());
      }
      if (r["untouchedGpu"]) {
        // The GPU with running work kept its layout and got no MigLayout.
        const int index = r["untouchedGpu"].as<int>();
        for (const model::GpuCapacity& g : All<model::GpuCapacity>()) {
          if (g.spec.index != index) continue;
          for (const model::MigLayout& l : All<model::MigLayout>()) EXPECT_NE(l.spec.gpu_uuid, g.spec.uuid);
        }
      }
    } else {
      ADD_FAILURE() << "unknown step " << kind;
    }
  }
  // Whatever happened, no device belongs to two live pools and every layout is legal.
  std::set<std::string> devices;
  for (const model::GpuPool& p : All<model::GpuPool>()) {
    if (!model::PoolIsLive(p)) continue;
    for (const auto& d : p.status.allocation) {
      EXPECT_TRUE(devices.insert(d.gpu_uuid + "@" + (d.profile == "full" ? "full" : std::to_string(d.start))).second);
    }
  }
  for (const model::GpuCapacity& g : All<model::GpuCapacity>()) {
    const catalog::GpuModel* m = catalog::FindModel(g.spec.model);
    catalog::Layout l;
    for (const auto& i : g.status.mig_instances) l.push_back({catalog::FindProfile(*m, i.profile), static_cast<int>(i.start)});
    EXPECT_TRUE(catalog::ValidateLayout(*m, l).ok()) << g.spec.uuid;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, Scenario, ::testing::ValuesIn(ScenarioFiles()), [](const auto& p) {
  std::string n = fs::path(p.param).stem().string();
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

}  // namespace
}  // namespace gpuaas
