#include "core/ring/relay_allreduce.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ring/partition.h"
#include "core/ring/ring_allreduce.h"
#include "core/ring/ring_exchange.h"
#include "core/ring/ring_order_combine.h"
#include "core/ring/schedule.h"

namespace ringsync {
absl::Status RelayAllReduce(const RingMember& me, Link& link, Reducer& reducer,
                            const CollectiveSpec& spec, absl::Span<std::byte> buffer,
                            const RingOptions& options, RingStats* stats) {
  const ReduceSpec rspec{spec.dtype, spec.op, me.world_size, spec.pre_scale, spec.post_scale};
  RingExchange exchange(me, link, spec, options);
  if (absl::Status s = CheckAllReduceArguments(me, spec, buffer, rspec); !s.ok()) {
    return exchange.Reject(s);
  }
  RingStats local;
  const size_t esize = DTypeSize(spec.dtype);
  std::vector<std::byte> mine(buffer.begin(), buffer.end());
  ReduceStats pre;
  if (absl::Status s = reducer.PreScale(rspec, mine.data(), spec.count, &pre); !s.ok()) {
    return exchange.Reject(s);
  }
  local.overflows += pre.overflows;

  // Every other rank's contribution, in one piece (small messages: the copy is nothing).
  std::vector<std::vector<std::byte>> received(me.world_size);
  std::vector<absl::Span<const std::byte>> contributions(me.world_size);
  std::vector<bool> heard(me.world_size, false);
  contributions[me.rank] = mine;
  heard[me.rank] = true;
  absl::Status result =
      exchange.AgreeCarrying(mine, [&](int origin, ReceivedFrame frame) -> absl::Status {
        // RingExchange checked the relay's schedule; this keeps the indexing safe anyway.
        if (origin < 0 || origin >= me.world_size || heard[origin]) {
          return absl::InvalidArgumentError(
              absl::StrCat("relay frame for rank ", origin, " is out of place"));
        }
        heard[origin] = true;
        received[origin] = frame.payload.ToVector();
        contributions[origin] = received[origin];
        return absl::OkStatus();
      });
  if (result.ok() && exchange.limit().IsCancelled()) {
    // Cancelled (the client left) while the small frames flowed without a blocking wait:
    // give up now, before this rank's data completes, so every rank fails plainly.
    result = exchange.Reject(exchange.ExplainCancel(absl::CancelledError("cancelled")));
  }
  const bool combining = result.ok();  // the caller's buffer is written from here on
  if (combining) {
    result = CombineInRingOrder(me, reducer, rspec, spec.count, esize, contributions, buffer, local);
    if (!result.ok()) result = exchange.Reject(result);
  }
  if (result.ok()) result = exchange.Commit();
  exchange.ExportStats(&local);
  local.buffer_untouched = !result.ok() && !combining;
  if (stats != nullptr) *stats = local;
  return result;
}

}  // namespace ringsync
