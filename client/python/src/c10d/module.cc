// ringsync._c10d: creates RingsyncProcessGroup for torch.distributed (ringsync/torch/
// backend.py registers the creator as the backend "ringsync").
#include <optional>
#include <stdexcept>
#include <string>

#include <torch/csrc/utils/pybind.h>

#include "client/python/src/c10d/process_group.h"
#include "pybind11/stl.h"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "ringsync's torch.distributed backend; import ringsync.torch instead";
  // Registers c10d::ProcessGroup's Python type, as which the group below is returned.
  py::module_::import("torch.distributed");
  m.def(
      "create_process_group",
      [](const std::string& worker, int rank, int world_size, double connect_timeout_seconds,
         std::optional<double> collective_timeout_seconds)
          -> c10::intrusive_ptr<c10d::ProcessGroup> {
        ringsync::python::RingsyncProcessGroup::Options options;
        options.worker = worker;
        options.connect_timeout = absl::Seconds(connect_timeout_seconds);
        if (collective_timeout_seconds) {
          options.collective_timeout = absl::Seconds(*collective_timeout_seconds);
        }
        auto group = ringsync::python::RingsyncProcessGroup::Create(rank, world_size, options);
        if (!group.ok()) {
          throw std::runtime_error("ringsync backend: " + std::string(group.status().message()));
        }
        return *group;
      },
      py::arg("worker"), py::arg("rank"), py::arg("world_size"), py::arg("connect_timeout"),
      py::arg("collective_timeout"), py::call_guard<py::gil_scoped_release>());
}
