#include "client/python/src/errors.h"

#include <initializer_list>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ringsync/outcome.h"
#include "ringsync/registered_buffer.h"

namespace py = pybind11;

namespace ringsync::python {
namespace {

bool ContainsAny(absl::string_view text, std::initializer_list<absl::string_view> needles) {
  for (absl::string_view needle : needles) {
    if (absl::StrContains(text, needle)) return true;
  }
  return false;
}

// The classes, created once by DefineErrors; they live as long as the interpreter (the
// module holds them too), so they are deliberately never released.
struct ErrorClasses {
  py::handle base, mismatch, membership, peer_lost, timeout, unavailable, invalid, in_doubt;

  py::handle For(ErrorKind kind) const {
    switch (kind) {
      case ErrorKind::kMismatch: return mismatch;
      case ErrorKind::kMembershipChanged: return membership;
      case ErrorKind::kPeerLost: return peer_lost;
      case ErrorKind::kTimeout: return timeout;
      case ErrorKind::kWorkerUnavailable: return unavailable;
      case ErrorKind::kInvalidArgument: return invalid;
      case ErrorKind::kInDoubt: return in_doubt;
      case ErrorKind::kOther: return base;
    }
    return base;
  }
};
ErrorClasses classes;

py::handle NewClass(py::module_& module, const char* name, const char* doc,
                    std::initializer_list<py::handle> bases) {
  py::tuple base_tuple(bases.size());
  size_t i = 0;
  for (py::handle b : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = absl::StrCat("ringsync.", name);
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  module.attr(name) = py::reinterpret_borrow<py::object>(cls);
  return cls;  // the new reference is the one `classes` keeps
}

}  // namespace

ErrorKind ClassifyError(const absl::Status& status) {
  if (IsMembershipChanged(status)) return ErrorKind::kMembershipChanged;
  // The mark first: whatever the cause, the loop must resynchronise rather than retry.
  if (IsInDoubt(status)) return ErrorKind::kInDoubt;
  const absl::string_view m = status.message();
  if (ContainsAny(m, {"ranks called different collectives", "every rank must pass the same"})) {
    return ErrorKind::kMismatch;
  }
  if (ContainsAny(m, {"replaced it", "the ring changed under it", "generation ended"})) {
    return ErrorKind::kMembershipChanged;
  }
  // Another rank's worker or training process: the ring cannot complete without it.
  if (ContainsAny(m, {"the ring stream to ", "the ring stream from ", "ring dissolved",
                      "missed heartbeats", "closed its WatchRing stream",
                      "has no training process attached", "disconnected during the collective"})) {
    return ErrorKind::kPeerLost;
  }
  if (status.code() == absl::StatusCode::kDeadlineExceeded || absl::StrContains(m, "timed out")) {
    return ErrorKind::kTimeout;
  }
  // This process's own worker: unreachable, shutting down, or no longer attached to us.
  if (status.code() == absl::StatusCode::kUnavailable ||
      ContainsAny(m, {"no longer attached to the ringsync worker", "refused this client"})) {
    return ErrorKind::kWorkerUnavailable;
  }
  if (status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kOutOfRange) {
    return ErrorKind::kInvalidArgument;
  }
  return ErrorKind::kOther;
}

void DefineErrors(py::module_& module) {
  classes.base = NewClass(module, "Error",
                          "A collective or connection failed; the message names the rank, "
                          "worker, generation and collective. .code is the status code's name.",
                          {PyExc_RuntimeError});
  classes.mismatch = NewClass(module, "MismatchError",
                              "Ranks issued different collectives, or the same one with a "
                              "different count, dtype, op or root.",
                              {classes.base});
  classes.membership = NewClass(module, "MembershipChangedError",
                                "The ring's membership changed under the collective (a worker "
                                "was evicted or admitted, or the ring re-formed): it did not "
                                "run and the tensor is unchanged; rank and world_size may have "
                                "changed. Resynchronise the state (ringsync.ElasticState.sync) "
                                "and continue.",
                                {classes.base});
  module.attr("MembershipChanged") = module.attr("MembershipChangedError");  // its first name
  classes.peer_lost = NewClass(module, "PeerLostError",
                               "Another rank's worker or training process went away.",
                               {classes.base});
  classes.timeout = NewClass(module, "TimeoutError",
                             "A deadline passed (the collective's, or wait(timeout)'s: then the "
                             "collective is still in flight and wait() may be called again).",
                             {classes.base, PyExc_TimeoutError});
  classes.unavailable = NewClass(module, "WorkerUnavailable",
                                 "This process's ringsync worker cannot be reached or no longer "
                                 "serves it.",
                                 {classes.base, PyExc_ConnectionError});
  classes.in_doubt = NewClass(module, "InDoubtError",
                              "The ring broke while the ranks were deciding the outcome, after "
                              "the data had moved (or this process lost its worker mid-call): "
                              "this rank failed and its array is unchanged, but another rank "
                              "may have completed the collective. Resynchronise the training "
                              "state rather than retrying the step.",
                              {classes.base});
  classes.invalid = NewClass(module, "InvalidArgument",
                             "The SDK or the worker refused an argument of the call.",
                             {classes.base, PyExc_ValueError});
}

void ThrowStatus(const absl::Status& status) {
  py::handle cls = classes.For(ClassifyError(status));
  // Decoded leniently: a message is text, but one quoting bytes a caller passed must not
  // turn into a UnicodeDecodeError in place of the error it describes.
  const absl::string_view message = status.message();
  py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
      message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace"));
  if (!text) throw py::error_already_set();
  py::object error = py::reinterpret_borrow<py::object>(cls)(text);
  error.attr("code") = absl::StatusCodeToString(status.code());
  // For a collective on an allocate()d array: whether the failure left it as it was (its
  // contents are otherwise unspecified); a plain array is always left as it was.
  error.attr("buffer_untouched") = RegisteredBufferUntouched(status);
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

}  // namespace ringsync::python
