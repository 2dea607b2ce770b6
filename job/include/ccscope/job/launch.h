#pragma once
// How this ccscope process was launched, decided from its environment alone (pure: the
// environment comes in as a function). Four kinds:
//   kMpi       an MPI launcher whose wire-up the linked MPI library speaks (Hydra's
//              mpiexec, Open MPI's mpirun, srun --mpi=pmi2 or --mpi=pmix): MPI_Init wires up.
//   kTorchrun  torchrun, or a Kubernetes PyTorchJob (RANK, WORLD_SIZE, MASTER_ADDR,
//              MASTER_PORT): rank 0 listens at rendezvous_host:rendezvous_port.
//   kSlurm     a Slurm job step without a usable MPI wire-up (srun --mpi=none, or
//              --mpi=pmi2/pmix that the linked MPI does not speak): rank 0 listens at the
//              step's first node.
//   kSingle    none of them (a shell, an sbatch script's own shell): one rank.
//
// The order: torchrun's own workers first (TORCHELASTIC_RUN_ID: torchrun spawned this
// process, so any MPI or Slurm variables belong to whoever started torchrun), then an MPI
// launcher, then RANK/WORLD_SIZE (a PyTorchJob pod, where an mpiexec run inside the pod
// wins), then a Slurm job step.
//
// Variables set to the empty string count as unset. Counts the launcher does not give
// (PMIx says no world size; a PyTorchJob no LOCAL_*) are -1: derive them later (MPI_Init,
// or the ranks' host names as World does).
//
// Environment variables of ccscope's own:
//   CCSCOPE_RENDEZVOUS_PORT     the rendezvous port for kTorchrun and kSlurm (1..65535)
//   CCSCOPE_RENDEZVOUS_HOST     the rendezvous host for kTorchrun and kSlurm, instead of
//                               MASTER_ADDR or the step's first node
//   CCSCOPE_RENDEZVOUS_TIMEOUT  seconds every rendezvous step waits (positive; default 60)
// A malformed value is refused whatever the kind.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ccscope::job {

enum class LaunchKind { kSingle, kMpi, kSlurm, kTorchrun };

// Which MPI library this ccscope links (from MPI_Get_library_version, which may be called
// before MPI_Init): decides whether the MPI launcher's wire-up is one the library speaks.
//   kMpich    PMI-1/PMI-2 (Hydra's PMI_FD or PMI_PORT, Slurm's mpi/pmi2); not PMIx
//   kOpenMpi  PMIx (mpirun, srun --mpi=pmix); not PMI-1/PMI-2 (Open MPI 4.1 speaks them
//             only when built --with-pmi against Slurm's libpmi; Debian's is not:
//             ompi_info lists pmix ext3x, isolated and flux only)
//   kOther    another library (Intel MPI, MVAPICH, Cray MPICH): every wire-up is trusted
//             and MPI_Init has the last word
//   kNone     built without MPI: never kMpi
enum class MpiFlavor { kNone, kMpich, kOpenMpi, kOther };

// "MPICH Version:\t4.0.2\n..." -> kMpich, "Open MPI v4.1.4, package: ..." -> kOpenMpi,
// "" -> kNone, anything else -> kOther.
MpiFlavor mpi_flavor_from_version(const std::string& library_version);
const char* mpi_flavor_name(MpiFlavor flavor);  // "none", "MPICH", "Open MPI", "other MPI"

struct Launch {
  LaunchKind kind = LaunchKind::kSingle;
  // For records and messages: "mpiexec (Hydra, PMI-1)", "mpirun (Open MPI, PMIx)",
  // "srun --mpi=pmi2", "srun --mpi=pmix", "PMIx launcher", "srun (Slurm environment)",
  // "torchrun environment", "RANK/WORLD_SIZE environment (PyTorchJob)", "single process".
  std::string launcher;
  // As the launcher says; -1 where it does not (see above).
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  // kSlurm and kTorchrun: where world rank 0 listens for the rendezvous (TCP), and how
  // long every rendezvous step waits. Empty and 0 for kMpi and kSingle.
  std::string rendezvous_host;
  int rendezvous_port = 0;
  std::chrono::seconds rendezvous_timeout{60};
  // Under Slurm (any kind, also MPI under srun or inside an sbatch allocation): as Slurm
  // spells them; "" otherwise. slurm_nodelist is compressed, SLURM_STEP_NODELIST or else
  // SLURM_JOB_NODELIST; slurm_node_name is SLURMD_NODENAME.
  std::string slurm_job_id, slurm_step_id, slurm_nodelist, slurm_node_name;
  std::string note;  // "" or one line the leader prints (e.g. why srun --mpi=pmix runs
                     // over Slurm's environment)
};

using Getenv = std::function<const char*(const char*)>;

// Pure: reads only `getenv`. Throws ccscope::UsageError (ccscope/collectives/error.h) with
// ONE line naming the variable for partial or inconsistent environments.
Launch decide_launch(const Getenv& getenv, MpiFlavor mpi);

// Slurm's compressed host list ("node[01-03,7],gpu-a[1-2]") expanded in order, as Slurm's
// hostlist does: each number keeps the width it is written with ("01-10" -> 01..10, "7" ->
// 7), several bracket groups in one name expand leftmost-outermost ("r[1-2]n[1-2]" -> r1n1,
// r1n2, r2n1, r2n2), text may follow the last bracket ("n[1-2]-ib"). Throws UsageError
// on malformed input (unbalanced or nested brackets, empty names or ranges, a range
// downwards, a non-number, whitespace) and past 1,000,000 hosts.
std::vector<std::string> expand_slurm_hostlist(const std::string& list);

// SLURM_STEP_TASKS_PER_NODE ("2(x2),1") expanded to one count per node: {2, 2, 1}.
// Throws UsageError on malformed input.
std::vector<int> expand_slurm_tasks_per_node(const std::string& list);

// The port a Slurm step's rank 0 listens on unless CCSCOPE_RENDEZVOUS_PORT says: 20000 +
// (32-bit FNV-1a of "<job id>.<step id>") % 10000. Every task of the step computes the
// same; two steps of one job (or two jobs) on a node rarely collide.
int slurm_rendezvous_port(const std::string& job_id, const std::string& step_id);

const char* launch_kind_name(LaunchKind kind);  // "single", "mpi", "slurm", "torchrun"

// MPI_Finalize's bound from CCSCOPE_FINALIZE_TIMEOUT_S (`text`, seconds, may be null): a
// test environment whose MPI can hang in MPI_Finalize after every result is written sets
// it below `standard`. Unset or empty: `standard`. A value that is not seconds in
// (0, 3600]: `standard`, and `problem` says so in one line (the run goes on).
std::chrono::milliseconds finalize_bound_from(const char* text, std::chrono::milliseconds standard,
                                              std::string& problem);

}  // namespace ccscope::job
