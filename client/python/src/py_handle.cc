#include "client/python/src/py_handle.h"

#include <utility>

#include "absl/time/time.h"
#include "client/python/src/errors.h"

namespace py = pybind11;

namespace ringsync::python {

PyHandle::PyHandle(CollectiveHandle handle, std::shared_ptr<Client> client, py::object result,
                   py::object keep_alive)
    : handle_(std::move(handle)),
      client_(std::move(client)),
      result_(std::move(result)),
      keep_alive_(std::move(keep_alive)) {}

PyHandle::~PyHandle() {
  // Both may block: the handle until its collective completes, the Client (if this was
  // its last user) until its other collectives are cancelled. Neither needs Python, and
  // holding the GIL meanwhile would stall every other thread. The arrays are released
  // after, with the GIL.
  py::gil_scoped_release nogil;
  CollectiveHandle finishing = std::move(handle_);
  std::shared_ptr<Client> client = std::move(client_);
}

py::object PyHandle::Wait(std::optional<double> timeout_seconds) {
  absl::Status status;
  {
    py::gil_scoped_release nogil;
    status = timeout_seconds ? handle_.Wait(absl::Seconds(*timeout_seconds)) : handle_.Wait();
  }
  if (!status.ok()) ThrowStatus(status);
  return result_;
}

}  // namespace ringsync::python
