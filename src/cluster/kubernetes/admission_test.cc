#include "cluster/kubernetes/admission.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

model::GpuPool Pool(const std::string& project, const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& devices /* node, profile */) {
  model::GpuPool p;
  p.metadata.ns = project;
  p.metadata.name = name;
  p.spec.cluster = "lab";
  for (const auto& [node, profile] : devices) {
    model::AllocatedDevice d;
    d.cluster = "lab";
    d.node = "lab." + node;
    d.gpu_uuid = "GPU-" + node;
    d.profile = profile;
    p.status.allocation.push_back(d);
  }
  return p;
}

std::string Review(const std::string& ns, json containers, const json& affinity = nullptr) {
  // One container in braces is that container, not a list of it.
  if (!containers.is_array()) containers = json::array({containers});
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", ns}}},
              {"spec", {{"containers", containers}}}};
  if (!affinity.is_null()) pod["spec"]["affinity"] = affinity;
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request", {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"namespace", ns}, {"operation", "CREATE"},
                           {"object", pod}}}}
      .dump();
}

json Container(const json& limits) { return {{"name", "c"}, {"image", "x"}, {"resources", {{"limits", limits}}}}; }

json Decide(const std::vector<model::GpuPool>& pools, const std::string& review,
            AdmissionMode mode = AdmissionMode::kMutate) {
  absl::StatusOr<std::string> out = ReviewPod(review, "lab", PoolsFrom(pools), mode);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? json::parse(*out)["response"] : json();
}

json Patch(const json& response) {
  std::string text;
  EXPECT_TRUE(absl::Base64Unescape(response["patch"].get<std::string>(), &text));
  return json::parse(text);
}

class AdmissionTest : public ::testing::Test {
 protected:
  // vision: 2 whole GPUs on h200-a, 1 on h200-b, 2 x 3g.71gb on h200-c; nlp: 1 GPU on h200-d.
  std::vector<model::GpuPool> pools_ = {
      Pool("vision", "train", {{"h200-a", "full"}, {"h200-a", "full"}, {"h200-b", "full"}}),
      Pool("vision", "serve", {{"h200-c", "3g.71gb"}, {"h200-c", "3g.71gb"}}),
      Pool("nlp", "train", {{"h200-d", "full"}})};
};

TEST_F(AdmissionTest, APodIsSteeredToTheNodesWhereItsProjectsPoolsHoldWhatItAsks) {
  json r = Decide(pools_, Review("vision", {Container({{"nvidia.com/gpu", "2"}, {"cpu", "8"}})}));
  EXPECT_EQ(r["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  ASSERT_TRUE(r["allowed"].get<bool>()) << r.dump();
  EXPECT_EQ(r["patchType"], "JSONPatch");
  json patch = Patch(r);
  ASSERT_EQ(patch.size(), 2u) << patch.dump();
  const json toleration = {{"key", "gpuaas.io/pool"}, {"operator", "Equal"}, {"value", "vision.train"}, {"effect", "NoSchedule"}};
  EXPECT_EQ(patch[1], (json{{"op", "add"}, {"path", "/spec/tolerations"}, {"value", json::array({toleration})}}))
      << "the pool's taint on nodes it holds whole is tolerated";
  // A pod with tolerations of its own gets the pool's appended, once.
  json with = json::parse(Review("vision", {Container({{"nvidia.com/gpu", "2"}})}));
  with["request"]["object"]["spec"]["tolerations"] = json::array({{{"key", "dedicated"}, {"operator", "Exists"}}});
  patch = Patch(Decide(pools_, with.dump()));
  ASSERT_EQ(patch.size(), 2u) << patch.dump();
  EXPECT_EQ(patch[1], (json{{"op", "add"}, {"path", "/spec/tolerations/-"}, {"value", toleration}}));
  with["request"]["object"]["spec"]["tolerations"].push_back(toleration);
  EXPECT_EQ(Patch(Decide(pools_, with.dump())).size(), 1u) << "a toleration the pod has is not added again";
  patch = Patch(r);
  EXPECT_EQ(patch[0]["op"], "add");
  EXPECT_EQ(patch[0]["path"], "/spec/affinity");
  const json terms = patch[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["matchExpressions"][0],
            (json{{"key", "kubernetes.io/hostname"}, {"operator", "In"}, {"values", {"h200-a"}}}))
      << "only h200-a holds two of the pool's GPUs";

  // One GPU: either node of the pool.
  r = Decide(pools_, Review("vision", {Container({{"nvidia.com/gpu", 1}})}));
  EXPECT_EQ(Patch(r)[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                   ["matchExpressions"][0]["values"],
            (json{"h200-a", "h200-b"}));

  // The pod's own required terms (ORed) each get the expression (ANDed within a term).
  const json own = {{"nodeAffinity",
                     {{"requiredDuringSchedulingIgnoredDuringExecution",
                       {{"nodeSelectorTerms",
                         {{{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}}}},
                          {{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}}}}}}}}}},
                    {"podAntiAffinity", {{"x", 1}}}};
  r = Decide(pools_, Review("vision", {Container({{"nvidia.com/mig-3g.71gb", "1"}})}, own));
  const json value = Patch(r)[0]["value"];
  EXPECT_EQ(value["podAntiAffinity"], own["podAntiAffinity"]) << "the rest of the affinity is kept";
  const json both = value["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(both.size(), 2u);
  for (const json& term : both) {
    ASSERT_EQ(term["matchExpressions"].size(), 2u) << term.dump();
    EXPECT_EQ(term["matchExpressions"][1]["values"], json{"h200-c"});
  }

  // Validation (after every mutating webhook) allows the pod as gpuaas steered it, without a
  // patch, and refuses it when something took the steering away or widened it.
  r = Decide(pools_, Review("vision", {Container({{"nvidia.com/mig-3g.71gb", "1"}})}, value), AdmissionMode::kValidate);
  EXPECT_TRUE(r["allowed"].get<bool>()) << r.dump();
  EXPECT_FALSE(r.contains("patch"));
  r = Decide(pools_, Review("vision", {Container({{"nvidia.com/mig-3g.71gb", "1"}})}, own), AdmissionMode::kValidate);
  EXPECT_FALSE(r["allowed"].get<bool>()) << r.dump();
  EXPECT_NE(r["status"]["message"].get<std::string>().find("not held to the nodes"), std::string::npos) << r.dump();
  json widened = value;
  widened["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][1]["matchExpressions"][1]
         ["values"] = {"h200-c", "h200-d"};
  r = Decide(pools_, Review("vision", {Container({{"nvidia.com/mig-3g.71gb", "1"}})}, widened), AdmissionMode::kValidate);
  EXPECT_FALSE(r["allowed"].get<bool>()) << "h200-d is nlp's: " << r.dump();
}

TEST_F(AdmissionTest, PodsAskingForWhatTheirProjectDoesNotHoldAreRefusedSayingWhy) {
  auto refused = [&](const std::string& ns, const json& containers, const std::string& says) {
    for (AdmissionMode mode : {AdmissionMode::kMutate, AdmissionMode::kValidate}) {
      SCOPED_TRACE(mode == AdmissionMode::kMutate ? "mutate" : "validate");
      json r = Decide(pools_, Review(ns, containers), mode);
      EXPECT_FALSE(r["allowed"].get<bool>()) << r.dump();
      EXPECT_EQ(r["status"]["code"], 403);
      EXPECT_NE(r["status"]["message"].get<std::string>().find(says), std::string::npos) << r.dump();
      EXPECT_FALSE(r.contains("patch"));
    }
  };
  refused("vision", {Container({{"nvidia.com/mig-1g.18gb", "1"}})},
          "project \"vision\" holds no nvidia.com/mig-1g.18gb in cluster lab (its pools hold nvidia.com/gpu=3, "
          "nvidia.com/mig-3g.71gb=2)");
  refused("vision", {Container({{"nvidia.com/gpu", "2"}}), Container({{"nvidia.com/gpu", "2"}})},
          "asks for 4 nvidia.com/gpu; project \"vision\"'s pools hold 3");
  refused("vision", {Container({{"nvidia.com/gpu", "1"}, {"nvidia.com/mig-3g.71gb", "1"}})}, "no node of cluster lab");
  refused("research", {Container({{"nvidia.com/gpu", "1"}})}, "its pools hold nothing");
  // nlp's GPU is not vision's, and a released pool holds nothing.
  std::vector<model::GpuPool> released = pools_;
  released[2].status.conditions.push_back({"Released", model::ConditionStatus::kTrue, "Released", "", {}, 0});
  json r = Decide(released, Review("nlp", {Container({{"nvidia.com/gpu", "1"}})}));
  EXPECT_FALSE(r["allowed"].get<bool>()) << r.dump();

  // No GPU asked for: allowed as it is, in any namespace.
  r = Decide(pools_, Review("research", {Container({{"cpu", "2"}})}));
  EXPECT_TRUE(r["allowed"].get<bool>());
  EXPECT_FALSE(r.contains("patch"));

  EXPECT_EQ(ReviewPod("{}", "lab", PoolsFrom(pools_), AdmissionMode::kMutate).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReviewPod("not json", "lab", PoolsFrom(pools_), AdmissionMode::kMutate).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A borrower's pod goes where its loan is: to the lender's node, tolerating the lending pool's
// taint (a node the lender holds whole stays tainted for it while one of its GPUs is lent), not
// a taint of its own; the lender's pods are steered to what it still holds.
TEST_F(AdmissionTest, ABorrowersPodToleratesTheLendingPoolsTaintOnTheNodeOfItsLoan) {
  model::GpuPool lender = Pool("vision", "train", {{"h200-a", "full"}, {"h200-a", "full"}, {"h200-b", "full"}});
  lender.status.allocation[0].gpu_uuid = "GPU-a0";
  lender.status.allocation[1].gpu_uuid = "GPU-a1";
  model::Loan loan;
  loan.metadata.name = "nlp.sweep-1";
  loan.spec.borrower = "nlp";
  loan.spec.workload = "sweep";
  loan.spec.lender = "vision";
  loan.spec.pool = "train";
  loan.spec.model = "H200-SXM-141GB";
  loan.spec.profile = "full";
  loan.spec.devices = {{"GPU-a1", ""}};
  auto find = [&](std::string_view ns, std::string_view name) {
    return ns == "vision" && name == "train" ? &lender : nullptr;
  };
  const std::vector<model::Loan> loans = {loan};
  const std::vector<model::GpuPool> borrower = model::PoolsWithLoans("nlp", {}, loans, find, Time{});
  ASSERT_EQ(borrower.size(), 1u);
  json r = Decide(borrower, Review("nlp", {Container({{"nvidia.com/gpu", "1"}})}));
  ASSERT_TRUE(r["allowed"].get<bool>()) << r.dump();
  json patch = Patch(r);
  ASSERT_EQ(patch.size(), 2u) << patch.dump();
  EXPECT_EQ(patch[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                 ["matchExpressions"][0]["values"],
            json{"h200-a"});
  EXPECT_EQ(patch[1]["value"],
            json::array({{{"key", "gpuaas.io/pool"}, {"operator", "Equal"}, {"value", "vision.train"}, {"effect", "NoSchedule"}}}));
  r = Decide(borrower, Review("nlp", {Container({{"nvidia.com/gpu", "2"}})}));
  EXPECT_FALSE(r["allowed"].get<bool>()) << "one GPU is lent, not two: " << r.dump();

  // The lender holds one GPU on h200-a while the other is lent, and one on h200-b.
  const std::vector<model::GpuPool> own = model::PoolsWithLoans("vision", {lender}, loans, find, Time{});
  r = Decide(own, Review("vision", {Container({{"nvidia.com/gpu", "2"}})}));
  EXPECT_FALSE(r["allowed"].get<bool>()) << "no node holds two of its GPUs now: " << r.dump();
  r = Decide(own, Review("vision", {Container({{"nvidia.com/gpu", "1"}})}));
  ASSERT_TRUE(r["allowed"].get<bool>()) << r.dump();
  EXPECT_EQ(Patch(r)[1]["value"][0]["value"], "vision.train");
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
