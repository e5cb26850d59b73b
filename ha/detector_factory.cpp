#include "ha/detector_factory.h"

#include "ha/zk_detector.h"
#include "ha/zk_session.h"

namespace allot {

bool isZooKeeperUrl(const std::string& text) { return text.rfind("zk://", 0) == 0; }

Result<std::unique_ptr<LeaderDetector>> makeLeaderDetector(asio::io_context& io,
                                                           const std::string& text) {
  if (isZooKeeperUrl(text)) {
    auto url = parseZkUrl(text);
    if (!url) return url.error();
    return makeZooKeeperDetector(io, *url, text);
  }
  auto endpoint = parseEndpoint(text);
  if (!endpoint) return endpoint.error();
  return makeFixedDetector(io, std::move(*endpoint));
}

}  // namespace allot
