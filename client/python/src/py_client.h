// PyClient: ringsync.Client, the Python face of ringsync::Client.
//
// Every collective takes numpy arrays or CPU torch tensors in place (tensor_arg.h says
// which) and hands their memory to the SDK without a copy into Python objects. The blocking
// forms are the *_async forms followed by wait(), so both share one path. The GIL is
// released whenever the SDK may block: while it starts a collective (it copies large
// inputs into shared memory then) and while waiting for one.
//
// Thread-safety: methods may be called from several Python threads; as with the C++
// Client, collectives run in the order calls reach the SDK, which every rank must match.
// close() waits for the collectives in flight (or cancels them, see client.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "client/python/src/py_handle.h"
#include "client/python/src/tensor_arg.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "ringsync/client.h"

namespace ringsync::python {

class PyClient {
 public:
  // Raises WorkerUnavailable / TimeoutError / ringsync.Error as the connection fails.
  // `tls_*`, `token_file`: ClientOptions' authentication for a TCP worker ("" = none).
  // `call_channel`, `staging_arena_bytes` (-1: the SDK's default), `stage_in_registered_
  // memory`: the ClientOptions of the same names (how tensors reach the worker); raises
  // ValueError for a negative arena size other than -1.
  static std::unique_ptr<PyClient> Connect(const std::string& worker, double timeout_seconds,
                                           const std::string& name,
                                           const std::string& tls_ca, const std::string& tls_cert,
                                           const std::string& tls_key, const std::string& token_file,
                                           int64_t fusion_threshold_bytes = 0,
                                           double fusion_cycle_time_seconds = 0.005,
                                           bool call_channel = true,
                                           int64_t staging_arena_bytes = -1,
                                           bool stage_in_registered_memory = true);

  int rank() const { return Get()->rank(); }
  int world_size() const { return Get()->world_size(); }
  uint64_t generation() const { return Get()->generation(); }
  bool ready() const { return Get()->ready(); }
  bool closed() const { return client_ == nullptr; }
  // Client::AwaitRing with the GIL released; raises as a collective's failure would.
  void AwaitRing(double timeout_seconds);

  std::unique_ptr<PyHandle> AllReduceAsync(pybind11::handle tensor, const std::string& name,
                                           ReduceOp op, double prescale, double postscale,
                                           std::optional<double> timeout);
  std::unique_ptr<PyHandle> BroadcastAsync(pybind11::handle tensor, int root,
                                           const std::string& name, std::optional<double> timeout);
  // `out`: None for a new array, else the array the result is written into (of the
  // tensor's dtype; world_size times its elements, which the SDK checks on every rank).
  std::unique_ptr<PyHandle> AllGatherAsync(pybind11::handle tensor, const std::string& name,
                                           std::optional<double> timeout, pybind11::handle out);
  // `out` as AllGatherAsync's (1 / world_size of the tensor's elements).
  std::unique_ptr<PyHandle> ReduceScatterAsync(pybind11::handle tensor, const std::string& name,
                                               ReduceOp op, double prescale, double postscale,
                                               std::optional<double> timeout,
                                               pybind11::handle out);
  // `tensor`: the root's N blocks along its first dimension; on the other ranks None (then
  // `out` gives the block) or an array of the root's shape, whose values are unused.
  std::unique_ptr<PyHandle> ScatterAsync(pybind11::handle tensor, int root, const std::string& name,
                                         std::optional<double> timeout, pybind11::handle out);
  // `tensor`: this rank's block. The root's handle gives the N blocks along the first
  // dimension (a new array, or `out` as AllGatherAsync's); the other ranks' gives None.
  std::unique_ptr<PyHandle> GatherAsync(pybind11::handle tensor, int root, const std::string& name,
                                        std::optional<double> timeout, pybind11::handle out);
  // `tensor`: this rank's N blocks along the first dimension. The handle gives an array of
  // its shape (a new one, or `out`, which may be `tensor` itself) holding rank q's block
  // for this rank as block q. With `input_splits` or `output_splits` (rows for and from
  // each rank, alltoall_splits.h) the blocks are of those sizes, and the result a new
  // array (or `out`, not `tensor`) of the output's rows.
  std::unique_ptr<PyHandle> AllToAllAsync(pybind11::handle tensor, const std::string& name,
                                          std::optional<double> timeout, pybind11::handle out,
                                          pybind11::handle input_splits,
                                          pybind11::handle output_splits);
  std::unique_ptr<PyHandle> BarrierAsync(const std::string& name, std::optional<double> timeout);
  // Client::Refuse for the collective of `kind` (its CollectiveKindName: "allreduce", ...),
  // for arguments the Python layer rejects before the bindings see them (client.py).
  // ValueError for a kind that is none.
  void Refuse(const std::string& kind, const std::string& name, const std::string& why);

  // Client::AllocateBytes as a zeroed 1-D uint8 numpy array over the registered memory,
  // which lives as long as the array (and every view of it) does. Raises as Allocate
  // fails (e.g. a TCP worker: FAILED_PRECONDITION as ringsync.Error).
  pybind11::object AllocateBytes(int64_t size_bytes);
  // Client::ReleaseIdleMemory (without the GIL: dropping a buffer tells the worker).
  size_t ReleaseIdleMemory();

  // Detaches from the worker; later calls raise ValueError. Idempotent.
  void Close();

 private:
  explicit PyClient(std::unique_ptr<Client> client) : client_(std::move(client)) {}
  // Raises ValueError once closed.
  std::shared_ptr<Client> Get() const;
  // The ring's size, which sizes `call`'s output; raises ringsync.Error (FAILED_PRECONDITION)
  // while no ring is formed.
  int RingSizeFor(absl::string_view call, absl::string_view name) const;
  // `tensor` read as `call`'s input, and the array its result goes into: `out` (of the
  // input's dtype), else a new one of world_size times (`gathers`) or 1 / world_size of
  // the input's first dimension.
  std::pair<TensorArg, TensorArg> InputAndOutput(pybind11::handle tensor, pybind11::handle out,
                                                 absl::string_view call, absl::string_view name,
                                                 bool gathers) const;
  // Starts a collective with the GIL released; the handle returns `result` from wait().
  std::unique_ptr<PyHandle> Start(absl::FunctionRef<CollectiveHandle(Client&)> start,
                                  pybind11::object result, pybind11::object keep_alive);

  std::shared_ptr<Client> client_;
};

}  // namespace ringsync::python
