// The portable kernel table: plain loops over the scalar element operations, for
// any CPU this binary was compiled for (baseline x86-64, or another architecture).
#include "core/reduce/cpu_kernels.h"

namespace ringsync::cpu_kernels {
namespace {

template <DType D>
void FillDType(KernelTable& table) {
  auto& row = table.combine[static_cast<size_t>(D)];
  row[static_cast<size_t>(ReduceOp::kSum)] = &CombineLoop<D, Sum>;
  row[static_cast<size_t>(ReduceOp::kAvg)] = &CombineLoop<D, Sum>;  // AVG divides in Finalize
  row[static_cast<size_t>(ReduceOp::kMin)] = &CombineLoop<D, Min>;
  row[static_cast<size_t>(ReduceOp::kMax)] = &CombineLoop<D, Max>;
  row[static_cast<size_t>(ReduceOp::kProd)] = &CombineLoop<D, Prod>;
  table.scale[static_cast<size_t>(D)] = &ScaleLoop<D>;
}

KernelTable MakePortable() {
  KernelTable table;
  FillDType<DType::kFloat32>(table);
  FillDType<DType::kFloat64>(table);
  FillDType<DType::kFloat16>(table);
  FillDType<DType::kBFloat16>(table);
  FillDType<DType::kInt32>(table);
  FillDType<DType::kInt64>(table);
  FillDType<DType::kInt8>(table);
  FillDType<DType::kUInt8>(table);
  return table;
}

}  // namespace

const KernelTable& PortableKernels() {
  static const KernelTable table = MakePortable();
  return table;
}

}  // namespace ringsync::cpu_kernels
