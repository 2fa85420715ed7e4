// Field managers and server-side apply (api/internal/apply.h), on objects as JSON.
#include "api/internal/apply.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;

const Time kT0 = *ParseTime("2026-12-01T00:00:00Z");
const Time kT1 = *ParseTime("2026-12-01T01:00:00Z");

json Pool(int count, json labels = json::object()) {
  json j = {{"apiVersion", "gpuaas.io/v1"},
            {"kind", "GpuPool"},
            {"metadata", {{"name", "train"}, {"namespace", "vision"}}},
            {"spec", {{"items", {{{"model", "H200-SXM-141GB"}, {"profile", "full"}, {"count", count}}}}}}};
  if (!labels.empty()) j["metadata"]["labels"] = labels;
  return j;
}

// The fields `manager` owns, as FieldsV1 text; "" when it has no entry.
std::string Owned(const json& obj, const std::string& manager) {
  for (const json& e : obj["metadata"].value("managedFields", json::array())) {
    if (e["manager"] == manager) return e["fieldsV1"].dump();
  }
  return "";
}

TEST(ServerSideApply, CreatesWhatIsAbsentAndOwnsExactlyWhatItApplied) {
  absl::StatusOr<json> made = ServerSideApply(nullptr, Pool(1, {{"team", "vision"}}), "team", false, kT0);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)["spec"]["items"][0]["count"], 1);
  EXPECT_EQ(Owned(*made, "team"), R"({"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:items":{}}})");
  const json& e = (*made)["metadata"]["managedFields"][0];
  EXPECT_EQ(e["operation"], "Apply");
  EXPECT_EQ(e["fieldsType"], "FieldsV1");
  EXPECT_EQ(e["apiVersion"], "gpuaas.io/v1");
  EXPECT_EQ(e["time"], "2026-12-01T00:00:00Z");

  // The same apply again changes nothing, the entry's time included.
  absl::StatusOr<json> again = ServerSideApply(&*made, Pool(1, {{"team", "vision"}}), "team", false, kT1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);
}

TEST(ServerSideApply, AnotherManagersChangeIsAConflictUntilForced) {
  const json live = *ServerSideApply(nullptr, Pool(1), "team", false, kT0);
  absl::StatusOr<json> clash = ServerSideApply(&live, Pool(2), "argocd", false, kT1);
  ASSERT_TRUE(absl::IsAborted(clash.status())) << clash.status();
  EXPECT_EQ(clash.status().message(), R"(Apply failed with 1 conflict: conflict with "team": .spec.items)");

  // The same value is no conflict: both own the field.
  absl::StatusOr<json> shared = ServerSideApply(&live, Pool(1, {{"env", "prod"}}), "argocd", false, kT1);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_NE(Owned(*shared, "team").find("f:items"), std::string::npos);
  EXPECT_NE(Owned(*shared, "argocd").find("f:items"), std::string::npos);

  // Forced: the field is the forcing manager's alone, and its value is applied.
  absl::StatusOr<json> taken = ServerSideApply(&live, Pool(2), "argocd", true, kT1);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ((*taken)["spec"]["items"][0]["count"], 2);
  EXPECT_EQ(Owned(*taken, "team"), "") << "team owned nothing else, so its entry goes";
  EXPECT_EQ(Owned(*taken, "argocd"), R"({"f:spec":{"f:items":{}}})");
}

TEST(ServerSideApply, AFieldNoLongerAppliedGoesUnlessAnotherManagerOwnsIt) {
  json live = *ServerSideApply(nullptr, Pool(1, {{"team", "vision"}, {"tier", "gold"}}), "team", false, kT0);
  // kubectl label (an update) takes "tier" as well.
  json labelled = live;
  labelled["metadata"]["labels"]["tier"] = "platinum";
  RecordUpdate(&live, labelled, "kubectl-label", kT1);
  EXPECT_EQ(Owned(labelled, "kubectl-label"), R"({"f:metadata":{"f:labels":{"f:tier":{}}}})");
  EXPECT_EQ(Owned(labelled, "team"), R"({"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:items":{}}})");
  // team stops applying both labels: its own goes, the one kubectl-label set stays.
  absl::StatusOr<json> next = ServerSideApply(&labelled, Pool(1), "team", false, kT1);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)["metadata"]["labels"], json({{"tier", "platinum"}}));
  // Conflicts name an updater with its version, as kube-apiserver does.
  absl::StatusOr<json> clash = ServerSideApply(&*next, Pool(1, {{"tier", "bronze"}}), "team", false, kT1);
  EXPECT_EQ(clash.status().message(),
            R"(Apply failed with 1 conflict: conflict with "kubectl-label" using gpuaas.io/v1: .metadata.labels.tier)");
}

TEST(ServerSideApply, SeveralConflictsAreListedByManager) {
  json live = *ServerSideApply(nullptr, Pool(1, {{"a", "1"}}), "one", false, kT0);
  json two = live;
  two["metadata"]["labels"]["b"] = "2";
  RecordUpdate(&live, two, "two", kT0);
  absl::StatusOr<json> clash = ServerSideApply(&two, Pool(3, {{"a", "x"}, {"b", "y"}}), "three", false, kT1);
  EXPECT_EQ(clash.status().message(),
            "Apply failed with 3 conflicts: conflicts with \"one\":\n- .metadata.labels.a\n- .spec.items\n"
            "conflicts with \"two\" using gpuaas.io/v1:\n- .metadata.labels.b");
}

TEST(RecordUpdate, WritersOwnWhatTheySetAndStatusIsNobodys) {
  json created = Pool(1);
  RecordUpdate(nullptr, created, "kubectl-create", kT0);
  EXPECT_EQ(Owned(created, "kubectl-create"), R"({"f:spec":{"f:items":{}}})");
  json patched = created;
  patched["spec"]["workloadType"] = "inference";
  patched["status"] = {{"phase", "x"}};
  patched["metadata"]["resourceVersion"] = "7";
  RecordUpdate(&created, patched, "kubectl-patch", kT1);
  EXPECT_EQ(Owned(patched, "kubectl-patch"), R"({"f:spec":{"f:workloadType":{}}})");
  EXPECT_EQ(Owned(patched, "kubectl-create"), R"({"f:spec":{"f:items":{}}})");
  // A write that changes nothing leaves every entry as it was, times included.
  json same = patched;
  RecordUpdate(&patched, same, "kubectl-patch", *ParseTime("2026-12-02T00:00:00Z"));
  EXPECT_EQ(same, patched);
}

TEST(FieldManager, TheParameterTheUserAgentOrRefused) {
  HttpRequest req;
  req.headers = {{"User-Agent", "kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07"}};
  EXPECT_EQ(*FieldManagerOf(req, false), "kubectl");
  EXPECT_FALSE(FieldManagerOf(req, true).ok()) << "an apply names its manager";
  req.query.emplace("fieldManager", "argocd");
  EXPECT_EQ(*FieldManagerOf(req, true), "argocd");
  req.query = {{"fieldManager", std::string(200, 'x')}};
  EXPECT_FALSE(FieldManagerOf(req, false).ok());
}

}  // namespace
}  // namespace gpuaas::api::internal
