// Cold pull of an image into a fresh layer store: the agent's pull path
// (images::RegistryClient::pull: manifest, config, every layer downloaded,
// digest-checked and unpacked with its whiteouts) timed from the request to
// the last layer in the store. bench/images/pull.sh runs it against a
// loopback docker-registry beside `skopeo copy` + `umoci unpack` of the
// same image.
//
//   build/bench/images/image_pull_bench REGISTRY/NAME:TAG DIR [rounds]
//
// Prints one line per round: "allot_pull_s=<seconds>". Each round's store
// is DIR/store<N>, removed after the round.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "images/layer_store.h"
#include "images/reference.h"
#include "images/registry_client.h"

int main(int argc, char** argv) {
  using namespace allot::images;
  if (argc < 3) {
    std::fprintf(stderr, "usage: image_pull_bench REGISTRY/NAME:TAG DIR [rounds]\n");
    return 2;
  }
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  auto reference = parseReference(argv[1]);
  if (!reference) {
    std::fprintf(stderr, "image_pull_bench: %s\n", reference.error().describe().c_str());
    return 2;
  }
  for (int i = 0; i < rounds; ++i) {
    std::string root = std::string(argv[2]) + "/store" + std::to_string(i);
    std::error_code made;
    std::filesystem::create_directories(root, made);
    auto store = LayerStore::open({.root = root});
    auto client = RegistryClient::create({});
    if (!store || !client) {
      std::fprintf(stderr, "image_pull_bench: %s\n",
                   (!store ? store.error() : client.error()).describe().c_str());
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    allot::Result<PulledImage> pulled = (*client)->pull(*reference, **store);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!pulled) {
      std::fprintf(stderr, "image_pull_bench: %s\n", pulled.error().describe().c_str());
      return 1;
    }
    std::printf("allot_pull_s=%.3f layers=%zu\n", s, pulled->layers.size());
    std::fflush(stdout);
    store->reset();
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  return 0;
}
