#include "ccscope/job/launch.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "ccscope/collectives/error.h"

namespace ccscope::job {
namespace {

using Vars = std::map<std::string, std::string>;

Vars merged(std::initializer_list<Vars> parts) {
  Vars all;
  for (const Vars& part : parts)
    for (const auto& [name, value] : part) all[name] = value;
  return all;
}

Vars without(Vars vars, std::initializer_list<const char*> names) {
  for (const char* name : names) vars.erase(name);
  return vars;
}

Launch decide(const Vars& vars, MpiFlavor mpi) {
  return decide_launch(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      mpi);
}

// The UsageError's message, or "" when none was thrown.
std::string refusal(const Vars& vars, MpiFlavor mpi) {
  try {
    decide(vars, mpi);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// ---- Real environments ----

// MPICH 4.0.2's Hydra: `mpiexec -n 2 env` on this machine, rank 1 (PMI_FD differs per rank).
const Vars kHydra = {{"PMI_FD", "8"},          {"PMI_RANK", "1"},
                     {"PMI_SIZE", "2"},        {"MPI_LOCALNRANKS", "2"},
                     {"MPI_LOCALRANKID", "1"}, {"MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "vm"}};

// Open MPI 4.1.4's mpirun: `mpirun.openmpi -n 2 env` on this machine, rank 1 (abridged to
// the ORTE and PMIx variables).
const Vars kOmpiMpirun = {
    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
    {"OMPI_COMM_WORLD_NODE_RANK", "1"},  {"OMPI_COMM_WORLD_RANK", "1"},
    {"OMPI_COMM_WORLD_SIZE", "2"},       {"OMPI_UNIVERSE_SIZE", "2"},
    {"OMPI_MCA_ess", "^singleton"},      {"OMPI_MCA_orte_ess_num_procs", "2"},
    {"PMIX_NAMESPACE", "167837697"},     {"PMIX_RANK", "1"},
    {"PMIX_ID", "167837697.1"},          {"PMIX_SERVER_URI4", "167837696.0;tcp4://127.0.0.1:60035"},
    {"PMIX_VERSION", "4.2.2rc2"}};

// srun's variables for a task of a job step, as srun(1) "OUTPUT ENVIRONMENT VARIABLES"
// lists them and src/common/env.c (env_array_for_step, setup_env) sets them: job 4242,
// step 0, `srun -N2 -n4` (block: tasks 0,1 on node01, 2,3 on node02); this is task 2.
const Vars kSrunStepTask2 = {{"SLURM_JOB_ID", "4242"},
                             {"SLURM_JOBID", "4242"},
                             {"SLURM_STEP_ID", "0"},
                             {"SLURM_STEPID", "0"},
                             {"SLURM_PROCID", "2"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_STEP_NUM_TASKS", "4"},
                             {"SLURM_NTASKS", "4"},
                             {"SLURM_NPROCS", "4"},
                             {"SLURM_STEP_NUM_NODES", "2"},
                             {"SLURM_NNODES", "2"},
                             {"SLURM_STEP_NODELIST", "node[01-02]"},
                             {"SLURM_JOB_NODELIST", "node[01-02]"},
                             {"SLURM_NODELIST", "node[01-02]"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_TASKS_PER_NODE", "2(x2)"},
                             {"SLURM_CLUSTER_NAME", "c1"},
                             {"SLURM_SRUN_COMM_HOST", "10.0.0.1"},
                             {"SLURMD_NODENAME", "node02"}};

// Slurm's mpi/pmi2 plugin adds (src/plugins/mpi/pmi2/mpi_pmi2.c, mpi_p_slurmstepd_task;
// PMI_JOBID is "<job>.<step>", setup.c).
const Vars kPmi2Task2 = {
    {"PMI_FD", "7"}, {"PMI_JOBID", "4242.0"}, {"PMI_RANK", "2"}, {"PMI_SIZE", "4"}};

// Slurm's mpi/pmix plugin adds PMIx_server_setup_fork's variables; the namespace is
// "slurm.pmix.<job>.<step>" (src/plugins/mpi/pmix/pmixp_info.c).
const Vars kPmixTask2 = {{"PMIX_NAMESPACE", "slurm.pmix.4242.0"},
                         {"PMIX_RANK", "2"},
                         {"PMIX_SERVER_URI4", "pmix-server.3161;tcp4://127.0.0.1:40187"},
                         {"PMIX_VERSION", "4.2.2"},
                         {"SLURM_PMIXP_ABORT_AGENT_PORT", "38481"}};

// srun --mpi=none: three nodes, `srun -n5 -w gpu-a[1-2],gpu-b7` (block: 2, 2, 1); task 0.
const Vars kSrunNoneTask0 = {{"SLURM_JOB_ID", "77001"},
                             {"SLURM_STEP_ID", "2"},
                             {"SLURM_STEPID", "2"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_NODEID", "0"},
                             {"SLURM_STEP_NUM_TASKS", "5"},
                             {"SLURM_STEP_NUM_NODES", "3"},
                             {"SLURM_STEP_NODELIST", "gpu-a[1-2],gpu-b7"},
                             {"SLURM_JOB_NODELIST", "gpu-a[1-4],gpu-b7"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
                             {"SLURMD_NODENAME", "gpu-a1"}};

// A batch script's own shell: `env | grep SLURM` inside an sbatch job
// (https://gist.github.com/jerinphilip/212b3814264c3b8da512afc2cfda4bcb): SLURM_PROCID and
// friends are set, no step variables.
const Vars kSbatchShell = {{"SLURM_NODELIST", "gnode[10,20,25,37]"},
                           {"SLURM_JOB_NAME", "test-multi-nodes"},
                           {"SLURMD_NODENAME", "gnode10"},
                           {"SLURM_NTASKS_PER_NODE", "4"},
                           {"SLURM_NNODES", "4"},
                           {"SLURM_JOBID", "200505"},
                           {"SLURM_NTASKS", "4"},
                           {"SLURM_TASKS_PER_NODE", "1(x4)"},
                           {"SLURM_JOB_ID", "200505"},
                           {"SLURM_CPUS_PER_TASK", "1"},
                           {"SLURM_NODEID", "0"},
                           {"SLURM_TASK_PID", "16360"},
                           {"SLURM_NPROCS", "4"},
                           {"SLURM_CPUS_ON_NODE", "4"},
                           {"SLURM_PROCID", "0"},
                           {"SLURM_JOB_NODELIST", "gnode[10,20,25,37]"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_JOB_CPUS_PER_NODE", "4(x4)"},
                           {"SLURM_GTIDS", "0"},
                           {"SLURM_JOB_NUM_NODES", "4"}};

// torchrun --nproc_per_node 2 train.py (static rendezvous, its defaults --master_addr
// 127.0.0.1 --master_port 29500, run id "none"): the variables LocalElasticAgent's
// _start_workers sets (torch/distributed/elastic/agent/server/local_elastic_agent.py);
// worker 1.
const Vars kTorchrunWorker1 = {{"RANK", "1"},
                               {"GROUP_RANK", "0"},
                               {"ROLE_RANK", "1"},
                               {"ROLE_NAME", "default"},
                               {"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"WORLD_SIZE", "2"},
                               {"GROUP_WORLD_SIZE", "1"},
                               {"ROLE_WORLD_SIZE", "2"},
                               {"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", "29500"},
                               {"TORCHELASTIC_RESTART_COUNT", "0"},
                               {"TORCHELASTIC_MAX_RESTARTS", "0"},
                               {"TORCHELASTIC_RUN_ID", "none"},
                               {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                               {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                               {"OMP_NUM_THREADS", "1"}};

// A Kubeflow PyTorchJob's worker-0 pod (one master, two workers): setPodEnv in
// kubeflow/training-operator pkg/controller.v1/pytorch/envvar.go (MASTER_ADDR the master's
// service, MASTER_PORT 23456 the default port, RANK = worker index + 1); no LOCAL_*.
const Vars kPyTorchJobWorker0 = {{"PYTHONUNBUFFERED", "0"},
                                 {"MASTER_ADDR", "pytorch-simple-master-0"},
                                 {"MASTER_PORT", "23456"},
                                 {"WORLD_SIZE", "3"},
                                 {"RANK", "1"}};

// torchrun started by srun, one agent per node (`srun -N2 --ntasks-per-node=1 torchrun
// --nnodes 2 --nproc_per_node 2 ...`): the workers inherit the agent step's variables;
// worker 3 on node02.
const Vars kSrunAgentTask1 = {{"SLURM_JOB_ID", "4242"},
                              {"SLURM_STEP_ID", "3"},
                              {"SLURM_PROCID", "1"},
                              {"SLURM_LOCALID", "0"},
                              {"SLURM_NODEID", "1"},
                              {"SLURM_STEP_NUM_TASKS", "2"},
                              {"SLURM_STEP_NODELIST", "node[01-02]"},
                              {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                              {"SLURMD_NODENAME", "node02"}};
const Vars kTorchrunMultiNodeWorker3 = {{"RANK", "3"},
                                        {"GROUP_RANK", "1"},
                                        {"LOCAL_RANK", "1"},
                                        {"WORLD_SIZE", "4"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"GROUP_WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "node01.cluster"},
                                        {"MASTER_PORT", "44817"},
                                        {"TORCHELASTIC_RUN_ID", "4242"},
                                        {"TORCHELASTIC_RESTART_COUNT", "0"},
                                        {"TORCHELASTIC_MAX_RESTARTS", "0"},
                                        {"TORCHELASTIC_USE_AGENT_STORE", "True"}};

struct Expected {
  LaunchKind kind;
  std::string launcher;
  int rank, size, local_rank, local_size;
  std::string host = "";
  int port = 0;
  std::string job_id = "", step_id = "", nodelist = "", node_name = "";
  std::string note = "";  // a part of the note; "" for no note
};

struct EnvCase {
  std::string name;
  Vars vars;
  MpiFlavor mpi;
  Expected want;
};

void PrintTo(const EnvCase& c, std::ostream* os) { *os << c.name; }

class RealEnvironment : public testing::TestWithParam<EnvCase> {};

TEST_P(RealEnvironment, DecidesTheLaunch) {
  const EnvCase& c = GetParam();
  const Launch got = decide(c.vars, c.mpi);
  const Expected& want = c.want;
  EXPECT_EQ(launch_kind_name(got.kind), std::string(launch_kind_name(want.kind)));
  EXPECT_EQ(got.launcher, want.launcher);
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.size, want.size);
  EXPECT_EQ(got.local_rank, want.local_rank);
  EXPECT_EQ(got.local_size, want.local_size);
  EXPECT_EQ(got.rendezvous_host, want.host);
  EXPECT_EQ(got.rendezvous_port, want.port);
  EXPECT_EQ(got.rendezvous_timeout, std::chrono::seconds(60));
  EXPECT_EQ(got.slurm_job_id, want.job_id);
  EXPECT_EQ(got.slurm_step_id, want.step_id);
  EXPECT_EQ(got.slurm_nodelist, want.nodelist);
  EXPECT_EQ(got.slurm_node_name, want.node_name);
  if (want.note.empty())
    EXPECT_EQ(got.note, "");
  else
    EXPECT_NE(got.note.find(want.note), std::string::npos) << got.note;
}

// Slurm's job 4242 step 0 derives port 26019, job 77001 step 2 port 27510 (FNV-1a of
// "4242.0" and "77001.2", computed apart from the code).
INSTANTIATE_TEST_SUITE_P(
    Launchers, RealEnvironment,
    testing::Values(
        EnvCase{"HydraMpiexec",
                kHydra,
                MpiFlavor::kMpich,
                {LaunchKind::kMpi, "mpiexec (Hydra, PMI-1)", 1, 2, 1, 2}},
        EnvCase{"OpenMpiMpirun",
                kOmpiMpirun,
                MpiFlavor::kOpenMpi,
                {LaunchKind::kMpi, "mpirun (Open MPI, PMIx)", 1, 2, 1, 2}},
        EnvCase{"SrunPmi2WithMpich",
                merged({kSrunStepTask2, kPmi2Task2}),
                MpiFlavor::kMpich,
                {LaunchKind::kMpi, "srun --mpi=pmi2", 2, 4, 0, 2, "", 0, "4242", "0", "node[01-02]",
                 "node02"}},
        EnvCase{"SrunPmixWithOpenMpi",
                merged({kSrunStepTask2, kPmixTask2}),
                MpiFlavor::kOpenMpi,
                {LaunchKind::kMpi, "srun --mpi=pmix", 2, 4, 0, 2, "", 0, "4242", "0", "node[01-02]",
                 "node02"}},
        EnvCase{"SrunPmixWithMpichRunsOverSlurm",
                merged({kSrunStepTask2, kPmixTask2}),
                MpiFlavor::kMpich,
                {LaunchKind::kSlurm, "srun --mpi=pmix (Slurm environment)", 2, 4, 0, 2, "node01",
                 26019, "4242", "0", "node[01-02]", "node02",
                 "srun --mpi=pmix: MPICH here speaks no PMIx, so the mpi backend is not "
                 "available; running over Slurm's environment with gloo/nccl"}},
        EnvCase{
            "SrunPmi2WithOpenMpiRunsOverSlurm",
            merged({kSrunStepTask2, kPmi2Task2}),
            MpiFlavor::kOpenMpi,
            {LaunchKind::kSlurm, "srun --mpi=pmi2 (Slurm environment)", 2, 4, 0, 2, "node01", 26019,
             "4242", "0", "node[01-02]", "node02", "Open MPI here speaks no PMI-1/PMI-2"}},
        EnvCase{"SrunPmi2WithoutMpiRunsOverSlurm",
                merged({kSrunStepTask2, kPmi2Task2}),
                MpiFlavor::kNone,
                {LaunchKind::kSlurm, "srun --mpi=pmi2 (Slurm environment)", 2, 4, 0, 2, "node01",
                 26019, "4242", "0", "node[01-02]", "node02", "built without MPI"}},
        EnvCase{"SrunMpiNone",
                kSrunNoneTask0,
                MpiFlavor::kMpich,
                {LaunchKind::kSlurm, "srun (Slurm environment)", 0, 5, 0, 2, "gpu-a1", 27510,
                 "77001", "2", "gpu-a[1-2],gpu-b7", "gpu-a1"}},
        EnvCase{
            "SrunMpiNoneLastNode",
            merged({kSrunNoneTask0,
                    {{"SLURM_PROCID", "4"}, {"SLURM_NODEID", "2"}, {"SLURMD_NODENAME", "gpu-b7"}}}),
            MpiFlavor::kMpich,
            {LaunchKind::kSlurm, "srun (Slurm environment)", 4, 5, 0, 1, "gpu-a1", 27510, "77001",
             "2", "gpu-a[1-2],gpu-b7", "gpu-b7"}},
        EnvCase{"SbatchBatchShell",
                kSbatchShell,
                MpiFlavor::kMpich,
                {LaunchKind::kSingle, "single process", 0, 1, 0, 1, "", 0, "200505", "",
                 "gnode[10,20,25,37]", "gnode10"}},
        EnvCase{"TorchrunTwoProcesses",
                kTorchrunWorker1,
                MpiFlavor::kMpich,
                {LaunchKind::kTorchrun, "torchrun environment", 1, 2, 1, 2, "127.0.0.1", 29501}},
        EnvCase{"KubeflowPyTorchJob",
                kPyTorchJobWorker0,
                MpiFlavor::kMpich,
                {LaunchKind::kTorchrun, "RANK/WORLD_SIZE environment (PyTorchJob)", 1, 3, -1, -1,
                 "pytorch-simple-master-0", 23456}},
        // Hydra's mpiexec in the batch script: the ranks inherit the shell's SLURM_*.
        EnvCase{"MpiexecInsideSbatch",
                merged({kSbatchShell, kHydra}),
                MpiFlavor::kMpich,
                {LaunchKind::kMpi, "mpiexec (Hydra, PMI-1)", 1, 2, 1, 2, "", 0, "200505", "",
                 "gnode[10,20,25,37]", "gnode10"}},
        EnvCase{"TorchrunInsideSrunStep",
                merged({kSrunAgentTask1, kTorchrunMultiNodeWorker3}),
                MpiFlavor::kMpich,
                {LaunchKind::kTorchrun, "torchrun environment", 3, 4, 1, 2, "node01.cluster", 44818,
                 "4242", "3", "node[01-02]", "node02"}},
        // The same under a cluster's MpiDefault=pmi2: the agent's PMI variables reach the
        // workers, who are still torchrun's.
        EnvCase{
            "TorchrunInsideSrunPmi2Step",
            merged(
                {kSrunAgentTask1,
                 kTorchrunMultiNodeWorker3,
                 {{"PMI_FD", "6"}, {"PMI_JOBID", "4242.3"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}}),
            MpiFlavor::kMpich,
            {LaunchKind::kTorchrun, "torchrun environment", 3, 4, 1, 2, "node01.cluster", 44818,
             "4242", "3", "node[01-02]", "node02"}},
        // mpiexec run inside a PyTorchJob's pod: the pod's RANK/WORLD_SIZE reach the ranks.
        EnvCase{"MpiexecInsidePyTorchJobPod",
                merged({kPyTorchJobWorker0, kHydra}),
                MpiFlavor::kMpich,
                {LaunchKind::kMpi, "mpiexec (Hydra, PMI-1)", 1, 2, 1, 2}},
        // Another MPI (Intel MPI, Cray MPICH): its launcher is trusted; PMIx outside Slurm
        // gives no size.
        EnvCase{"OtherMpiUnderPmix",
                {{"PMIX_NAMESPACE", "prterun-host-1234@1"}, {"PMIX_RANK", "3"}},
                MpiFlavor::kOther,
                {LaunchKind::kMpi, "PMIx launcher", 3, -1, -1, -1}},
        EnvCase{
            "Nothing", {}, MpiFlavor::kMpich, {LaunchKind::kSingle, "single process", 0, 1, 0, 1}},
        EnvCase{"EmptyValuesAreUnset",
                {{"RANK", ""}, {"WORLD_SIZE", ""}, {"PMI_RANK", ""}, {"SLURM_STEP_ID", ""}},
                MpiFlavor::kMpich,
                {LaunchKind::kSingle, "single process", 0, 1, 0, 1}}),
    [](const testing::TestParamInfo<EnvCase>& info) { return info.param.name; });

// ---- Refusals: one line naming the variable ----

struct RefusalCase {
  std::string name;
  Vars vars;
  MpiFlavor mpi;
  std::string message;  // a part of the message
};

void PrintTo(const RefusalCase& c, std::ostream* os) { *os << c.name; }

class Refused : public testing::TestWithParam<RefusalCase> {};

TEST_P(Refused, NamesTheVariable) {
  const RefusalCase& c = GetParam();
  const std::string got = refusal(c.vars, c.mpi);
  EXPECT_NE(got.find(c.message), std::string::npos) << "got: \"" << got << "\"";
  EXPECT_EQ(got.find('\n'), std::string::npos) << got;
}

const Vars kSrunPmix = merged({kSrunStepTask2, kPmixTask2});

INSTANTIATE_TEST_SUITE_P(
    Environments, Refused,
    testing::Values(
        // MPI launchers.
        RefusalCase{"PmiRankWithoutSize", without(kHydra, {"PMI_SIZE"}), MpiFlavor::kMpich,
                    "PMI_RANK is set (an MPI launcher's PMI wire-up) but PMI_SIZE is not"},
        RefusalCase{"PmiFdWithoutRank",
                    {{"PMI_FD", "5"}},
                    MpiFlavor::kMpich,
                    "PMI_FD is set (an MPI launcher's PMI wire-up) but PMI_RANK is not"},
        RefusalCase{"PmiWithoutFdOrPortForMpich", without(kHydra, {"PMI_FD"}), MpiFlavor::kMpich,
                    "but neither PMI_FD nor PMI_PORT is"},
        RefusalCase{"PmiRankNotBelowSize", merged({kHydra, {{"PMI_RANK", "2"}}}), MpiFlavor::kMpich,
                    "PMI_RANK=2 is not below PMI_SIZE=2"},
        RefusalCase{"PmiSizeNotANumber", merged({kHydra, {{"PMI_SIZE", "two"}}}), MpiFlavor::kMpich,
                    "PMI_SIZE=two is not a number"},
        RefusalCase{"OmpiRankWithoutSize", without(kOmpiMpirun, {"OMPI_COMM_WORLD_SIZE"}),
                    MpiFlavor::kOpenMpi, "but OMPI_COMM_WORLD_SIZE is not"},
        RefusalCase{"OmpiLocalRankNotBelowLocalSize",
                    merged({kOmpiMpirun, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}}),
                    MpiFlavor::kOpenMpi,
                    "OMPI_COMM_WORLD_LOCAL_RANK=1 is not below OMPI_COMM_WORLD_LOCAL_SIZE=1"},
        RefusalCase{"PmixRankWithoutNamespace",
                    {{"PMIX_RANK", "0"}},
                    MpiFlavor::kOpenMpi,
                    "PMIX_RANK is set (a PMIx launcher) but PMIX_NAMESPACE is not"},
        RefusalCase{"MpirunForMpich", kOmpiMpirun, MpiFlavor::kMpich,
                    "mpirun (Open MPI, PMIx) started this process (OMPI_COMM_WORLD_RANK is "
                    "set) and speaks PMIx, which this ccscope's MPI (MPICH) does not"},
        RefusalCase{"PmixWithoutSlurmForMpich", without(kPmixTask2, {}), MpiFlavor::kMpich,
                    "(PMIX_RANK is set) and speaks PMIx, which this ccscope's MPI (MPICH) "
                    "does not: start it with MPICH's mpiexec or srun --mpi=pmi2"},
        // A PMIx launcher inside a step whose namespace is not srun's for this step.
        RefusalCase{
            "ForeignPmixInsideStepForMpich",
            merged({kSrunStepTask2, {{"PMIX_NAMESPACE", "prterun-x@1"}, {"PMIX_RANK", "0"}}}),
            MpiFlavor::kMpich, "which this ccscope's MPI (MPICH) does not"},
        RefusalCase{"HydraForOpenMpi", kHydra, MpiFlavor::kOpenMpi,
                    "speaks PMI-1/PMI-2, which this ccscope's MPI (Open MPI) does not"},
        RefusalCase{"HydraWithoutMpi", kHydra, MpiFlavor::kNone,
                    "(PMI_RANK is set) but this ccscope is built without MPI"},
        RefusalCase{"SrunPmixForMpichWithoutProcid", without(kSrunPmix, {"SLURM_PROCID"}),
                    MpiFlavor::kMpich,
                    "SLURM_STEP_ID is set (a Slurm job step) but "
                    "SLURM_PROCID is not"},
        // torchrun and Kubernetes.
        RefusalCase{"RankWithoutWorldSize", without(kPyTorchJobWorker0, {"WORLD_SIZE"}),
                    MpiFlavor::kMpich,
                    "RANK is set (torchrun/Kubernetes launch) but WORLD_SIZE is not"},
        RefusalCase{"WorldSizeWithoutRank", without(kPyTorchJobWorker0, {"RANK"}),
                    MpiFlavor::kMpich,
                    "WORLD_SIZE is set (torchrun/Kubernetes launch) but RANK is not"},
        RefusalCase{"RankWithoutMasterAddr", without(kPyTorchJobWorker0, {"MASTER_ADDR"}),
                    MpiFlavor::kMpich,
                    "RANK is set (torchrun/Kubernetes launch) but MASTER_ADDR is not: "},
        RefusalCase{"RankWithoutMasterPort", without(kPyTorchJobWorker0, {"MASTER_PORT"}),
                    MpiFlavor::kMpich,
                    "RANK is set (torchrun/Kubernetes launch) but MASTER_PORT is not"},
        RefusalCase{"TorchrunWorkerWithoutRank", without(kTorchrunWorker1, {"RANK"}),
                    MpiFlavor::kMpich,
                    "TORCHELASTIC_RUN_ID is set (a torchrun worker) but RANK is not"},
        RefusalCase{"RankNotANumber", merged({kPyTorchJobWorker0, {{"RANK", "one"}}}),
                    MpiFlavor::kMpich, "RANK=one is not a number"},
        RefusalCase{"RankNegative", merged({kPyTorchJobWorker0, {{"RANK", "-1"}}}),
                    MpiFlavor::kMpich, "RANK=-1 is out of range"},
        RefusalCase{"RankNotBelowWorldSize", merged({kPyTorchJobWorker0, {{"RANK", "3"}}}),
                    MpiFlavor::kMpich, "RANK=3 is not below WORLD_SIZE=3"},
        RefusalCase{"WorldSizeZero", merged({kPyTorchJobWorker0, {{"WORLD_SIZE", "0"}}}),
                    MpiFlavor::kMpich, "WORLD_SIZE=0 is out of range"},
        RefusalCase{"MasterPortZero", merged({kPyTorchJobWorker0, {{"MASTER_PORT", "0"}}}),
                    MpiFlavor::kMpich, "MASTER_PORT=0 is out of range (1..65535)"},
        RefusalCase{"MasterPortTooHigh", merged({kPyTorchJobWorker0, {{"MASTER_PORT", "65536"}}}),
                    MpiFlavor::kMpich, "MASTER_PORT=65536 is out of range (1..65535)"},
        RefusalCase{"LocalRankNotBelowLocalWorldSize",
                    merged({kTorchrunWorker1, {{"LOCAL_WORLD_SIZE", "1"}}}), MpiFlavor::kMpich,
                    "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1"},
        RefusalCase{"LocalWorldSizeAboveWorldSize",
                    merged({kTorchrunWorker1, {{"LOCAL_WORLD_SIZE", "3"}}}), MpiFlavor::kMpich,
                    "LOCAL_WORLD_SIZE=3 is out of range (1..2)"},
        RefusalCase{"AgentStoreOnTheLastPort",
                    merged({kTorchrunWorker1, {{"MASTER_PORT", "65535"}}}), MpiFlavor::kMpich,
                    "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's store holds "
                    "MASTER_PORT=65535"},
        // Slurm steps.
        RefusalCase{"StepWithoutStepId", without(kSrunNoneTask0, {"SLURM_STEP_ID", "SLURM_STEPID"}),
                    MpiFlavor::kMpich,
                    "SLURM_STEP_NUM_TASKS is set (a Slurm job step) but SLURM_STEP_ID is not"},
        RefusalCase{"StepWithoutJobId", without(kSrunNoneTask0, {"SLURM_JOB_ID"}),
                    MpiFlavor::kMpich, "but SLURM_JOB_ID is not"},
        RefusalCase{"StepWithoutNumTasks", without(kSrunNoneTask0, {"SLURM_STEP_NUM_TASKS"}),
                    MpiFlavor::kMpich, "but SLURM_STEP_NUM_TASKS is not"},
        RefusalCase{"StepWithoutLocalId", without(kSrunNoneTask0, {"SLURM_LOCALID"}),
                    MpiFlavor::kMpich, "but SLURM_LOCALID is not"},
        RefusalCase{"StepWithoutNodeId", without(kSrunNoneTask0, {"SLURM_NODEID"}),
                    MpiFlavor::kMpich, "but SLURM_NODEID is not"},
        RefusalCase{"StepWithoutNodelist", without(kSrunNoneTask0, {"SLURM_STEP_NODELIST"}),
                    MpiFlavor::kMpich, "but SLURM_STEP_NODELIST is not"},
        RefusalCase{"StepWithoutTasksPerNode",
                    without(kSrunNoneTask0, {"SLURM_STEP_TASKS_PER_NODE"}), MpiFlavor::kMpich,
                    "but SLURM_STEP_TASKS_PER_NODE is not"},
        RefusalCase{"StepIdNotANumber", merged({kSrunNoneTask0, {{"SLURM_STEP_ID", "x"}}}),
                    MpiFlavor::kMpich, "SLURM_STEP_ID=x is not a number"},
        RefusalCase{"ProcidNotBelowNumTasks", merged({kSrunNoneTask0, {{"SLURM_PROCID", "5"}}}),
                    MpiFlavor::kMpich, "SLURM_PROCID=5 is not below SLURM_STEP_NUM_TASKS=5"},
        RefusalCase{"TasksPerNodeDisagreesWithNumTasks",
                    merged({kSrunNoneTask0, {{"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}}}),
                    MpiFlavor::kMpich,
                    "SLURM_STEP_TASKS_PER_NODE=2(x3) adds up to 6 tasks, not "
                    "SLURM_STEP_NUM_TASKS=5"},
        RefusalCase{"TasksPerNodeMalformed",
                    merged({kSrunNoneTask0, {{"SLURM_STEP_TASKS_PER_NODE", "2(y2),1"}}}),
                    MpiFlavor::kMpich, "SLURM_STEP_TASKS_PER_NODE: malformed tasks per node"},
        RefusalCase{"NodelistDisagreesWithTasksPerNode",
                    merged({kSrunNoneTask0, {{"SLURM_STEP_NODELIST", "gpu-a[1-3],gpu-b7"}}}),
                    MpiFlavor::kMpich,
                    "SLURM_STEP_NODELIST=gpu-a[1-3],gpu-b7 names 4 nodes but "
                    "SLURM_STEP_TASKS_PER_NODE=2(x2),1 gives tasks to 3"},
        RefusalCase{"NodelistMalformed",
                    merged({kSrunNoneTask0, {{"SLURM_STEP_NODELIST", "gpu-a[1-2,gpu-b7"}}}),
                    MpiFlavor::kMpich, "SLURM_STEP_NODELIST: malformed host list"},
        RefusalCase{"NodeIdPastTheNodes", merged({kSrunNoneTask0, {{"SLURM_NODEID", "3"}}}),
                    MpiFlavor::kMpich, "SLURM_NODEID=3 is not below the 3 nodes"},
        RefusalCase{"LocalIdPastTheNodesTasks",
                    merged({kSrunNoneTask0,
                            {{"SLURM_PROCID", "4"},
                             {"SLURM_NODEID", "2"},
                             {"SLURM_LOCALID", "1"},
                             {"SLURMD_NODENAME", "gpu-b7"}}}),
                    MpiFlavor::kMpich,
                    "SLURM_LOCALID=1 is not below the 1 tasks SLURM_STEP_TASKS_PER_NODE=2(x2),1 "
                    "gives node SLURM_NODEID=2"},
        // srun --distribution=arbitrary put task 0 on the third node.
        RefusalCase{"TaskZeroOffTheFirstNode",
                    merged({kSrunNoneTask0,
                            {{"SLURM_NODEID", "2"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_STEP_TASKS_PER_NODE", "2,2,1"},
                             {"SLURMD_NODENAME", "gpu-b7"}}}),
                    MpiFlavor::kMpich,
                    "SLURM_PROCID=0 runs on SLURMD_NODENAME=gpu-b7, not on the first node of "
                    "SLURM_STEP_NODELIST=gpu-a[1-2],gpu-b7 (gpu-a1)"},
        // ccscope's own, whatever the kind.
        RefusalCase{"TimeoutZero",
                    {{"CCSCOPE_RENDEZVOUS_TIMEOUT", "0"}},
                    MpiFlavor::kMpich,
                    "CCSCOPE_RENDEZVOUS_TIMEOUT=0 is out of range"},
        RefusalCase{"TimeoutNotANumber",
                    {{"CCSCOPE_RENDEZVOUS_TIMEOUT", "60s"}},
                    MpiFlavor::kMpich,
                    "CCSCOPE_RENDEZVOUS_TIMEOUT=60s is not a number"},
        RefusalCase{"PortOverrideOutOfRange",
                    merged({kHydra, {{"CCSCOPE_RENDEZVOUS_PORT", "70000"}}}), MpiFlavor::kMpich,
                    "CCSCOPE_RENDEZVOUS_PORT=70000 is out of range (1..65535)"}),
    [](const testing::TestParamInfo<RefusalCase>& info) { return info.param.name; });

// ---- Overrides and the rest ----

TEST(Launch, RendezvousPortOverrideWinsInEveryEnvRendezvousKind) {
  const Vars port = {{"CCSCOPE_RENDEZVOUS_PORT", "31000"}};
  EXPECT_EQ(decide(merged({kSrunNoneTask0, port}), MpiFlavor::kMpich).rendezvous_port, 31000);
  EXPECT_EQ(decide(merged({kTorchrunWorker1, port}), MpiFlavor::kMpich).rendezvous_port, 31000);
  EXPECT_EQ(decide(merged({kPyTorchJobWorker0, port}), MpiFlavor::kMpich).rendezvous_port, 31000);
  EXPECT_EQ(decide(merged({kSrunPmix, port}), MpiFlavor::kMpich).rendezvous_port, 31000);
  // MPI wires up itself.
  EXPECT_EQ(decide(merged({kHydra, port}), MpiFlavor::kMpich).rendezvous_port, 0);
}

TEST(Launch, RendezvousHostOverride) {
  const Vars host = {{"CCSCOPE_RENDEZVOUS_HOST", "10.1.0.7"}};
  EXPECT_EQ(decide(merged({kSrunNoneTask0, host}), MpiFlavor::kMpich).rendezvous_host, "10.1.0.7");
  EXPECT_EQ(decide(merged({kTorchrunWorker1, host}), MpiFlavor::kMpich).rendezvous_host,
            "10.1.0.7");
  // Task 0 off the first node is then fine.
  const Vars arbitrary = merged({kSrunNoneTask0,
                                 host,
                                 {{"SLURM_NODEID", "2"},
                                  {"SLURM_STEP_TASKS_PER_NODE", "2,2,1"},
                                  {"SLURMD_NODENAME", "gpu-b7"}}});
  EXPECT_EQ(decide(arbitrary, MpiFlavor::kMpich).rendezvous_host, "10.1.0.7");
}

TEST(Launch, AgentStoreOffLeavesMasterPortToRankZero) {
  const Vars off = merged({kTorchrunWorker1, {{"TORCHELASTIC_USE_AGENT_STORE", "False"}}});
  EXPECT_EQ(decide(off, MpiFlavor::kMpich).rendezvous_port, 29500);
}

TEST(Launch, RendezvousTimeout) {
  EXPECT_EQ(
      decide(merged({kSrunNoneTask0, {{"CCSCOPE_RENDEZVOUS_TIMEOUT", "300"}}}), MpiFlavor::kMpich)
          .rendezvous_timeout,
      std::chrono::seconds(300));
  EXPECT_EQ(decide({}, MpiFlavor::kMpich).rendezvous_timeout, std::chrono::seconds(60));
}

TEST(Launch, SlurmSpecialStepsAreNoJobStep) {
  // The batch script (0xfffffffb), extern (0xfffffffc) and interactive (0xfffffffa) steps,
  // as a Slurm printing them with %d (src/common/env.c setup_env) or %u would.
  for (const char* id : {"-5", "-4", "-6", "4294967291", "4294967290"}) {
    const Launch got = decide(merged({kSbatchShell, {{"SLURM_STEP_ID", id}}}), MpiFlavor::kMpich);
    EXPECT_EQ(got.kind, LaunchKind::kSingle) << id;
    EXPECT_EQ(got.slurm_step_id, id);
  }
}

TEST(Launch, SlurmRendezvousPortIsAStableHashInItsRange) {
  EXPECT_EQ(slurm_rendezvous_port("4242", "0"), 26019);
  EXPECT_EQ(slurm_rendezvous_port("4242", "1"), 28400);
  for (int step = 0; step < 200; ++step) {
    const int port = slurm_rendezvous_port("123456", std::to_string(step));
    EXPECT_GE(port, 20000);
    EXPECT_LE(port, 29999);
  }
}

TEST(Launch, KindAndFlavorNames) {
  EXPECT_STREQ(launch_kind_name(LaunchKind::kSingle), "single");
  EXPECT_STREQ(launch_kind_name(LaunchKind::kMpi), "mpi");
  EXPECT_STREQ(launch_kind_name(LaunchKind::kSlurm), "slurm");
  EXPECT_STREQ(launch_kind_name(LaunchKind::kTorchrun), "torchrun");
  EXPECT_STREQ(mpi_flavor_name(MpiFlavor::kMpich), "MPICH");
  EXPECT_STREQ(mpi_flavor_name(MpiFlavor::kOpenMpi), "Open MPI");
}

// ---- MPI_Get_library_version ----

TEST(MpiFlavor, FromRealVersionStrings) {
  // MPI_Get_library_version of Debian's MPICH 4.0.2 and Open MPI 4.1.4 on this machine
  // (the MPICH text goes on with its configure line and compilers).
  EXPECT_EQ(mpi_flavor_from_version("MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 "
                                    "12:34:45 CDT 2022\nMPICH ABI:\t14:2:2\nMPICH "
                                    "Device:\tch4:ucx\n"),
            MpiFlavor::kMpich);
  EXPECT_EQ(mpi_flavor_from_version("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, "
                                    "repo rev: v4.1.4, May 26, 2022"),
            MpiFlavor::kOpenMpi);
  EXPECT_EQ(mpi_flavor_from_version("Intel(R) MPI Library 2021.10 for Linux* OS\n"),
            MpiFlavor::kOther);
  EXPECT_EQ(mpi_flavor_from_version("MPI VERSION    : CRAY MPICH version 8.1.28.2 (ANL base "
                                    "3.4a2)\n"),
            MpiFlavor::kOther);
  EXPECT_EQ(mpi_flavor_from_version(""), MpiFlavor::kNone);
}

// ---- Slurm's host lists ----

using Hosts = std::vector<std::string>;

TEST(SlurmHostlist, RangesAndSingleNumbersInOneBracket) {
  EXPECT_EQ(expand_slurm_hostlist("node[01-03,7],gpu-a[1-2]"),
            (Hosts{"node01", "node02", "node03", "node7", "gpu-a1", "gpu-a2"}));
}

TEST(SlurmHostlist, ZeroPaddingKeepsTheWrittenWidth) {
  const Hosts hosts = expand_slurm_hostlist("node[01-10]");
  ASSERT_EQ(hosts.size(), 10u);
  EXPECT_EQ(hosts.front(), "node01");
  EXPECT_EQ(hosts[8], "node09");
  EXPECT_EQ(hosts.back(), "node10");
  EXPECT_EQ(expand_slurm_hostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_slurm_hostlist("n[007-009]"), (Hosts{"n007", "n008", "n009"}));
}

TEST(SlurmHostlist, SeveralBracketGroupsLeftmostOutermost) {
  EXPECT_EQ(expand_slurm_hostlist("rack[1-2]-node[01-02]"),
            (Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}));
  EXPECT_EQ(expand_slurm_hostlist("n[1-2]-ib"), (Hosts{"n1-ib", "n2-ib"}));
}

TEST(SlurmHostlist, CommasOutsideBrackets) {
  EXPECT_EQ(expand_slurm_hostlist("login"), (Hosts{"login"}));
  EXPECT_EQ(expand_slurm_hostlist("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand_slurm_hostlist("gnode[10,20,25,37]"),
            (Hosts{"gnode10", "gnode20", "gnode25", "gnode37"}));
  EXPECT_EQ(expand_slurm_hostlist("x,n[3-4],y"), (Hosts{"x", "n3", "n4", "y"}));
}

TEST(SlurmHostlist, MalformedIsRefused) {
  for (const char* bad : {"", "node[1-3", "node1-3]", "node[]", "node[3-1]", "node[a-b]",
                          "node[1-]", "node[-2]", "node[1--2]", "a,,b", ",a", "a,", "n[[1]]",
                          "n[1]]", "node[1-2] x", "n[0-99999999]", "n[1,,2]"}) {
    EXPECT_THROW(expand_slurm_hostlist(bad), UsageError) << "\"" << bad << "\"";
  }
}

TEST(SlurmTasksPerNode, Expands) {
  EXPECT_EQ(expand_slurm_tasks_per_node("2(x2),1"), (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(expand_slurm_tasks_per_node("1(x4)"), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("3,1(x2),2"), (std::vector<int>{3, 1, 1, 2}));
}

TEST(SlurmTasksPerNode, MalformedIsRefused) {
  for (const char* bad :
       {"", "2(x)", "2(x0)", "x2", "2,,1", "2(y2)", "-1", "2(x2", "(x2)", "2(x-1)", "2,"}) {
    EXPECT_THROW(expand_slurm_tasks_per_node(bad), UsageError) << "\"" << bad << "\"";
  }
}

TEST(FinalizeBound, TheVariableSetsSecondsAndAnythingElseKeepsTheStandardBoundWithOneLine) {
  const std::chrono::milliseconds standard{15000};
  std::string problem;
  EXPECT_EQ(finalize_bound_from(nullptr, standard, problem), standard);
  EXPECT_EQ(problem, "");
  EXPECT_EQ(finalize_bound_from("", standard, problem), standard);
  EXPECT_EQ(finalize_bound_from("3", standard, problem), std::chrono::milliseconds(3000));
  EXPECT_EQ(problem, "");
  EXPECT_EQ(finalize_bound_from("0.25", standard, problem), std::chrono::milliseconds(250));
  EXPECT_EQ(finalize_bound_from("3600", standard, problem), std::chrono::milliseconds(3600000));
  for (const char* bad : {"abc", "3s", "0", "-1", "3601", "nan", " "}) {
    EXPECT_EQ(finalize_bound_from(bad, standard, problem), standard) << bad;
    EXPECT_NE(problem.find(std::string("CCSCOPE_FINALIZE_TIMEOUT_S='") + bad + "'"),
              std::string::npos)
        << problem;
    EXPECT_NE(problem.find("keeps its 15 s bound"), std::string::npos) << problem;
  }
  // A good value after a bad one clears the problem.
  EXPECT_EQ(finalize_bound_from("1", standard, problem), std::chrono::milliseconds(1000));
  EXPECT_EQ(problem, "");
}

}  // namespace
}  // namespace ccscope::job
