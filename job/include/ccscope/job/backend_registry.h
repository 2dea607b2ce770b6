#pragma once
// The backends a ccscope job can run on, by name: each registered once with its
// factory and what it can do, and ONE rule for the default (used by bench,
// topo, diag and train). A new backend registers itself (register_backend, or
// an entry in backend_registry.cpp's built-in list); no caller tests names.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/world.h"

namespace ccscope::job {

// Where a backend's buffers live.
enum class DeviceKind { kHost, kDevice };

struct BackendCapabilities {
  DeviceKind device = DeviceKind::kHost;
  bool in_place = true;  // runs collectives with one buffer for input and output
  // The MPI thread level it needs: a backend whose progress runs on another
  // thread than the caller's needs MPI_THREAD_SERIALIZED.
  bool needs_serialized_threads = false;
  // The collectives it implements (ccscope's names); empty: every one.
  std::vector<std::string> collectives;
  // Makes communicators over a group of the world's ranks (BackendOptions::color); false:
  // over the whole world only.
  bool groups = true;
  // Runs over MPI_COMM_WORLD: only in a world an MPI launcher started (World::channel_name()
  // "mpi"), not in one that met at the rendezvous of a launch without MPI.
  bool needs_mpi_world = false;
};

// What a factory may be asked for (one struct for every backend; each reads
// what applies to it).
struct BackendOptions {
  bool isolate_ranks = false;  // device backends: ranks of one node connect as if remote
  // Host backends: waits yield the core instead of spinning; unset: the world's (the job's
  // wait policy: JobContext::choose_waits).
  std::optional<bool> yielding_waits;
  // Backends with capabilities.groups: over the ranks that pass the same color (ordered by
  // world rank); unset: the whole world.
  std::optional<int> color;
  // Backends with capabilities.groups: over the world's first `first_ranks` ranks (the factory
  // returns nullptr on the others: a scaling run's smaller counts); 0: every rank.
  int first_ranks = 0;
};

struct Backend {
  std::string name;     // as --backend spells it
  std::string library;  // what carries the data, as messages name it ("NCCL")
  BackendCapabilities capabilities;
  // Compiled into this ccscope.
  std::function<bool()> built;
  // Usable by this process now (a device, a driver); only asked when built.
  std::function<bool()> usable;
  // Collective over the world.
  std::function<std::unique_ptr<Communicator>(const World&, const BackendOptions&)> make;
  // The world's host point-to-point (PointToPoint) over this backend's library, for
  // pair and clock measurements (diag, topo --measure); null: it has none.
  std::function<std::unique_ptr<PointToPoint>(const World&)> make_point_to_point;
};

// Adds (or replaces, by name) a backend; the built-in ones are there already.
void register_backend(Backend backend);
// The registered backends, in registration order.
const std::vector<Backend>& registered_backends();
// The backend named `name`, or nullptr.
const Backend* find_backend(const std::string& name);
// The first built backend of `device` kind that makes group communicators, or nullptr: what a
// job whose backend spans the world only uses for the groups it needs.
// `mpi_world`: the world is MPI's (else backends that need it are passed over).
const Backend* first_group_backend(DeviceKind device, bool mpi_world = true);
// The backend for communicators over groups of ranks: `preferred` (a name; "" for none) when it
// makes groups, else the first built host backend that does (MPI). Throws std::runtime_error
// when this ccscope has none.
const Backend& group_backend(const std::string& preferred = "", bool mpi_world = true);

struct BackendChoice {
  std::string backend;  // the default's name
  std::string note;     // why not a device backend although GPUs are present; "" otherwise
};

// The default rule (pure, unit tested). `hosts` and `gpu_ids` are by rank; a
// GPU id is the PCI bus id of the GPU the rank would use ("" = none). The
// first built device backend when every rank has a GPU and no two ranks of one
// host would share one (NCCL refuses that), or when --isolate-ranks makes
// sharing legal; else the first host backend.
// `mpi_world`: as for first_group_backend.
BackendChoice choose_default_backend(const std::vector<std::string>& hosts,
                                     const std::vector<std::string>& gpu_ids, bool isolate_ranks,
                                     bool mpi_world = true);

// The default for this job: collective (gathers every rank's GPU), the same
// answer on every rank.
BackendChoice default_backend(const World& world, bool isolate_ranks);

// The world's host point-to-point (collective): from the first built backend that
// fits the world and makes one (MPI's in an MPI world, else gloo's). Throws
// UsageError when this ccscope has none for it.
std::unique_ptr<PointToPoint> make_point_to_point(const World& world);

// Starts backend `name` (collective). Throws UsageError for a name not
// registered or not built into this ccscope, or one that needs MPI's world in a
// world without MPI.
std::unique_ptr<Communicator> make_backend(const std::string& name, const World& world,
                                           const BackendOptions& options);

}  // namespace ccscope::job
