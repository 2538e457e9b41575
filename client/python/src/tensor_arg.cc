#include "client/python/src/tensor_arg.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pybind11/numpy.h"

namespace py = pybind11;

namespace ringsync::python {
namespace {

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

constexpr absl::string_view kSupported =
    "float32, float64, float16, bfloat16 (torch), int32, int64, int8, uint8";

std::optional<DType> NumpyDType(const py::dtype& dt) {
  if (!dt.attr("isnative").cast<bool>()) return std::nullopt;  // byte-swapped: the reducers assume native order
  switch (dt.kind()) {
    case 'f':
      if (dt.itemsize() == 2) return DType::kFloat16;
      if (dt.itemsize() == 4) return DType::kFloat32;
      if (dt.itemsize() == 8) return DType::kFloat64;
      break;
    case 'i':
      if (dt.itemsize() == 1) return DType::kInt8;
      if (dt.itemsize() == 4) return DType::kInt32;
      if (dt.itemsize() == 8) return DType::kInt64;
      break;
    case 'u':
      if (dt.itemsize() == 1) return DType::kUInt8;
      break;
  }
  return std::nullopt;
}

TensorArg FromNumpy(py::array array, absl::string_view call, Access access) {
  const std::optional<DType> dtype = NumpyDType(array.dtype());
  if (!dtype) {
    Raise(PyExc_TypeError,
          absl::StrCat(call, ": numpy dtype ", std::string(py::str(array.dtype())),
                       " is not one ringsync reduces (", kSupported,
                       ", native byte order); convert with .astype(...)"));
  }
  if (!(array.flags() & py::array::c_style)) {
    Raise(PyExc_ValueError,
          absl::StrCat(call, ": the array is not C-contiguous (a slice or transpose?); pass "
                       "numpy.ascontiguousarray(a) and use the result"));
  }
  if (access == Access::kReadWrite && !array.writeable()) {
    Raise(PyExc_ValueError,
          absl::StrCat(call, ": the array is read-only and the collective writes its result "
                       "into it; pass a writable copy (a.copy())"));
  }
  TensorArg arg;
  arg.data = const_cast<void*>(array.data());  // writability was checked above when it matters
  arg.count = static_cast<size_t>(array.size());
  arg.dtype = *dtype;
  arg.shape.assign(array.shape(), array.shape() + array.ndim());
  arg.owner = std::move(array);
  return arg;
}

// torch's Python objects, looked up once torch is imported (this module never imports it:
// the SDK works without torch installed). The references are kept for the interpreter's
// lifetime on purpose: releasing them from a static destructor would run after the
// interpreter is gone.
struct TorchTypes {
  py::handle tensor_type;
  py::handle is_grad_enabled;
  std::vector<std::pair<py::handle, DType>> dtypes;
};

const TorchTypes* Torch() {
  static std::optional<TorchTypes> types;
  if (types) return &*types;
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return nullptr;  // no torch object can exist yet
  py::module_ torch = py::module_::import("torch");
  TorchTypes found;
  found.tensor_type = py::object(torch.attr("Tensor")).release();
  found.is_grad_enabled = py::object(torch.attr("is_grad_enabled")).release();
  const std::pair<const char*, DType> names[] = {
      {"float32", DType::kFloat32}, {"float64", DType::kFloat64},
      {"float16", DType::kFloat16}, {"bfloat16", DType::kBFloat16},
      {"int32", DType::kInt32},     {"int64", DType::kInt64},
      {"int8", DType::kInt8},       {"uint8", DType::kUInt8}};
  for (const auto& [name, dtype] : names) found.dtypes.emplace_back(py::object(torch.attr(name)).release(), dtype);
  types = std::move(found);
  return &*types;
}

TensorArg FromTorch(const TorchTypes& torch, py::object tensor, absl::string_view call) {
  const std::string device = py::str(tensor.attr("device"));
  if (device != "cpu") {
    Raise(PyExc_ValueError,
          absl::StrCat(call, ": the tensor is on ", device,
                       "; ringsync reduces host memory: pass a CPU tensor (t.cpu()) and copy "
                       "the result back, or use NCCL for GPU tensors"));
  }
  py::object dtype_object = tensor.attr("dtype");
  std::optional<DType> dtype;
  for (const auto& [object, value] : torch.dtypes) {
    if (object.is(dtype_object)) dtype = value;
  }
  if (!dtype) {
    Raise(PyExc_TypeError,
          absl::StrCat(call, ": torch dtype ", std::string(py::str(dtype_object)),
                       " is not one ringsync reduces (", kSupported, "); convert with .to(...)"));
  }
  if (!tensor.attr("is_contiguous")().cast<bool>()) {
    Raise(PyExc_ValueError,
          absl::StrCat(call, ": the tensor is not contiguous (a slice or transpose?); pass "
                       "t.contiguous() and use the result"));
  }
  // Writing through the pointer bypasses autograd, which would then compute gradients
  // from values it never saw change.
  if (tensor.attr("requires_grad").cast<bool>() && torch.is_grad_enabled().cast<bool>()) {
    Raise(PyExc_ValueError,
          absl::StrCat(call, ": the tensor requires grad and autograd cannot follow a "
                       "collective; call it under torch.no_grad() or pass t.detach() "
                       "(which shares its memory)"));
  }
  TensorArg arg;
  arg.is_torch = true;
  arg.data = reinterpret_cast<void*>(tensor.attr("data_ptr")().cast<uintptr_t>());
  arg.count = tensor.attr("numel")().cast<size_t>();
  arg.dtype = *dtype;
  for (py::handle d : tensor.attr("shape")) arg.shape.push_back(d.cast<py::ssize_t>());
  arg.owner = std::move(tensor);
  return arg;
}

}  // namespace

TensorArg ToTensorArg(py::handle object, absl::string_view call, Access access) {
  if (py::isinstance<py::array>(object)) {
    return FromNumpy(py::reinterpret_borrow<py::array>(object), call, access);
  }
  if (const TorchTypes* torch = Torch();
      torch != nullptr && PyObject_IsInstance(object.ptr(), torch->tensor_type.ptr()) == 1) {
    return FromTorch(*torch, py::reinterpret_borrow<py::object>(object), call);
  }
  Raise(PyExc_TypeError,
        absl::StrCat(call, ": expected a numpy.ndarray or a torch.Tensor, got ",
                     std::string(py::str(py::type::of(object).attr("__name__")))));
}

namespace {

// A new, uninitialized array of like's kind and dtype, of `shape`.
TensorArg NewLike(const TensorArg& like, const std::vector<py::ssize_t>& shape,
                  absl::string_view call) {
  py::tuple shape_tuple(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) shape_tuple[i] = py::int_(shape[i]);
  py::object output = like.is_torch ? like.owner.attr("new_empty")(shape_tuple)
                                    : py::array(py::reinterpret_borrow<py::array>(like.owner).dtype(),
                                                shape);
  return ToTensorArg(output, call, Access::kReadWrite);
}

}  // namespace

TensorArg NewGatherOutput(const TensorArg& like, int factor) {
  std::vector<py::ssize_t> shape = like.shape;
  if (shape.empty()) {
    shape.push_back(factor);
  } else {
    shape[0] *= factor;
  }
  return NewLike(like, shape, "allgather");
}

TensorArg NewScatterOutput(const TensorArg& like, int divisor, absl::string_view call) {
  std::vector<py::ssize_t> shape = like.shape;
  if (shape.empty()) {
    shape.push_back(0);
  } else {
    shape[0] /= divisor;
  }
  return NewLike(like, shape, call);
}

TensorArg NewRowsLike(const TensorArg& like, py::ssize_t rows, absl::string_view call) {
  std::vector<py::ssize_t> shape = like.shape;
  shape[0] = rows;
  return NewLike(like, shape, call);
}

}  // namespace ringsync::python
