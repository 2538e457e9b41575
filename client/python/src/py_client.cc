#include "client/python/src/py_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/python/src/alltoall_splits.h"
#include "client/python/src/errors.h"
#include "client/python/src/tensor_arg.h"
#include "core/collective.h"

namespace py = pybind11;

namespace ringsync::python {
namespace {

// None means the worker's --collective_timeout.
absl::Duration TimeoutOf(std::optional<double> seconds) {
  return seconds ? absl::Seconds(*seconds) : absl::ZeroDuration();
}

// A caller's `out=` for `call`'s result: writable, of the input's dtype (ValueError
// otherwise, the call refused on every rank: RefusedOnError). Its size the SDK checks
// against the ring's, failing every rank too.
TensorArg OutArg(py::handle out, const TensorArg& input, absl::string_view call,
                 absl::string_view name) {
  TensorArg output = ToTensorArg(out, absl::StrCat(call, "'s out"), Access::kReadWrite);
  if (output.dtype != input.dtype) {
    throw py::value_error(absl::StrCat(call, " '", name, "': out holds ", DTypeName(output.dtype),
                                       ", the tensor ", DTypeName(input.dtype),
                                       "; pass an out of the tensor's dtype"));
  }
  return output;
}

// Converts a call's arguments with `convert`. One it cannot take (a ValueError or
// TypeError here) refuses the collective in its turn before the error reaches the caller,
// so that the other ranks fail now, naming this one, instead of waiting for it until their
// deadline. A closed client (null) has no turn to give.
template <typename Convert>
auto RefusedOnError(Client* client, CollectiveKind kind, const std::string& name,
                    Convert&& convert) -> decltype(convert()) {
  auto refuse = [&](const std::string& why) {
    if (client == nullptr) return;
    py::gil_scoped_release nogil;
    client->Refuse(kind, name, why);
  };
  try {
    return convert();
  } catch (py::error_already_set& e) {
    refuse(py::str(e.value()).cast<std::string>());
    throw;
  } catch (const py::builtin_exception& e) {
    refuse(e.what());
    throw;
  }
}

}  // namespace

std::unique_ptr<PyClient> PyClient::Connect(const std::string& worker, double timeout_seconds,
                                            const std::string& name, const std::string& tls_ca,
                                            const std::string& tls_cert, const std::string& tls_key,
                                            const std::string& token_file,
                                            int64_t fusion_threshold_bytes,
                                            double fusion_cycle_time_seconds, bool call_channel,
                                            int64_t staging_arena_bytes,
                                            bool stage_in_registered_memory) {
  if (staging_arena_bytes < -1) {
    throw py::value_error(absl::StrCat("staging_arena_bytes must be 0 (off), a size in bytes "
                                       "or None (the default), not ", staging_arena_bytes));
  }
  ClientOptions options;
  options.connect_timeout = absl::Seconds(timeout_seconds);
  options.client_name = name;
  options.tls_ca = tls_ca;
  options.tls_cert = tls_cert;
  options.tls_key = tls_key;
  options.token_file = token_file;
  // 0: fusion off (the default); else async all-reduces are fused up to this many bytes.
  options.fusion.enabled = fusion_threshold_bytes > 0;
  if (options.fusion.enabled) {
    options.fusion.threshold_bytes = static_cast<size_t>(fusion_threshold_bytes);
    options.fusion.cycle_time = absl::Seconds(fusion_cycle_time_seconds);
  }
  options.call_channel = call_channel;
  if (staging_arena_bytes >= 0) {
    options.staging_arena_bytes = static_cast<size_t>(staging_arena_bytes);
  }
  options.stage_in_registered_memory = stage_in_registered_memory;
  absl::StatusOr<std::unique_ptr<Client>> client;
  {
    py::gil_scoped_release nogil;
    client = Client::Connect(worker, options);
  }
  if (!client.ok()) ThrowStatus(client.status());
  return std::unique_ptr<PyClient>(new PyClient(*std::move(client)));
}

void PyClient::AwaitRing(double timeout_seconds) {
  std::shared_ptr<Client> client = Get();
  absl::Status ready;
  {
    py::gil_scoped_release nogil;
    ready = client->AwaitRing(absl::Seconds(timeout_seconds));
  }
  if (!ready.ok()) ThrowStatus(ready);
}

std::shared_ptr<Client> PyClient::Get() const {
  if (client_ == nullptr) {
    PyErr_SetString(PyExc_ValueError, "this ringsync.Client is closed; connect a new one");
    throw py::error_already_set();
  }
  return client_;
}

std::unique_ptr<PyHandle> PyClient::Start(absl::FunctionRef<CollectiveHandle(Client&)> start,
                                          py::object result, py::object keep_alive) {
  std::shared_ptr<Client> client = Get();
  CollectiveHandle handle;
  {
    py::gil_scoped_release nogil;
    handle = start(*client);
  }
  return std::make_unique<PyHandle>(std::move(handle), std::move(client), std::move(result),
                                    std::move(keep_alive));
}

std::unique_ptr<PyHandle> PyClient::AllReduceAsync(py::handle tensor, const std::string& name,
                                                   ReduceOp op, double prescale, double postscale,
                                                   std::optional<double> timeout) {
  TensorArg arg = RefusedOnError(client_.get(), CollectiveKind::kAllReduce, name, [&] {
    return ToTensorArg(tensor, "allreduce_", Access::kReadWrite);
  });
  AllReduceOptions options;
  options.pre_scale = prescale;
  options.post_scale = postscale;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) { return c.AllReduceAsync(name, arg.data, arg.count, arg.dtype, op, options); },
      arg.owner, py::none());
}

std::unique_ptr<PyHandle> PyClient::BroadcastAsync(py::handle tensor, int root,
                                                   const std::string& name,
                                                   std::optional<double> timeout) {
  TensorArg arg = RefusedOnError(client_.get(), CollectiveKind::kBroadcast, name, [&] {
    return ToTensorArg(tensor, "broadcast_", Access::kReadWrite);
  });
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) { return c.BroadcastAsync(name, arg.data, arg.count, arg.dtype, root, options); },
      arg.owner, py::none());
}

int PyClient::RingSizeFor(absl::string_view call, absl::string_view name) const {
  const int world_size = Get()->world_size();
  if (world_size <= 0) {
    ThrowStatus(absl::FailedPreconditionError(absl::StrCat(
        call, " '", name, "': the worker reports no formed ring, so the output's size is "
        "unknown; retry once the ring has re-formed")));
  }
  return world_size;
}

std::pair<TensorArg, TensorArg> PyClient::InputAndOutput(py::handle tensor, py::handle out,
                                                        absl::string_view call,
                                                        absl::string_view name,
                                                        bool gathers) const {
  TensorArg input = ToTensorArg(tensor, call, Access::kRead);
  TensorArg output = !out.is_none() ? OutArg(out, input, call, name)
                     : gathers      ? NewGatherOutput(input, RingSizeFor(call, name))
                                    : NewScatterOutput(input, RingSizeFor(call, name), call);
  return {std::move(input), std::move(output)};
}

std::unique_ptr<PyHandle> PyClient::AllGatherAsync(py::handle tensor, const std::string& name,
                                                   std::optional<double> timeout,
                                                   py::handle out) {
  auto [input, output] = RefusedOnError(client_.get(), CollectiveKind::kAllGather, name, [&] {
    return InputAndOutput(tensor, out, "allgather", name, /*gathers=*/true);
  });
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) {
        return c.AllGatherAsync(name, input.data, input.count, input.dtype, output.data,
                                output.count, options);
      },
      output.owner, input.owner);
}

std::unique_ptr<PyHandle> PyClient::ReduceScatterAsync(py::handle tensor, const std::string& name,
                                                       ReduceOp op, double prescale,
                                                       double postscale,
                                                       std::optional<double> timeout,
                                                       py::handle out) {
  auto [input, output] = RefusedOnError(client_.get(), CollectiveKind::kReduceScatter, name, [&] {
    return InputAndOutput(tensor, out, "reduce_scatter", name, /*gathers=*/false);
  });
  AllReduceOptions options;
  options.pre_scale = prescale;
  options.post_scale = postscale;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) {
        return c.ReduceScatterAsync(name, input.data, input.count, input.dtype, output.data,
                                    output.count, op, options);
      },
      output.owner, input.owner);
}

std::unique_ptr<PyHandle> PyClient::ScatterAsync(py::handle tensor, int root,
                                                 const std::string& name,
                                                 std::optional<double> timeout, py::handle out) {
  auto [input, output] = RefusedOnError(client_.get(), CollectiveKind::kScatter, name, [&] {
    if (tensor.is_none()) {
      // Not the root: no input to read; `out` says the block's size and dtype.
      if (out.is_none()) {
        throw py::value_error(absl::StrCat(
            "scatter '", name, "': pass the root's tensor, or on the other ranks an out= "
            "for this rank's block"));
      }
      TensorArg output = ToTensorArg(out, "scatter's out", Access::kReadWrite);
      TensorArg input;
      input.dtype = output.dtype;
      input.count = output.count * static_cast<size_t>(RingSizeFor("scatter", name));
      return std::pair(std::move(input), std::move(output));
    }
    return InputAndOutput(tensor, out, "scatter", name, /*gathers=*/false);
  });
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) {
        return c.ScatterAsync(name, input.data, input.count, input.dtype, output.data,
                              output.count, root, options);
      },
      output.owner, input.owner ? input.owner : py::none());
}

std::unique_ptr<PyHandle> PyClient::GatherAsync(py::handle tensor, int root,
                                                const std::string& name,
                                                std::optional<double> timeout, py::handle out) {
  auto [input, output] = RefusedOnError(client_.get(), CollectiveKind::kGather, name, [&] {
    if (Get()->rank() != root) {
      // Not the root: nothing comes back; the output's size only says the ring's shape.
      TensorArg input = ToTensorArg(tensor, "gather", Access::kRead);
      TensorArg output;
      output.dtype = input.dtype;
      output.count = input.count * static_cast<size_t>(RingSizeFor("gather", name));
      return std::pair(std::move(input), std::move(output));
    }
    return InputAndOutput(tensor, out, "gather", name, /*gathers=*/true);
  });
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) {
        return c.GatherAsync(name, input.data, input.count, input.dtype, output.data,
                             output.count, root, options);
      },
      output.owner ? output.owner : py::none(), input.owner);
}

std::unique_ptr<PyHandle> PyClient::AllToAllAsync(py::handle tensor, const std::string& name,
                                                  std::optional<double> timeout, py::handle out,
                                                  py::handle input_splits,
                                                  py::handle output_splits) {
  const bool uneven = !input_splits.is_none() || !output_splits.is_none();
  auto [input, output, splits] = RefusedOnError(client_.get(), CollectiveKind::kAllToAll, name, [&] {
    TensorArg input = ToTensorArg(tensor, "alltoall", Access::kRead);
    if (!uneven) {
      TensorArg output = out.is_none() ? NewGatherOutput(input, /*factor=*/1)
                                       : OutArg(out, input, "alltoall", name);
      return std::tuple(std::move(input), std::move(output), AllToAllSplits{});
    }
    std::optional<TensorArg> given;
    if (!out.is_none()) given = OutArg(out, input, "alltoall", name);
    AllToAllSplits splits = SplitsOf(input, given ? &*given : nullptr, input_splits, output_splits,
                                     RingSizeFor("alltoall", name), name);
    TensorArg output = given ? *std::move(given) : NewRowsLike(input, splits.output_rows, "alltoall");
    return std::tuple(std::move(input), std::move(output), std::move(splits));
  });
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start(
      [&](Client& c) {
        if (uneven) {
          return c.AllToAllVAsync(name, input.data, input.count, splits.send_counts, input.dtype,
                                  output.data, output.count, splits.receive_counts, options);
        }
        return c.AllToAllAsync(name, input.data, input.count, input.dtype, output.data,
                               output.count, options);
      },
      output.owner, input.owner);
}

std::unique_ptr<PyHandle> PyClient::BarrierAsync(const std::string& name,
                                                 std::optional<double> timeout) {
  CollectiveOptions options;
  options.timeout = TimeoutOf(timeout);
  return Start([&](Client& c) { return c.BarrierAsync(name, options); }, py::none(), py::none());
}

void PyClient::Refuse(const std::string& kind, const std::string& name, const std::string& why) {
  for (int k = 1; IsValid(static_cast<CollectiveKind>(k)); ++k) {
    if (kind != CollectiveKindName(static_cast<CollectiveKind>(k))) continue;
    std::shared_ptr<Client> client = Get();
    py::gil_scoped_release nogil;
    client->Refuse(static_cast<CollectiveKind>(k), name, why);
    return;
  }
  throw py::value_error(absl::StrCat("refuse: '", kind, "' is not a collective kind"));
}

size_t PyClient::ReleaseIdleMemory() {
  std::shared_ptr<Client> client = Get();
  py::gil_scoped_release nogil;
  return client->ReleaseIdleMemory();
}

py::object PyClient::AllocateBytes(int64_t size_bytes) {
  if (size_bytes <= 0) {
    ThrowStatus(absl::InvalidArgumentError(
        absl::StrCat("allocate: ", size_bytes, " bytes; a registered buffer holds at least one")));
  }
  std::shared_ptr<Client> client = Get();
  absl::StatusOr<RegisteredBuffer> buffer;
  {
    py::gil_scoped_release nogil;
    buffer = client->AllocateBytes(static_cast<size_t>(size_bytes));
  }
  if (!buffer.ok()) ThrowStatus(buffer.status());
  // The array owns the buffer through a capsule: Python frees it with the last view.
  auto owned = std::make_unique<RegisteredBuffer>(*std::move(buffer));
  void* data = owned->data();
  py::capsule owner(owned.get(), [](void* p) {
    std::unique_ptr<RegisteredBuffer> gone(static_cast<RegisteredBuffer*>(p));
    py::gil_scoped_release nogil;  // dropping it tells the worker (a short RPC)
    gone.reset();
  });
  owned.release();  // now the capsule's
  return py::array(py::dtype::of<uint8_t>(), {size_bytes}, {int64_t{1}}, data, owner);
}

void PyClient::Close() {
  std::shared_ptr<Client> client = std::move(client_);
  py::gil_scoped_release nogil;
  client.reset();  // waits for (or cancels) what is in flight, unless a handle still holds it
}

}  // namespace ringsync::python
