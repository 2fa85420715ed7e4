#include "model/json_reader.h"

#include "gtest/gtest.h"

namespace gpuaas::model {
namespace {

enum class Color { kRed, kBlue };
constexpr std::array<std::pair<std::string_view, Color>, 2> kColors = {{{"red", Color::kRed}, {"blue", Color::kBlue}}};

struct Order {
  std::string name;
  int64_t count = 0;
  bool rush = false;
  Color color = Color::kRed;
  std::vector<std::string> tags;
  std::vector<int64_t> sizes;
};

Order ReadOrder(const JsonIn& in) {
  Order o;
  o.name = in.Str("name", /*required=*/true);
  o.count = in.Int("count", false, 1);
  o.rush = in.Bool("rush", false);
  o.color = in.Enum("color", kColors, Color::kRed);
  o.tags = in.StrList("tags");
  in.Each("lines", [&](const JsonIn& line) { o.sizes.push_back(line.Obj("size").Int("value", true)); });
  return o;
}

std::string ErrorOf(std::string_view text, JsonDocument doc = {}) {
  absl::StatusOr<Order> o = ReadJson(text, doc, ReadOrder);
  if (o.ok()) return "ok";
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(o.status().message());
}

TEST(JsonReader, ReadsADocumentIntoAValue) {
  absl::StatusOr<Order> o = ReadJson(
      R"({"name":"a","count":3,"rush":true,"color":"blue","tags":["x","y"],"lines":[{"size":{"value":7}}],"other":1})",
      ReadOrder);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->name, "a");
  EXPECT_EQ(o->count, 3);
  EXPECT_TRUE(o->rush);
  EXPECT_EQ(o->color, Color::kBlue);
  EXPECT_EQ(o->tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(o->sizes, std::vector<int64_t>{7});
}

TEST(JsonReader, ErrorsNameTheFieldPath) {
  EXPECT_EQ(ErrorOf("not json"), "body is not valid JSON");
  EXPECT_EQ(ErrorOf("[1]"), "(root): expected an object");
  EXPECT_EQ(ErrorOf("{}"), "name: required");
  EXPECT_EQ(ErrorOf(R"({"name":1})"), "name: expected a string");
  EXPECT_EQ(ErrorOf(R"({"name":"a","count":0})"), "count: must be at least 1");
  EXPECT_EQ(ErrorOf(R"({"name":"a","count":1.5})"), "count: expected an integer");
  EXPECT_EQ(ErrorOf(R"({"name":"a","count":9223372036854775808})"), "count: out of range");
  EXPECT_EQ(ErrorOf(R"({"name":"a","rush":"yes"})"), "rush: expected true or false");
  EXPECT_EQ(ErrorOf(R"({"name":"a","color":"green"})"), "color: unknown value \"green\"; expected one of red, blue");
  EXPECT_EQ(ErrorOf(R"({"name":"a","tags":"x"})"), "tags: expected an array of strings");
  EXPECT_EQ(ErrorOf(R"({"name":"a","tags":["x",2]})"), "tags[1]: expected a string");
  EXPECT_EQ(ErrorOf(R"({"name":"a","lines":[{"size":{"value":1}},{"size":{}}]})"), "lines[1].size.value: required");
  EXPECT_EQ(ErrorOf(R"({"name":"a","lines":[3]})"), "lines[0]: expected an object");
}

TEST(JsonReader, ADocumentCutFromALargerOneIsNamedByItsPath) {
  EXPECT_EQ(ErrorOf("{", {.path = "metadata"}), "metadata is not valid JSON");
  EXPECT_EQ(ErrorOf("3", {.path = "metadata"}), "metadata: expected an object");
  EXPECT_EQ(ErrorOf(R"({"name":"a","tags":[1]})", {.path = "metadata"}), "metadata.tags[0]: expected a string");
}

TEST(JsonReader, NullsAreAbsentOrRefused) {
  // As kube-apiserver reads objects: a null member is an absent one.
  EXPECT_EQ(ErrorOf(R"({"name":"a","count":null,"rush":null,"tags":null})"), "ok");
  EXPECT_EQ(ErrorOf(R"({"name":null})"), "name: required");
  // Where nulls are refused, a null is a value of the wrong type.
  const JsonDocument strict{.nulls = JsonNulls::kRefused};
  EXPECT_EQ(ErrorOf(R"({"name":"a","rush":null})", strict), "rush: expected true or false");
  EXPECT_EQ(ErrorOf(R"({"name":"a","tags":null})", strict), "tags: expected an array of strings");
  EXPECT_EQ(ErrorOf(R"({"name":null})", strict), "name: expected a string");
  EXPECT_EQ(ErrorOf(R"({"name":"a","lines":[{"size":null}]})", strict), "lines[0].size: expected an object");
}

TEST(JsonReader, RequiredFieldsWithoutADefault) {
  auto read = [](const JsonIn& in) { return std::make_pair(in.Bool("on"), in.Enum("color", kColors)); };
  EXPECT_EQ(ReadJson(R"({"color":"red"})", read).status().message(), "on: required");
  EXPECT_EQ(ReadJson(R"({"on":true})", read).status().message(), "color: required");
  absl::StatusOr<std::pair<bool, Color>> v = ReadJson(R"({"on":false,"color":"blue"})", read);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::make_pair(false, Color::kBlue));
}

TEST(JsonReader, ChecksBeyondTypesFailAtTheirPath) {
  absl::StatusOr<int> r = ReadJson(R"({"a":{"b":2}})", [](const JsonIn& in) -> int {
    const int64_t b = in.Obj("a").Int("b");
    if (b % 2 == 0) FailAt(in.Obj("a").Path("b"), "must be odd");
    return static_cast<int>(b);
  });
  EXPECT_EQ(r.status().message(), "a.b: must be odd");
}

// Field validation's facts: what no accessor asked for, and what is given twice, by path.
TEST(JsonReader, ReportsUnknownAndDuplicateFieldsByPath) {
  JsonFields fields;
  absl::StatusOr<Order> o = ReadJson(
      R"({"name":"a","nmae":"b","count":2,"count":3,"tags":["x"],)"
      R"("lines":[{"size":{"value":7}},{"size":{"value":8,"unit":"cm"},"note":"x"}],"extra":{"deep":1}})",
      JsonDocument{.fields = &fields}, ReadOrder);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->count, 3) << "JSON keeps the last of a duplicate";
  EXPECT_EQ(fields.unknown, (std::vector<std::string>{"extra", "lines[1].note", "lines[1].size.unit", "nmae"}));
  EXPECT_EQ(fields.duplicate, std::vector<std::string>{"count"});
  // Duplicates inside arrays and objects are named where they are; a document cut from a larger
  // one by its path.
  absl::StatusOr<Order> nested = ReadJson(R"({"name":"a","lines":[{"size":{"value":1,"value":2}}]})",
                                          JsonDocument{.path = "spec", .fields = &fields}, ReadOrder);
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_TRUE(fields.unknown.empty());
  EXPECT_EQ(fields.duplicate, std::vector<std::string>{"spec.lines[0].size.value"});
  // Absent a report, nothing is tracked (and the same document reads the same).
  EXPECT_TRUE(ReadJson(R"({"name":"a","nmae":"b"})", ReadOrder).ok());
}

TEST(JsonReader, MapsAndWholeValuesAreDataNotFields) {
  JsonFields fields;
  absl::StatusOr<int> r = ReadJson(
      R"({"labels":{"anything":"x"},"counts":{"a":1},"raw":{"k":{"j":1}},"maybe":null,"gone":null})",
      JsonDocument{.fields = &fields}, [](const JsonIn& in) -> int {
        const auto labels = in.StrMap("labels");
        const auto counts = in.Counts("counts");
        in.Need("raw");  // taken whole: the reader looks into it itself
        return static_cast<int>(labels.size() + counts.size()) + (in.IsNull("maybe") ? 1 : 0);
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 3);
  EXPECT_EQ(fields.unknown, std::vector<std::string>{"gone"}) << "a null nobody asked for is still unknown";
  EXPECT_TRUE(fields.duplicate.empty());
}

}  // namespace
}  // namespace gpuaas::model
