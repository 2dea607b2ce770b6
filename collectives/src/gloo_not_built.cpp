// The gloo backend's entry points for builds without gloo: they say so instead
// of failing to link.
#include <memory>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"

namespace ccscope {

std::unique_ptr<Communicator> make_gloo_communicator(const World& /*world*/,
                                                     const GlooOptions& /*options*/) {
  throw UsageError(
      "--backend gloo: this ccscope was built without it (configure with gloo present: "
      "Debian's libgloo-dev); use --backend mpi");
}

std::unique_ptr<PointToPoint> make_gloo_point_to_point(const World& world) {
  (void)make_gloo_communicator(world, GlooOptions{});  // says it was not built
  return nullptr;
}

bool gloo_backend_compiled() { return false; }

}  // namespace ccscope
