// PyHandle: ringsync.Handle, a collective started by one of Client's *_async methods.
//
//   h = client.allreduce_async(grad, "grad/fc1")
//   ...                      # leave `grad` alone until the collective completes
//   h.wait()                 # returns grad, reduced; raises ringsync.Error on failure
//
// It keeps the array(s) and the connection alive until the collective completes, so a
// dropped handle never leaves the SDK writing into freed memory: dropping one whose
// collective is still running waits for it (with the GIL released).
//
// Thread-safety: wait() and done() may be called from several Python threads.
#pragma once

#include <memory>
#include <optional>

#include "pybind11/pybind11.h"
#include "ringsync/client.h"

namespace ringsync::python {

class PyHandle {
 public:
  // `result` is what wait() returns; `keep_alive` anything else the SDK still reads.
  PyHandle(CollectiveHandle handle, std::shared_ptr<Client> client, pybind11::object result,
           pybind11::object keep_alive);
  ~PyHandle();
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;

  // Blocks (GIL released) until the collective completes, or `timeout_seconds` passes:
  // then raises ringsync.TimeoutError and the collective goes on (call wait() again).
  pybind11::object Wait(std::optional<double> timeout_seconds);
  bool Done() const { return handle_.Ready(); }

 private:
  CollectiveHandle handle_;
  std::shared_ptr<Client> client_;
  pybind11::object result_;
  pybind11::object keep_alive_;
};

}  // namespace ringsync::python
