#include "ccscope/job/backend_registry.h"

#include <map>
#include <stdexcept>
#include <utility>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/mpi_point_to_point.h"

namespace ccscope::job {
namespace {

std::vector<Backend> built_in_backends() {
  std::vector<Backend> list;
  list.push_back(Backend{"mpi",
                         "MPI",
                         {DeviceKind::kHost, true, false, {}, true, true},
                         [] { return true; },
                         [] { return true; },
                         [](const World& world, const BackendOptions& options) {
                           MpiOptions mpi;
                           mpi.color = options.color;
                           mpi.first_ranks = options.first_ranks;
                           // A flag decides on every rank alike, else the job's
                           // policy (JobContext::choose_waits).
                           mpi.yielding_waits =
                               options.yielding_waits.value_or(world.yielding_waits());
                           return make_mpi_communicator(world, mpi);
                         },
                         [](const World&) { return make_mpi_point_to_point(); }});
  list.push_back(Backend{"nccl",
                         "NCCL",
                         {DeviceKind::kDevice, true, false, {}, true},
                         [] { return nccl_backend_compiled(); },
                         [] { return nccl_backend_usable(); },
                         [](const World& world, const BackendOptions& options) {
                           NcclOptions nccl;
                           nccl.isolate_ranks = options.isolate_ranks;
                           nccl.color = options.color;
                           nccl.first_ranks = options.first_ranks;
                           return make_nccl_communicator(world, nccl);
                         }});
  // gloo's waits sleep in its own threads: yielding_waits does not apply. It needs
  // only the World (its addresses are exchanged by World::all_gather), not MPI's.
  list.push_back(Backend{"gloo",
                         "gloo",
                         {DeviceKind::kHost, true, false, {}, true, false},
                         [] { return gloo_backend_compiled(); },
                         [] { return gloo_backend_compiled(); },
                         [](const World& world, const BackendOptions& options) {
                           GlooOptions gloo;
                           gloo.color = options.color;
                           gloo.first_ranks = options.first_ranks;
                           return make_gloo_communicator(world, gloo);
                         },
                         [](const World& world) { return make_gloo_point_to_point(world); }});
  list.push_back(Backend{
      "ring",
      "ccscope's ring over MPI",
      {DeviceKind::kHost, true, false, {}, false, true},
      [] { return true; },
      [] { return true; },
      [](const World& world, const BackendOptions&) { return make_ring_communicator(world); }});
  return list;
}

std::vector<Backend>& backends() {
  static std::vector<Backend> list = built_in_backends();
  return list;
}

bool fits_world(const Backend& b, bool mpi_world) {
  return mpi_world || !b.capabilities.needs_mpi_world;
}

const Backend* first_of_kind(DeviceKind kind, bool mpi_world) {
  for (const Backend& b : backends())
    if (b.capabilities.device == kind && b.built() && fits_world(b, mpi_world)) return &b;
  return nullptr;
}

}  // namespace

void register_backend(Backend backend) {
  for (Backend& b : backends())
    if (b.name == backend.name) {
      b = std::move(backend);
      return;
    }
  backends().push_back(std::move(backend));
}

const std::vector<Backend>& registered_backends() { return backends(); }

const Backend* find_backend(const std::string& name) {
  for (const Backend& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

const Backend* first_group_backend(DeviceKind device, bool mpi_world) {
  for (const Backend& b : backends())
    if (b.capabilities.device == device && b.capabilities.groups && b.built() &&
        fits_world(b, mpi_world))
      return &b;
  return nullptr;
}

const Backend& group_backend(const std::string& preferred, bool mpi_world) {
  const Backend* backend = preferred.empty() ? nullptr : find_backend(preferred);
  if (!backend || !backend->capabilities.groups || !fits_world(*backend, mpi_world))
    backend = first_group_backend(DeviceKind::kHost, mpi_world);
  if (!backend)
    throw std::runtime_error("no host backend of this ccscope makes group communicators");
  return *backend;
}

BackendChoice choose_default_backend(const std::vector<std::string>& hosts,
                                     const std::vector<std::string>& gpu_ids, bool isolate_ranks,
                                     bool mpi_world) {
  const Backend* host = first_of_kind(DeviceKind::kHost, mpi_world);
  const std::string fallback = host ? host->name : "mpi";
  // A GPU id is only ever reported by a build with a device backend; the
  // rule's wording names the device backend a build would choose.
  const Backend* device = find_backend("nccl");
  for (const Backend& b : backends())
    if (b.capabilities.device == DeviceKind::kDevice) {
      device = &b;
      break;
    }
  const std::string preferred = device ? device->name : fallback;
  const std::string preferred_library = device ? device->library : fallback;
  bool any_gpu = false;
  for (const auto& id : gpu_ids) any_gpu = any_gpu || !id.empty();
  if (!any_gpu) return {fallback, ""};
  for (size_t r = 0; r < gpu_ids.size(); ++r)
    if (gpu_ids[r].empty())
      return {fallback, "rank " + std::to_string(r) +
                            (r < hosts.size() ? " (" + hosts[r] + ")" : "") +
                            " sees no GPU, so the default backend is " + fallback};
  if (isolate_ranks) return {preferred, ""};
  std::map<std::pair<std::string, std::string>, size_t> first_user;  // (host, GPU) -> rank
  for (size_t r = 0; r < gpu_ids.size(); ++r) {
    const std::string host = r < hosts.size() ? hosts[r] : std::string();
    const auto [it, fresh] = first_user.emplace(std::make_pair(host, gpu_ids[r]), r);
    if (!fresh)
      return {fallback, "ranks " + std::to_string(it->second) + " and " + std::to_string(r) +
                            " on " + host + " would share GPU " + gpu_ids[r] + ", which " +
                            preferred_library + " refuses, so the default backend is " + fallback +
                            "; --backend " + preferred + " --isolate-ranks lets ranks share a GPU"};
  }
  return {preferred, ""};
}

BackendChoice default_backend(const World& world, bool isolate_ranks) {
  const std::vector<std::string> gpu_ids =
      world.all_gather(gpu_identity_for_local_rank(world.local_rank()));
  return choose_default_backend(world.hostnames(), gpu_ids, isolate_ranks,
                                world.channel_name() == "mpi");
}

std::unique_ptr<PointToPoint> make_point_to_point(const World& world) {
  const bool mpi_world = world.channel_name() == "mpi";
  for (const Backend& b : backends())
    if (b.make_point_to_point && b.built() && fits_world(b, mpi_world))
      return b.make_point_to_point(world);
  throw UsageError("no backend of this ccscope gives point-to-point in a world over " +
                   world.channel_name() + " (build with gloo: Debian's libgloo-dev)");
}

std::unique_ptr<Communicator> make_backend(const std::string& name, const World& world,
                                           const BackendOptions& options) {
  const Backend* backend = find_backend(name);
  if (!backend) throw UsageError("--backend " + name + ": no such backend");
  if (!backend->built())
    throw UsageError("--backend " + name + ": this ccscope was built without it");
  if (!fits_world(*backend, world.channel_name() == "mpi")) {
    const Backend* host = first_of_kind(DeviceKind::kHost, false);
    const std::string instead = host ? "; use --backend " + host->name + " (or nccl on GPUs)" : "";
    throw UsageError("--backend " + name + " runs over MPI's world of processes, and " +
                     (world.channel_name() == "rendezvous" ? "no MPI launcher started this job"
                                                           : "this job's ranks are threads (-g)") +
                     instead);
  }
  return backend->make(world, options);
}

}  // namespace ccscope::job
