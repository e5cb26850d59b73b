#include "ha/detector_factory.h"

namespace allot {

bool isZooKeeperUrl(const std::string& text) { return text.rfind("zk://", 0) == 0; }

Result<std::unique_ptr<LeaderDetector>> makeLeaderDetector(asio::io_context& io,
                                                           const std::string& text) {
  if (isZooKeeperUrl(text))
    return Error{"'" + text + "': ZooKeeper leader detection is not built yet (issue 11)"};
  auto endpoint = parseEndpoint(text);
  if (!endpoint) return endpoint.error();
  return makeFixedDetector(io, std::move(*endpoint));
}

}  // namespace allot
