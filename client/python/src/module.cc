// ringsync._ringsync: the extension module under the `ringsync` Python package
// (ringsync/__init__.py re-exports it and documents the package).
#include <memory>
#include <optional>
#include <string>

#include "client/python/src/errors.h"
#include "client/python/src/py_client.h"
#include "client/python/src/py_handle.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"

namespace py = pybind11;
using ringsync::ReduceOp;
using ringsync::python::PyClient;
using ringsync::python::PyHandle;

PYBIND11_MODULE(_ringsync, m) {
  m.doc() = "ringsync's C++ SDK for Python; import ringsync instead";
  ringsync::python::DefineErrors(m);

  py::enum_<ReduceOp>(m, "ReduceOp", "How all-reduce combines the ranks' values.")
      .value("SUM", ReduceOp::kSum)
      .value("AVG", ReduceOp::kAvg, "the sum divided by the world size (integers: truncated)")
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("PROD", ReduceOp::kProd)
      .export_values();

  py::class_<PyHandle>(m, "Handle", "A collective in flight, from one of Client's *_async methods.")
      .def("wait", &PyHandle::Wait, py::arg("timeout") = std::nullopt,
           "Waits until the collective completes and returns its result (the tensor for "
           "in-place collectives, the new tensor for allgather, reduce_scatter and scatter, "
           "None for barrier). Raises "
           "ringsync.Error on failure, ringsync.TimeoutError when `timeout` (seconds) passes "
           "first (the collective goes on; wait again).")
      .def("done", &PyHandle::Done, "True once the collective has completed; never blocks.");

  py::class_<PyClient>(m, "Client", "A training process's connection to its ringsync worker.")
      .def_property_readonly("rank", &PyClient::rank, "this process's rank; -1 while no ring is formed")
      .def_property_readonly("world_size", &PyClient::world_size)
      .def_property_readonly("generation", &PyClient::generation,
                             "the ring view's number; it grows when the ring re-forms")
      .def_property_readonly("ready", &PyClient::ready)
      .def_property_readonly("closed", &PyClient::closed)
      .def("await_ring", &PyClient::AwaitRing, py::arg("timeout"),
           "Waits up to `timeout` seconds until the worker reports a formed ring.")
      .def("allreduce_async", &PyClient::AllReduceAsync, py::arg("tensor"),
           py::arg("name") = "allreduce", py::arg("op") = ReduceOp::kSum,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("timeout") = std::nullopt)
      .def("broadcast_async", &PyClient::BroadcastAsync, py::arg("tensor"), py::arg("root"),
           py::arg("name") = "broadcast", py::arg("timeout") = std::nullopt)
      .def("allgather_async", &PyClient::AllGatherAsync, py::arg("tensor"),
           py::arg("name") = "allgather", py::arg("timeout") = std::nullopt,
           py::arg("out") = py::none())
      .def("reduce_scatter_async", &PyClient::ReduceScatterAsync, py::arg("tensor"),
           py::arg("name") = "reduce_scatter", py::arg("op") = ReduceOp::kSum,
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("timeout") = std::nullopt,
           py::arg("out") = py::none())
      .def("scatter_async", &PyClient::ScatterAsync, py::arg("tensor"), py::arg("root"),
           py::arg("name") = "scatter", py::arg("timeout") = std::nullopt,
           py::arg("out") = py::none())
      .def("gather_async", &PyClient::GatherAsync, py::arg("tensor"), py::arg("root"),
           py::arg("name") = "gather", py::arg("timeout") = std::nullopt,
           py::arg("out") = py::none())
      .def("alltoall_async", &PyClient::AllToAllAsync, py::arg("tensor"),
           py::arg("name") = "alltoall", py::arg("timeout") = std::nullopt,
           py::arg("out") = py::none(), py::arg("input_splits") = py::none(),
           py::arg("output_splits") = py::none())
      .def("barrier_async", &PyClient::BarrierAsync, py::arg("name") = "barrier",
           py::arg("timeout") = std::nullopt)
      .def("refuse", &PyClient::Refuse, py::arg("kind"), py::arg("name"), py::arg("why"),
           "Takes the collective's turn as a refusal, so the other ranks' fails at once.")
      .def("allocate_bytes", &PyClient::AllocateBytes, py::arg("size_bytes"),
           "A zeroed uint8 numpy array in memory registered with the worker.")
      .def("release_idle_memory", &PyClient::ReleaseIdleMemory,
           "Drops the staging memory no collective is using now; returns its bytes.")
      .def("close", &PyClient::Close);

  m.def("_connect", &PyClient::Connect, py::arg("worker"), py::arg("timeout"), py::arg("name"),
        py::arg("tls_ca") = "", py::arg("tls_cert") = "", py::arg("tls_key") = "",
        py::arg("token_file") = "", py::arg("fusion_threshold_bytes") = 0,
        py::arg("fusion_cycle_time") = 0.005, py::arg("call_channel") = true,
        py::arg("staging_arena_bytes") = -1, py::arg("stage_in_registered_memory") = true);
}
