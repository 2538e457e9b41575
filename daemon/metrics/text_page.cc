#include "daemon/metrics/text_page.h"

#include <iterator>
#include <vector>

#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace ringsync::metrics {

std::string TextPage(absl::Span<const prometheus::Collectable* const> collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const prometheus::Collectable* collectable : collectables) {
    std::vector<prometheus::MetricFamily> more = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace ringsync::metrics
