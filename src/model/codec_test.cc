#include "model/codec.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::model {
namespace {

Time T(int64_t secs) { return std::chrono::system_clock::from_time_t(secs); }

GpuCapacity SampleGpu() {
  GpuCapacity g;
  g.metadata.name = "gpu-5a3b1c2d-0000-4000-8000-000000000001";
  g.metadata.uid = "1b4e28ba-2fa1-41d2-883f-0016d3cca427";
  g.metadata.resource_version = 42;
  g.metadata.generation = 1;
  g.metadata.labels = {{"gpuaas.io/cluster", "alpha"}, {"nvidia.com/gpu.product", "NVIDIA-H200"}};
  g.metadata.creation_timestamp = T(1764688445);
  g.spec = {"alpha", "alpha.h200-01", "GPU-5a3b1c2d-0000-4000-8000-000000000001", 3,
            "H200-SXM-141GB", "NVIDIA-H200", 143771, true};
  g.status.mig_mode = MigMode::kEnabled;
  g.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-aaaa", true}, {"3g.71gb", 4, 4, "MIG-bbbb", false}};
  g.status.health = Health::kHealthy;
  g.status.conditions = {{"Healthy", ConditionStatus::kTrue, "NoErrors", "no XID or ECC errors",
                          T(1764688445), 1}};
  return g;
}

TEST(Codec, GpuCapacityRoundTrips) {
  GpuCapacity g = SampleGpu();
  std::string text = Encode(g);
  absl::StatusOr<GpuCapacity> back = Decode<GpuCapacity>(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, g);
  EXPECT_EQ(Encode(*back), text);
  EXPECT_NE(text.find("\"apiVersion\":\"gpuaas.io/v1\""), std::string::npos);
  EXPECT_NE(text.find("\"resourceVersion\":\"42\""), std::string::npos);
  EXPECT_NE(text.find("\"migMode\":\"Enabled\""), std::string::npos);
  EXPECT_NE(text.find("\"creationTimestamp\":\"2025-12-02T15:14:05Z\""), std::string::npos);
}

TEST(Codec, OtherKindsRoundTrip) {
  Cluster c;
  c.metadata.name = "alpha";
  c.spec = {"Alpha (us-east)", "simulated", "us-east"};
  c.status.nodes = 10;
  c.status.gpus = 80;
  ASSERT_TRUE(Decode<Cluster>(Encode(c)).ok());
  EXPECT_EQ(*Decode<Cluster>(Encode(c)), c);

  NodeCapacity n;
  n.metadata.name = "alpha.h200-01";
  n.spec = {"alpha", "h200-01", "H200-SXM-141GB", "NVIDIA-H200", 8, 192, 2199023255552, true};
  n.status.physical_gpus = 8;
  n.status.physical_gpu_memory_mib = 8 * 143771;
  n.status.mig_enabled_gpus = 2;
  n.status.allocatable = {{"nvidia.com/gpu", 6}, {"nvidia.com/mig-3g.71gb", 4}};
  n.status.allocated = {{"nvidia.com/gpu", 1}};
  EXPECT_EQ(*Decode<NodeCapacity>(Encode(n)), n);

  SpecAndCount s;
  s.metadata.name = "alpha.h200-01.3g.71gb";
  s.spec = {"alpha", "alpha.h200-01", "H200-SXM-141GB", "3g.71gb", "nvidia.com/mig-3g.71gb"};
  s.status = {4, 1, 3};
  EXPECT_EQ(*Decode<SpecAndCount>(Encode(s)), s);

  Defragmentation d;
  d.metadata.name = "defrag-20261205-081530-0a1b2c3d";
  d.spec = {{"gpu-1", "gpu-2"}, "ops"};
  EXPECT_EQ(*Decode<Defragmentation>(Encode(d)), d) << "Pending, nothing made";
  d.status.phase = Defragmentation::Phase::kApplied;
  d.status.completed = ParseTime("2026-12-05T08:15:31Z");
  d.status.moves = {{"GPU-1", "alpha", "alpha.h200-01", "H200-SXM-141GB", "4g.71gb@0 2g.35gb@4", "4g.71gb@0",
                     "2g.35gb@4", "2g.35gb", "3g.71gb", {}},
                    {"GPU-2", "alpha", "alpha.h200-02", "H200-SXM-141GB", "3g.71gb@4", "", "", "3g.71gb", "7g.141gb",
                     {{"vision/movable", "3g.71gb", "GPU-2", 4, "GPU-3", "alpha.h200-03", 0, "MIG-9"}}}};
  EXPECT_EQ(*Decode<Defragmentation>(Encode(d)), d);
  // The moves as the plan shows them are the status's, to the byte.
  EXPECT_NE(Encode(d).find("\"moves\":" + EncodeMoves(d.status.moves)), std::string::npos) << Encode(d);
  d.status = {Defragmentation::Phase::kFailed, "GPU gpu-1 has no defragmentation move now", {},
              ParseTime("2026-12-05T08:15:31Z")};
  EXPECT_EQ(*Decode<Defragmentation>(Encode(d)), d);
}

void ExpectError(std::string_view json, std::string_view fragment) {
  absl::StatusOr<GpuCapacity> r = Decode<GpuCapacity>(json);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().ToString().find(fragment), std::string::npos)
      << "got: " << r.status().message() << "\nwant: " << fragment;
}

TEST(Codec, DecodeMetaReadsOnlyTheTopLevelMetadata) {
  // Keys, strings and nesting that could mislead a scan: a "metadata" inside spec, braces and
  // escaped quotes inside strings, metadata after the other members.
  const std::string text = R"({"spec":{"metadata":{"name":"inner"},"note":"}\"{[","list":[{"a":"]"}]},)"
                           R"("kind":"X", "metadata" : {"name":"outer","labels":{"k":"v}\"","x":"{"}},)"
                           R"("status":{"s":"metadata"}})";
  absl::StatusOr<ObjectMeta> m = DecodeMeta(text);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "outer");
  EXPECT_EQ(m->labels.at("k"), "v}\"");
  EXPECT_EQ(m->labels.at("x"), "{");

  // What the encoder writes reads back the same as through the whole object.
  const std::string gpu = Encode(SampleGpu());
  absl::StatusOr<ObjectMeta> meta = DecodeMeta(gpu);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->name, SampleGpu().metadata.name);
  EXPECT_EQ(meta->labels, SampleGpu().metadata.labels);
  EXPECT_EQ(meta->resource_version, 42);

  // Without a plain metadata member the whole text is parsed, and errors are reported.
  EXPECT_FALSE(DecodeMeta(R"({"kind":"X"})").ok());
  EXPECT_FALSE(DecodeMeta(R"({"metadata":{"name":"a")").ok());
  EXPECT_FALSE(DecodeMeta("not json").ok());
  absl::StatusOr<ObjectMeta> escaped = DecodeMeta(R"({"meta\u0064ata":{"name":"e"}})");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->name, "e");
}

TEST(Codec, RejectsBadInputWithTheField) {
  std::string good = Encode(SampleGpu());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string s = good;
    size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return s.replace(p, from.size(), to);
  };
  ExpectError(with("\"Enabled\"", "\"On\""),
              "status.migMode: unknown value \"On\"; expected one of Disabled, Enabled");
  ExpectError(with("\"health\":\"Healthy\"", "\"health\":\"Fine\""), "status.health: unknown value");
  ExpectError(with("\"status\":\"True\"", "\"status\":\"Yes\""),
              "status.conditions[0].status: unknown value \"Yes\"");
  ExpectError(with("\"index\":3", "\"index\":\"3\""), "spec.index: expected an integer");
  ExpectError(with("\"index\":3", "\"index\":-1"), "spec.index: must be at least 0");
  ExpectError(with("\"gpuaas.io/v1\"", "\"gpuaas.io/v2\""), "apiVersion: \"gpuaas.io/v2\"");
  ExpectError(with("\"GpuCapacity\"", "\"NodeCapacity\""), "kind: \"NodeCapacity\" does not match");
  ExpectError(with("\"resourceVersion\":\"42\"", "\"resourceVersion\":\"4x\""),
              "metadata.resourceVersion");
  ExpectError(with("\"2025-12-02T15:14:05Z\"", "\"yesterday\""), "creationTimestamp");
  // A day that does not exist is refused, not rolled over into March.
  ExpectError(with("\"2025-12-02T15:14:05Z\"", "\"2027-02-31T00:00:00Z\""), "creationTimestamp");
  ExpectError(with("\"size\":4", "\"size\":0"), "placement.size: must be at least 1");
  ExpectError("{\"apiVersion\":", "not valid JSON");
  ExpectError("[]", "expected an object");
  ExpectError("{\"apiVersion\":\"gpuaas.io/v1\",\"kind\":\"GpuCapacity\"}", "metadata: required");
}

TEST(Codec, SpecAndCountMustAddUp) {
  SpecAndCount s;
  s.metadata.name = "x";
  s.spec = {"alpha", "alpha.n", "H200-SXM-141GB", "full", "nvidia.com/gpu"};
  s.status = {4, 1, 2};
  absl::StatusOr<SpecAndCount> r = Decode<SpecAndCount>(Encode(s));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must equal count"), std::string::npos);
}

TEST(Codec, UnknownFieldsAreIgnored) {
  std::string text = Encode(SampleGpu());
  text.insert(1, "\"extra\":{\"x\":1},");
  EXPECT_TRUE(Decode<GpuCapacity>(text).ok());
}

TEST(Names, Validation) {
  EXPECT_TRUE(ValidateName("alpha.h200-01").ok());
  EXPECT_FALSE(ValidateName("").ok());
  EXPECT_FALSE(ValidateName("Alpha").ok());
  EXPECT_FALSE(ValidateName("-a").ok());
  EXPECT_FALSE(ValidateName("a_b").ok());
  EXPECT_FALSE(ValidateName(std::string(254, 'a')).ok());
  EXPECT_TRUE(ValidateLabels({{"gpuaas.io/cluster", "alpha"}, {"tier", ""}}).ok());
  EXPECT_FALSE(ValidateLabels({{"bad key", "x"}}).ok());
  EXPECT_FALSE(ValidateLabels({{"k", "bad value"}}).ok());
}

TEST(Conditions, SetKeepsTransitionTimeWhenStatusHolds) {
  std::vector<Condition> conds;
  EXPECT_TRUE(SetCondition(conds, {"Ready", ConditionStatus::kFalse, "Waiting", "", T(10), 1}));
  EXPECT_FALSE(SetCondition(conds, {"Ready", ConditionStatus::kFalse, "Waiting", "", T(20), 1}));
  EXPECT_EQ(conds[0].last_transition_time, T(10));
  EXPECT_TRUE(SetCondition(conds, {"Ready", ConditionStatus::kTrue, "Done", "", T(30), 1}));
  EXPECT_EQ(conds[0].last_transition_time, T(30));
  EXPECT_EQ(FindCondition(conds, "Ready")->reason, "Done");
  EXPECT_EQ(FindCondition(conds, "Other"), nullptr);
}

// Every property a schema names has a type (or is kept whole); a description given for a member
// no decoder reads would have none, so this also catches a Doc that drifted from the decoder.
void ExpectTyped(const nlohmann::json& schema, const std::string& path) {
  if (schema.contains("x-kubernetes-preserve-unknown-fields")) return;
  ASSERT_TRUE(schema.contains("type")) << path << ": " << schema.dump();
  if (schema.contains("properties")) {
    for (const auto& [k, v] : schema["properties"].items()) ExpectTyped(v, path + "." + k);
  }
  if (schema.contains("items")) ExpectTyped(schema["items"], path + "[]");
}

TEST(Codec, EachKindsSchemaIsWhatItsDecoderReads) {
  const nlohmann::json pool = nlohmann::json::parse(SchemaOf<GpuPool>());
  ExpectTyped(pool, "GpuPool");
  for (const std::string& kind :
       {SchemaOf<Cluster>(), SchemaOf<NodeCapacity>(), SchemaOf<GpuCapacity>(), SchemaOf<SpecAndCount>(),
        SchemaOf<Project>(), SchemaOf<MigLayout>(), SchemaOf<Defragmentation>(), SchemaOf<Workload>(),
        SchemaOf<Profile>(), SchemaOf<RateCard>(), SchemaOf<UsageRecord>(), SchemaOf<CreditNote>()}) {
    ExpectTyped(nlohmann::json::parse(kind), "kind");
  }
  // Required as the decoder requires them: a pool needs metadata and spec; its items each a
  // model, a profile and a count of at least 1.
  EXPECT_EQ(pool["required"], nlohmann::json({"apiVersion", "kind", "metadata", "spec"}));
  const nlohmann::json& item = pool["properties"]["spec"]["properties"]["items"];
  EXPECT_EQ(item["type"], "array");
  EXPECT_EQ(item["items"]["required"], nlohmann::json({"model", "profile", "count"}));
  EXPECT_EQ(item["items"]["properties"]["count"]["minimum"], 1);
  EXPECT_EQ(item["items"]["properties"]["count"]["format"], "int64");
  EXPECT_NE(item["items"]["properties"]["profile"]["description"].get<std::string>().find("MIG profile"),
            std::string::npos);
  EXPECT_EQ(pool["properties"]["spec"]["properties"]["workloadType"]["enum"],
            nlohmann::json({"training", "inference", "development"}));
  // What a decoder reads only when present is optional, whatever accessor reads it: a
  // project's spec, and its quota within.
  const nlohmann::json project = nlohmann::json::parse(SchemaOf<Project>());
  EXPECT_EQ(project["required"], nlohmann::json({"apiVersion", "kind", "metadata"}));
  EXPECT_FALSE(project["properties"]["spec"].contains("required")) << project["properties"]["spec"].dump();
  EXPECT_EQ(project["properties"]["spec"]["properties"]["quota"]["properties"]["fullGpus"]["additionalProperties"]["minimum"],
            0);
  // Times are RFC 3339; a RateCard's effectiveFrom is required (JsonIn::Needs).
  const nlohmann::json card = nlohmann::json::parse(SchemaOf<RateCard>());
  EXPECT_EQ(card["properties"]["spec"]["properties"]["effectiveFrom"]["format"], "date-time");
  EXPECT_NE(std::find(card["properties"]["spec"]["required"].begin(), card["properties"]["spec"]["required"].end(),
                      "effectiveFrom"),
            card["properties"]["spec"]["required"].end());
}

}  // namespace
}  // namespace gpuaas::model
