#include "cli/output.h"

#include <sstream>

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cli {
namespace {

TEST(Output, TablesAlignLikeKubectl) {
  Table t({"NAME", "GPUS", "MODEL"});
  t.Add({"alpha.h200-01", "8", "H200-SXM-141GB"});
  t.Add({"b", "16", "A100-80GB"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "NAME            GPUS   MODEL\n"
            "alpha.h200-01   8      H200-SXM-141GB\n"
            "b               16     A100-80GB\n");
}

TEST(Output, YamlKeepsTypes) {
  absl::StatusOr<std::string> y =
      JsonToYaml(R"({"name":"a","rv":"42","n":42,"on":true,"empty":"","x":"yes","list":[1,"2"]})");
  ASSERT_TRUE(y.ok());
  YAML::Node n = YAML::Load(*y);
  EXPECT_EQ(n["rv"].Tag(), "!");  // quoted: stays a string
  EXPECT_EQ(n["rv"].as<std::string>(), "42");
  EXPECT_EQ(n["n"].as<int>(), 42);
  EXPECT_EQ(n["x"].Tag(), "!");
  EXPECT_EQ(n["empty"].as<std::string>(), "");
  EXPECT_EQ(n["list"][1].Tag(), "!");
  EXPECT_FALSE(JsonToYaml("{nope").ok());
}

TEST(Output, Formats) {
  EXPECT_EQ(*ParseFormat("json"), Format::kJson);
  EXPECT_EQ(*ParseFormat("yaml"), Format::kYaml);
  EXPECT_EQ(*ParseFormat("table"), Format::kTable);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

TEST(Output, Age) {
  EXPECT_EQ(Age("not a time"), "<unknown>");
  EXPECT_EQ(Age("2000-01-01T00:00:00Z").back(), 'd');
}

}  // namespace
}  // namespace gpuaas::cli
