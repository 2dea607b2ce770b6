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

bool gloo_backend_compiled() { return false; }

}  // namespace ccscope
