#include "controller/loan_pods.h"

#include "gtest/gtest.h"

namespace gpuaas::controller {
namespace {

model::GpuCapacity Gpu(const std::string& cluster, const std::string& uuid) {
  model::GpuCapacity g;
  g.metadata.name = uuid;
  g.spec.cluster = cluster;
  g.spec.uuid = uuid;
  return g;
}

// The borrower's pods on exactly the loan's devices, by cluster: a whole GPU's pods, or one MIG
// instance's; another namespace's pods (the lender's, or one whose name starts alike) are not
// the borrower's, and a GPU the inventory does not know has none.
TEST(BorrowerPods, AreTheBorrowersOwnOnTheLoansDevices) {
  model::GpuCapacity whole = Gpu("lab", "GPU-A");
  whole.status.pods = {"nlp/b", "nlp/a", "vision/train-0", "nlp-dev/c"};
  model::GpuCapacity mig = Gpu("east", "GPU-B");
  mig.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-0", true, {"nlp/x"}}, {"3g.71gb", 4, 4, "MIG-4", true, {"nlp/y"}}};
  mig.status.pods = {"nlp/whole-b"};  // what the whole GPU's list says is not the instance's
  auto find = [&](const std::string& uuid) -> const model::GpuCapacity* {
    if (uuid == "GPU-A") return &whole;
    if (uuid == "GPU-B") return &mig;
    return nullptr;
  };
  model::Loan loan;
  loan.spec.borrower = "nlp";
  loan.spec.devices = {{"GPU-A", ""}, {"GPU-B", "MIG-4"}, {"GPU-gone", ""}};
  const std::map<std::string, std::vector<std::string>> want = {{"lab", {"nlp/a", "nlp/b"}}, {"east", {"nlp/y"}}};
  EXPECT_EQ(BorrowerPods(loan, find), want);
  loan.spec.borrower = "vision";
  loan.spec.devices = {{"GPU-A", ""}};
  EXPECT_EQ(BorrowerPods(loan, find), (std::map<std::string, std::vector<std::string>>{{"lab", {"vision/train-0"}}}));
  loan.spec.borrower = "web";
  EXPECT_TRUE(BorrowerPods(loan, find).empty());
}

}  // namespace
}  // namespace gpuaas::controller
