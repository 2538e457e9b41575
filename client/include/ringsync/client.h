// ringsync::Client: the training process's connection to its local `ringsyncd worker`.
//
//   absl::StatusOr<std::unique_ptr<ringsync::Client>> client =
//       ringsync::Client::Connect("unix:/run/ringsync/worker.sock");
//   if (!client.ok()) { ... client.status() says what is missing ... }
//   std::vector<float> grad = ...;
//   absl::Status s = (*client)->AllReduce("grad/fc1", absl::MakeSpan(grad),
//                                         ringsync::ReduceOp::kAvg);
//
// Every rank must issue the same collectives (same name, dtype, count, op, root) in the
// same order; the worker checks this and fails a mismatch on every rank. A collective
// that fails leaves the caller's buffer exactly as it was: the SDK copies the input out,
// and copies the result back only when the whole ring completed. Except in a registered
// buffer (Allocate, registered_buffer.h), which the worker reduces in place: no copies,
// and after a failure its contents are unspecified unless the status says untouched.
//
// Transport: tensors of at least ClientOptions::shared_memory_threshold_bytes travel
// through shared memory (when the worker is on a unix socket): staged in memory registered
// with the worker, which runs the collective in place there (an all-gather's staged range
// is its whole result, the input copied into the first slot; a reduce-scatter's or a
// scatter's is its input; a broadcast's or a scatter's other ranks copy nothing in), or,
// where the worker cannot take
// that memory, in a file under /dev/shm. Smaller ones are staged in the arena below, and
// everything over TCP travels inline in the request. A Client keeps its shared memory for the next collectives of a similar size (at
// most 32 idle regions and 1 GiB of each kind: a step's gradient buckets in flight), so a
// training loop pays for creating it once; it is released when the Client is destroyed,
// or by the worker if the process dies. Idle registered regions give way when the worker
// would refuse a registration for them (--max_registered_buffers).
//
// Thread-safety: every method may be called from any thread, concurrently. The ring
// runs collectives in the order their calls are made on this Client (an *Async call
// returns once its collective is queued, so several may be in flight); calls racing on
// several threads are queued in whichever order they arrive, so a program that issues
// collectives from several threads must order them identically on every rank.
// A Client must not be destroyed while another thread is inside one of its methods.
//
// Errors: absl::Status with the gRPC code the worker chose and its message (which names
// rank, worker, generation and collective), plus a hint where one helps. Bad arguments
// fail with InvalidArgument before any data moves; the call still takes its turn on the
// ring as a refusal, failing it on every rank at once (no rank waits for it; see Refuse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ringsync/collective_handle.h"
#include "ringsync/collective_kind.h"
#include "ringsync/group_tensor.h"
#include "ringsync/registered_buffer.h"
#include "ringsync/types.h"

namespace ringsync {

namespace internal {
class ClientCore;
}  // namespace internal

// Async tensor fusion, as Horovod's: with `enabled`, consecutive AllReduceAsync calls of
// one dtype, op, scales and timeout are queued and sent as ONE fused all-reduce, each
// handle completing with its own tensor's result (or the batch's error, naming its
// tensor). A batch ends where the program ends it, at the same call on every rank: when
// the queued bytes would pass threshold_bytes (a tensor that large goes alone), at any
// call that cannot join (another dtype/op, any other collective), or when the program
// asks for a queued result (Ready(), Wait(), or dropping the handle). cycle_time is the
// one clock-driven trigger: what has waited that long goes out early, speculatively; if
// another rank's clock cut the queue elsewhere, the worker's agreement pass fails that
// collective on every rank before any data moved, and every rank sends those tensors
// again where the program ends the batch. With fusion on, collectives go to the worker
// one at a time, in call order.
struct FusionOptions {
  bool enabled = false;
  size_t threshold_bytes = size_t{64} << 20;
  absl::Duration cycle_time = absl::Milliseconds(5);
};

struct ClientOptions {
  // How long Connect waits for the worker to answer and report a formed ring.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Tensors of at least this many bytes go through shared memory on a unix socket.
  // SIZE_MAX: always inline.
  size_t shared_memory_threshold_bytes = size_t{1} << 20;
  // Where the shared-memory files go: the directory the worker accepts (its --shm_dir).
  std::string shared_memory_dir = "/dev/shm";
  // A collective that goes through shared memory is staged in memory
  // registered with the worker (as Allocate's), which the worker reduces in place: two
  // copies fewer than a file, same semantics for the caller's span. Falls back to a
  // file by itself where the worker cannot register this process's memory (e.g. another
  // pid namespace). False: always a file.
  bool stage_in_registered_memory = true;
  // On a unix socket, a collective with data below shared_memory_threshold_bytes is
  // staged in one registered buffer of this size, shared by such collectives in turn
  // (the worker reduces it in place: one copy in and one out, no memory allocated per
  // call) rather than carried inline; when the buffer is full, or the worker refuses it,
  // inline as before. Counts as one of the worker's --max_registered_buffers. 0: inline.
  size_t staging_arena_bytes = size_t{16} << 20;
  // On a unix socket, collectives travel to the worker and back as records in shared
  // memory registered with it (a call channel: one futex wake-up each way) rather than as
  // one gRPC call each; a call that does not fit (over ~1 MiB of inline data or spec), or
  // a worker that does not offer it, takes its RPC as before. False: always RPCs.
  bool call_channel = true;
  // How long the SDK's channel reader keeps looking for an answer (yielding the CPU
  // between looks) before it sleeps on a futex: an answer that comes within it costs no
  // sleep and wake-up, which on a loaded machine is most of a small collective's time.
  // Zero: sleep at once.
  absl::Duration call_channel_spin = absl::Microseconds(300);
  // Shown in the worker's logs; empty means "pid <pid>". At most kMaxClientNameBytes of
  // UTF-8 text (Connect refuses other names).
  static constexpr size_t kMaxClientNameBytes = 256;
  std::string client_name;
  // Authentication on a "host:port" target (the worker's --client_listen), as the worker
  // requires (see the README's "Security"); ignored on a unix socket. PEM files for
  // mutual TLS: the cluster's CA, this client's certificate from it and its key (all three
  // or none). A file holding the cluster token (the worker's --token_file).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string token_file;
  // Async all-reduces packed into one collective (off by default): see FusionOptions.
  FusionOptions fusion;
};

struct CollectiveOptions {
  // How long the ring may take for this collective; zero means the worker's default.
  // Enforced by the worker, which fails the collective on every rank when it expires.
  // At most 24 hours.
  absl::Duration timeout = absl::ZeroDuration();
};

struct AllReduceOptions {
  // Each rank's input is multiplied by pre_scale before combining, and the result by
  // post_scale (e.g. to keep float16 sums in range). Finite and non-zero; floating
  // dtypes only (integer all-reduces must leave both at 1).
  double pre_scale = 1.0;
  double post_scale = 1.0;
  // As CollectiveOptions::timeout.
  absl::Duration timeout = absl::ZeroDuration();
};

class Client {
 public:
  // Connects to the worker at `target` ("unix:/path", "/path" for a unix socket, or
  // "host:port") and attaches to it for the Client's lifetime. Returns once the worker
  // reports a formed ring, so rank(), world_size() and generation() are meaningful.
  // Fails with UNAVAILABLE when the worker cannot be reached, DEADLINE_EXCEEDED when no
  // ring formed within options.connect_timeout, FAILED_PRECONDITION when another process
  // is attached to that worker.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(absl::string_view target,
                                                         const ClientOptions& options = {});

  // Detaches from the worker. Collectives still in flight are cancelled (their handles
  // report CANCELLED and their buffers are untouched); this waits for them to finish.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The worker's latest ring view (kept current by a background reader of the worker's
  // event stream; after a detach, the last one seen). rank() is -1 while no ring is
  // formed. They may change between two calls when the ring re-forms — with another
  // world size when a worker was evicted or admitted (elastic membership: a collective
  // that the change interrupted fails with ringsync::IsMembershipChanged, outcome.h).
  int rank() const;
  int world_size() const;
  uint64_t generation() const;
  // True while this client is attached and the worker reports a formed ring.
  bool ready() const;
  // Waits up to `timeout` until the worker reports a formed ring (after a membership
  // change the ring re-forms; ElasticState::Sync waits so). DEADLINE_EXCEEDED saying what
  // the worker last reported when none formed; FAILED_PRECONDITION once this Client is
  // detached (its worker went away: connect a new Client).
  absl::Status AwaitRing(absl::Duration timeout);

  // Zero-copy: memory of `count` elements of T (zeroed) that this client's worker maps
  // too. AllReduce and Broadcast on a span inside it are reduced in place, with no copy
  // in or out; after a failed one its contents are unspecified unless the status says
  // otherwise. Read ringsync/registered_buffer.h before using it. FailedPrecondition over
  // TCP or when the worker cannot see this process; ResourceExhausted past the worker's
  // bounds (--max_registered_buffers, --max_registered_buffer_bytes).
  template <Element T>
  absl::StatusOr<RegisteredBuffer> Allocate(size_t count) {
    if (count > SIZE_MAX / sizeof(T)) {
      return absl::InvalidArgumentError("Allocate: the element count overflows size_t bytes");
    }
    return AllocateBytes(count * sizeof(T));
  }
  absl::StatusOr<RegisteredBuffer> AllocateBytes(size_t size_bytes);

  // Collectives of plain memory stage their tensors in shared memory that the SDK keeps
  // between calls, as much as it has had in use at once (so that every step finds its
  // regions again). After a one-off large collective (loading weights, a checkpoint's
  // broadcast) this hands that memory back: every region no collective is using now is
  // dropped (the staging arena of small tensors too), and its bytes returned. The next
  // collective of such a size makes its region again. Like a caching allocator's
  // empty_cache; never needed for correctness.
  size_t ReleaseIdleMemory();

  // Collectives. Each takes a `name` (a label such as "grad/fc1", non-empty, the same on
  // every rank) that errors quote. On OK the result is in the caller's buffer; on any
  // error the buffer is as it was. The *Async forms return at once with a handle
  // (collective_handle.h says how long buffers must be left alone); the others wait.

  // In-place all-reduce of `buffer` across every rank. The ops' exact numerics (AVG of
  // integers truncates; float16/bfloat16 combine in float32) are in core/reduce/reducer.h.
  template <Element T>
  absl::Status AllReduce(absl::string_view name, absl::Span<T> buffer, ReduceOp op,
                         const AllReduceOptions& options = {}) {
    return AllReduceAsync(name, buffer, op, options).Wait();
  }
  template <Element T>
  CollectiveHandle AllReduceAsync(absl::string_view name, absl::Span<T> buffer, ReduceOp op,
                                  const AllReduceOptions& options = {}) {
    return AllReduceAsync(name, buffer.data(), buffer.size(), kDTypeOf<T>, op, options);
  }
  // Raw form, for any DType (float16/bfloat16 as uint16_t storage). REQUIRES: `data`
  // holds `count` elements of `dtype` (it may be null when count is 0).
  absl::Status AllReduce(absl::string_view name, void* data, size_t count, DType dtype, ReduceOp op,
                         const AllReduceOptions& options = {});
  CollectiveHandle AllReduceAsync(absl::string_view name, void* data, size_t count, DType dtype,
                                  ReduceOp op, const AllReduceOptions& options = {});

  // All-reduce of many tensors of one dtype as ONE collective: they are packed one after
  // another into one buffer (the shared-memory region, when the group is that large),
  // reduced together and copied back, each into its own tensor, only when the whole ring
  // completed (on any error every tensor is as it was). Every rank must pass the same
  // tensors (names and counts) in the same order: the worker compares the member list
  // across ranks, and a mismatch fails on every rank naming the first tensor that
  // differs. The collective's name is derived from the members' names ("fused 161 tensors
  // 'conv1.weight'..'fc.bias' #<digest>"). Fails InvalidArgument, naming the tensor, for
  // an empty list, a tensor without a name, null with elements, or of another dtype than
  // the first.
  absl::Status AllReduceGroup(absl::Span<const GroupTensor> tensors, ReduceOp op,
                              const AllReduceOptions& options = {});
  CollectiveHandle AllReduceGroupAsync(absl::Span<const GroupTensor> tensors, ReduceOp op,
                                       const AllReduceOptions& options = {});

  // Rank `root`'s buffer is copied into every other rank's buffer.
  // REQUIRES: 0 <= root < world_size().
  template <Element T>
  absl::Status Broadcast(absl::string_view name, absl::Span<T> buffer, int root,
                         const CollectiveOptions& options = {}) {
    return BroadcastAsync(name, buffer, root, options).Wait();
  }
  template <Element T>
  CollectiveHandle BroadcastAsync(absl::string_view name, absl::Span<T> buffer, int root,
                                  const CollectiveOptions& options = {}) {
    return BroadcastAsync(name, buffer.data(), buffer.size(), kDTypeOf<T>, root, options);
  }
  absl::Status Broadcast(absl::string_view name, void* data, size_t count, DType dtype, int root,
                         const CollectiveOptions& options = {});
  CollectiveHandle BroadcastAsync(absl::string_view name, void* data, size_t count, DType dtype,
                                  int root, const CollectiveOptions& options = {});

  // Every rank contributes `input`; `output` receives all ranks' inputs in rank order.
  // REQUIRES: output.size() == world_size() * input.size(). `input` may alias `output`.
  template <Element T>
  absl::Status AllGather(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                         absl::Span<T> output, const CollectiveOptions& options = {}) {
    return AllGatherAsync<T>(name, input, output, options).Wait();
  }
  template <Element T>
  CollectiveHandle AllGatherAsync(absl::string_view name,
                                  absl::Span<const std::type_identity_t<T>> input,
                                  absl::Span<T> output, const CollectiveOptions& options = {}) {
    return AllGatherAsync(name, input.data(), input.size(), kDTypeOf<T>, output.data(),
                          output.size(), options);
  }
  // Raw form: `input_count` elements in, `output_count` (= world_size() * input_count) out.
  absl::Status AllGather(absl::string_view name, const void* input, size_t input_count, DType dtype,
                         void* output, size_t output_count, const CollectiveOptions& options = {});
  CollectiveHandle AllGatherAsync(absl::string_view name, const void* input, size_t input_count,
                                  DType dtype, void* output, size_t output_count,
                                  const CollectiveOptions& options = {});

  // Every rank's `input` is world_size() blocks of output.size() elements; rank r's
  // `output` receives block r reduced over the ranks with `op` (scales as AllReduce's),
  // bitwise the elements an AllReduce of `input` would give there. Each rank sends and
  // receives (N-1)/N of input's bytes, half of what an AllReduce moves: the gradient
  // step of sharded optimizers (ZeRO, FSDP). `output` may alias `input` (e.g. its own
  // block). REQUIRES: input.size() == world_size() * output.size().
  template <Element T>
  absl::Status ReduceScatter(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                             absl::Span<T> output, ReduceOp op,
                             const AllReduceOptions& options = {}) {
    return ReduceScatterAsync<T>(name, input, output, op, options).Wait();
  }
  template <Element T>
  CollectiveHandle ReduceScatterAsync(absl::string_view name,
                                      absl::Span<const std::type_identity_t<T>> input,
                                      absl::Span<T> output, ReduceOp op,
                                      const AllReduceOptions& options = {}) {
    return ReduceScatterAsync(name, input.data(), input.size(), kDTypeOf<T>, output.data(),
                              output.size(), op, options);
  }
  // Raw form: `input_count` (= world_size() * output_count) elements in, `output_count` out.
  absl::Status ReduceScatter(absl::string_view name, const void* input, size_t input_count,
                             DType dtype, void* output, size_t output_count, ReduceOp op,
                             const AllReduceOptions& options = {});
  CollectiveHandle ReduceScatterAsync(absl::string_view name, const void* input,
                                      size_t input_count, DType dtype, void* output,
                                      size_t output_count, ReduceOp op,
                                      const AllReduceOptions& options = {});

  // Rank `root`'s `input`, world_size() blocks of output.size() elements, is dealt out:
  // rank r's `output` receives block r. The root sends each other rank its block once
  // (S (N-1)/N bytes of an S-byte input, where a Broadcast of it sends S to every rank).
  // Every rank passes the input's size, which the ranks agree on, but only the root's
  // input is read: the others may pass null data of that size (`{nullptr, n}`).
  // `output` may be the rank's own block of `input`. REQUIRES: 0 <= root < world_size();
  // input.size() == world_size() * output.size().
  template <Element T>
  absl::Status Scatter(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                       absl::Span<T> output, int root, const CollectiveOptions& options = {}) {
    return ScatterAsync<T>(name, input, output, root, options).Wait();
  }
  template <Element T>
  CollectiveHandle ScatterAsync(absl::string_view name,
                                absl::Span<const std::type_identity_t<T>> input,
                                absl::Span<T> output, int root,
                                const CollectiveOptions& options = {}) {
    return ScatterAsync(name, input.data(), input.size(), kDTypeOf<T>, output.data(),
                        output.size(), root, options);
  }
  // Raw form: `input_count` (= world_size() * output_count) elements in at the root (null
  // elsewhere is fine), `output_count` out.
  absl::Status Scatter(absl::string_view name, const void* input, size_t input_count, DType dtype,
                       void* output, size_t output_count, int root,
                       const CollectiveOptions& options = {});
  CollectiveHandle ScatterAsync(absl::string_view name, const void* input, size_t input_count,
                                DType dtype, void* output, size_t output_count, int root,
                                const CollectiveOptions& options = {});

  // Every rank contributes `input`; rank `root`'s `output` receives all ranks' inputs in
  // rank order. Each rank sends its own block and those of the ranks before it on the way
  // to the root, which receives S (N-1)/N bytes of its S-byte output (an AllGather
  // delivers that to every rank). Every rank passes the output's size, which the ranks
  // agree on, but only the root's output is written: the others may pass null data of
  // that size (`{nullptr, n}`), and theirs is left untouched. `input` may be the root's
  // own slot of `output`. REQUIRES: 0 <= root < world_size();
  // output.size() == world_size() * input.size().
  template <Element T>
  absl::Status Gather(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                      absl::Span<T> output, int root, const CollectiveOptions& options = {}) {
    return GatherAsync<T>(name, input, output, root, options).Wait();
  }
  template <Element T>
  CollectiveHandle GatherAsync(absl::string_view name,
                               absl::Span<const std::type_identity_t<T>> input,
                               absl::Span<T> output, int root,
                               const CollectiveOptions& options = {}) {
    return GatherAsync(name, input.data(), input.size(), kDTypeOf<T>, output.data(),
                       output.size(), root, options);
  }
  // Raw form: `input_count` elements in, `output_count` (= world_size() * input_count) out
  // at the root (null elsewhere is fine).
  absl::Status Gather(absl::string_view name, const void* input, size_t input_count, DType dtype,
                      void* output, size_t output_count, int root,
                      const CollectiveOptions& options = {});
  CollectiveHandle GatherAsync(absl::string_view name, const void* input, size_t input_count,
                               DType dtype, void* output, size_t output_count, int root,
                               const CollectiveOptions& options = {});

  // Every rank's `input` is world_size() blocks of output.size() / world_size() elements,
  // block r for rank r; rank r's `output` receives, as its block q, rank q's block r
  // (MPI_Alltoall, torch's all_to_all_single with equal splits). Each block goes straight
  // to its rank: every rank sends and receives (N-1)/N of its input. `output` may be
  // `input` (in place). On rings of more than 16 ranks, whose workers link only to the
  // ranks 1, 2, 4, ... away, a larger one's blocks hop those links (log2 N rounds of
  // about half the data: more bytes sent than (N-1)/N of the input).
  // REQUIRES: input.size() == output.size(), a multiple of world_size().
  template <Element T>
  absl::Status AllToAll(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                        absl::Span<T> output, const CollectiveOptions& options = {}) {
    return AllToAllAsync<T>(name, input, output, options).Wait();
  }
  template <Element T>
  CollectiveHandle AllToAllAsync(absl::string_view name,
                                 absl::Span<const std::type_identity_t<T>> input,
                                 absl::Span<T> output, const CollectiveOptions& options = {}) {
    return AllToAllAsync(name, input.data(), input.size(), kDTypeOf<T>, output.data(),
                         output.size(), options);
  }
  // Raw form: `count` elements in and out (a multiple of world_size()).
  absl::Status AllToAll(absl::string_view name, const void* input, size_t input_count,
                        DType dtype, void* output, size_t output_count,
                        const CollectiveOptions& options = {});
  CollectiveHandle AllToAllAsync(absl::string_view name, const void* input, size_t input_count,
                                 DType dtype, void* output, size_t output_count,
                                 const CollectiveOptions& options = {});

  // An all-to-all of uneven blocks (MPI_Alltoallv; torch's all_to_all_single with split
  // sizes): rank r's `input` is world_size() blocks one after another, block q of
  // send_counts[q] elements for rank q; its `output` receives rank q's block r as its
  // block q, of receive_counts[q] elements. Rank q's send_counts[r] must be rank r's
  // receive_counts[q]: a pair that does not match fails every rank before a byte moves,
  // naming the pair. `input` and `output` are separate buffers; allocated side by side in
  // one registered buffer (the output right after the input, e.g. two spans of one
  // Allocate) it runs there with no copy. Each block goes straight to its rank (on rings
  // of more than 16 ranks it hops the links of strides 1, 2, 4, ..., as AllToAll's).
  // REQUIRES: send_counts and receive_counts hold world_size() counts each; input holds
  // their sum of send_counts elements, output of receive_counts.
  template <Element T>
  absl::Status AllToAllV(absl::string_view name, absl::Span<const std::type_identity_t<T>> input,
                         absl::Span<const uint64_t> send_counts, absl::Span<T> output,
                         absl::Span<const uint64_t> receive_counts,
                         const CollectiveOptions& options = {}) {
    return AllToAllVAsync<T>(name, input, send_counts, output, receive_counts, options).Wait();
  }
  template <Element T>
  CollectiveHandle AllToAllVAsync(absl::string_view name,
                                  absl::Span<const std::type_identity_t<T>> input,
                                  absl::Span<const uint64_t> send_counts, absl::Span<T> output,
                                  absl::Span<const uint64_t> receive_counts,
                                  const CollectiveOptions& options = {}) {
    return AllToAllVAsync(name, input.data(), input.size(), send_counts, kDTypeOf<T>,
                          output.data(), output.size(), receive_counts, options);
  }
  // Raw form: `input_count` elements in (the sum of send_counts), `output_count` out (the
  // sum of receive_counts).
  absl::Status AllToAllV(absl::string_view name, const void* input, size_t input_count,
                         absl::Span<const uint64_t> send_counts, DType dtype, void* output,
                         size_t output_count, absl::Span<const uint64_t> receive_counts,
                         const CollectiveOptions& options = {});
  CollectiveHandle AllToAllVAsync(absl::string_view name, const void* input, size_t input_count,
                                  absl::Span<const uint64_t> send_counts, DType dtype,
                                  void* output, size_t output_count,
                                  absl::Span<const uint64_t> receive_counts,
                                  const CollectiveOptions& options = {});

  // Returns once every rank has entered the barrier. No data.
  absl::Status Barrier(absl::string_view name, const CollectiveOptions& options = {});
  CollectiveHandle BarrierAsync(absl::string_view name, const CollectiveOptions& options = {});

  // For a caller that checks its own arguments before calling in (a framework's binding:
  // a torch op given a list of the wrong length, an output of another dtype): the
  // collective this rank would have started next, a `kind` named `name`, fails on every
  // rank at once with `why`, where the other ranks would otherwise wait for it until their
  // deadline. It takes its turn on the ring like any call, so the ranks stay in step, as
  // the SDK's own refusals of bad arguments do. The handle completes at once with
  // InvalidArgument(`why`, at most 4 KiB of it); the other ranks' calls fail Aborted,
  // naming this rank, its worker and `why`.
  CollectiveHandle Refuse(CollectiveKind kind, absl::string_view name, absl::string_view why,
                          const CollectiveOptions& options = {});

 private:
  explicit Client(std::unique_ptr<internal::ClientCore> core);

  std::unique_ptr<internal::ClientCore> core_;
};

}  // namespace ringsync
