#include "api/internal/bodies.h"

#include "common/problem.h"
#include "gtest/gtest.h"

namespace gpuaas::api::internal {
namespace {

// "ok", or the message of the InvalidArgument that refused `json`.
template <typename T>
std::string ErrorOf(std::string_view json) {
  absl::StatusOr<T> b = DecodeBody<T>(json);
  if (b.ok()) return "ok";
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << json;
  return std::string(b.status().message());
}

TEST(Bodies, ABodyIsAJsonObject) {
  EXPECT_EQ(ErrorOf<ApprovalBody>("{\"approve\": tru"), "body is not valid JSON");
  EXPECT_EQ(ErrorOf<ApprovalBody>(""), "body is not valid JSON");
  EXPECT_EQ(ErrorOf<ApprovalBody>("[true]"), "(root): expected an object");
  EXPECT_EQ(ErrorOf<TokenBody>("\"user\""), "(root): expected an object");
  // Members a body does not know are ignored.
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": true, "by": "olive"})"), "ok");
}

TEST(Bodies, ApprovalNeedsADecisionAndARejectionAReason) {
  absl::StatusOr<ApprovalBody> a = DecodeBody<ApprovalBody>(R"({"approve": false, "reason": "no A100 here"})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->approve);
  EXPECT_EQ(a->reason, "no A100 here");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": true})"), "ok");
  EXPECT_EQ(ErrorOf<ApprovalBody>("{}"), "approve: required");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": "yes"})"), "approve: expected true or false");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": null})"), "approve: expected true or false");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": true, "reason": 3})"), "reason: expected a string");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": true, "reason": null})"), "reason: expected a string");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": false})"),
            "reason: required when approve is false (a rejection needs a reason)");
  EXPECT_EQ(ErrorOf<ApprovalBody>(R"({"approve": false, "reason": ""})"),
            "reason: required when approve is false (a rejection needs a reason)");
}

TEST(Bodies, BudgetCountsAreNonNegativeAndZeroOrNullIsNoLimit) {
  absl::StatusOr<BudgetBody> b = DecodeBody<BudgetBody>(R"({"amountMicros": 5000000, "allowOverrun": true})");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->amount_micros, 5000000);
  EXPECT_EQ(b->gpu_hours, 0);
  EXPECT_TRUE(b->allow_overrun);
  b = DecodeBody<BudgetBody>(R"({"amountMicros": null, "gpuHours": null})");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->amount_micros, 0);
  EXPECT_FALSE(b->allow_overrun);
  EXPECT_EQ(ErrorOf<BudgetBody>("{}"), "ok");
  EXPECT_EQ(ErrorOf<BudgetBody>(R"({"amountMicros": -1})"), "amountMicros: must be at least 0");
  EXPECT_EQ(ErrorOf<BudgetBody>(R"({"gpuHours": 1.5})"), "gpuHours: expected an integer");
  EXPECT_EQ(ErrorOf<BudgetBody>(R"({"gpuHours": 9223372036854775808})"), "gpuHours: out of range");
  EXPECT_EQ(ErrorOf<BudgetBody>(R"({"allowOverrun": "yes"})"), "allowOverrun: expected true or false");
  EXPECT_EQ(ErrorOf<BudgetBody>(R"({"allowOverrun": null})"), "allowOverrun: expected true or false");
}

TEST(Bodies, CreditNoteNeedsEveryField) {
  absl::StatusOr<CreditNoteBody> n =
      DecodeBody<CreditNoteBody>(R"({"period": "2026-01", "amountMicros": 250000, "reason": "outage"})");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->period, "2026-01");
  EXPECT_EQ(n->amount_micros, 250000);
  EXPECT_EQ(n->reason, "outage");
  // The pool service judges the amount (it must be positive): the body only reads it.
  EXPECT_EQ(ErrorOf<CreditNoteBody>(R"({"period": "2026-01", "amountMicros": -5, "reason": "x"})"), "ok");
  EXPECT_EQ(ErrorOf<CreditNoteBody>(R"({"amountMicros": 1, "reason": "x"})"), "period: required");
  EXPECT_EQ(ErrorOf<CreditNoteBody>(R"({"period": "2026-01", "reason": "x"})"), "amountMicros: required");
  EXPECT_EQ(ErrorOf<CreditNoteBody>(R"({"period": "2026-01", "amountMicros": "1", "reason": "x"})"),
            "amountMicros: expected an integer");
  EXPECT_EQ(ErrorOf<CreditNoteBody>(R"({"period": "2026-01", "amountMicros": 1, "reason": null})"),
            "reason: expected a string");
}

TEST(Bodies, DefragNamesGpusByUuid) {
  absl::StatusOr<DefragBody> d = DecodeBody<DefragBody>(R"({"gpus": ["GPU-1", "GPU-2"]})");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->gpus, (std::vector<std::string>{"GPU-1", "GPU-2"}));
  EXPECT_EQ(ErrorOf<DefragBody>("{}"), "ok");  // every move
  EXPECT_EQ(ErrorOf<DefragBody>(R"({"gpus": 3})"), "gpus: expected an array of strings");
  EXPECT_EQ(ErrorOf<DefragBody>(R"({"gpus": null})"), "gpus: expected an array of strings");
  EXPECT_EQ(ErrorOf<DefragBody>(R"({"gpus": ["GPU-1", 3]})"), "gpus[1]: expected a string");
}

TEST(Bodies, ClusterRegistrationNeedsANameAndAKubeconfig) {
  absl::StatusOr<ClusterBody> c =
      DecodeBody<ClusterBody>(R"({"name": "lab", "kubeconfig": "apiVersion: v1", "displayName": "Lab"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "lab");
  EXPECT_EQ(c->kubeconfig, "apiVersion: v1");
  EXPECT_EQ(c->display_name, "Lab");
  EXPECT_EQ(c->context, "");
  EXPECT_EQ(ErrorOf<ClusterBody>(R"({"name": "lab"})"), "kubeconfig: required");
  EXPECT_EQ(ErrorOf<ClusterBody>(R"({"name": 7, "kubeconfig": "x"})"), "name: expected a string");
  EXPECT_EQ(ErrorOf<ClusterBody>(R"({"name": "lab", "kubeconfig": "x", "region": []})"), "region: expected a string");
  EXPECT_EQ(ErrorOf<ClusterBody>(R"({"name": "lab", "kubeconfig": "x", "context": null})"),
            "context: expected a string");
}

TEST(Bodies, TokenRolesAndNodes) {
  absl::StatusOr<TokenBody> t =
      DecodeBody<TokenBody>(R"({"user": "node-7", "role": "agent", "cluster": "alpha", "nodes": ["h200-01", "h200-02"]})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->user, "node-7");
  EXPECT_EQ(t->role, Role::kAgent);
  EXPECT_EQ(t->cluster, "alpha");
  EXPECT_EQ(t->nodes, (std::vector<std::string>{"h200-01", "h200-02"}));
  EXPECT_EQ(ErrorOf<TokenBody>(R"({"role": "member"})"), "user: required");
  EXPECT_EQ(ErrorOf<TokenBody>(R"({"user": "mia"})"), "role: required");
  EXPECT_EQ(ErrorOf<TokenBody>(R"({"user": "mia", "role": "root"})"), "role: \"root\" is not operator, member or agent");
  EXPECT_EQ(ErrorOf<TokenBody>(R"({"user": "mia", "role": "member", "project": 1})"), "project: expected a string");
  EXPECT_EQ(ErrorOf<TokenBody>(R"({"user": "n", "role": "agent", "cluster": "alpha", "nodes": ["h200-01", 1]})"),
            "nodes[1]: expected a string");
}

TEST(Bodies, ARequestCarriesJsonText) {
  HttpRequest req;
  req.headers = {{"Content-Type", "text/plain"}};
  req.body = R"({"approve": true})";
  EXPECT_EQ(ProblemFor(ReadBody<ApprovalBody>(req).status()).status, 415);
  req.headers = {{"Content-Type", "application/json; charset=utf-8"}};
  EXPECT_TRUE(ReadBody<ApprovalBody>(req).ok());
  req.body = "{\"approve\": true, \"reason\": \"\xff\"}";
  EXPECT_EQ(ReadBody<ApprovalBody>(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.body = R"({"approve": 1})";
  EXPECT_EQ(ReadBody<ApprovalBody>(req).status().message(), "approve: expected true or false");
}

}  // namespace
}  // namespace gpuaas::api::internal
