/*
 * The NVML stand-in: libnvidia-ml.so.1 for tests (standin/nvml/README.md). It
 * exports the NVML entry points ccscope reads (topo's read_nvml and the
 * driver-version query of collectives/src/gpu_driver.cpp) and answers them
 * from a text file describing the GPUs of one machine, so that the dlopen path
 * runs on machines without the NVIDIA driver. Built as
 * build/standin/lib/libnvidia-ml.so.1 (never installed): a process finds it
 * through LD_LIBRARY_PATH, or by its path ($CCSCOPE_NVML_LIBRARY, dlopen).
 *
 * nvmlInit_v2 reads the file named by $CCSCOPE_STANDIN_NVML, or by its older
 * name $CCSCOPE_FAKE_NVML_CONFIG; both set to different files is refused.
 * Neither set: nvmlInit_v2 fails (NVML_ERROR_UNKNOWN, nvmlErrorString says
 * so), which a reader takes as a machine whose NVML does not start. Machines
 * to point it at: the .conf files of standin/nvml/machines/.
 *
 * One item a line; '#' starts a comment; "-" as a figure makes its query
 * answer NVML_ERROR_NOT_SUPPORTED. GPUs are numbered in the order of their gpu
 * lines, from 0. Where a line below says <gpus> or <links>, a range "a-b"
 * (both ends included) stands for every index in it.
 */
/* clang-format off */
/*
 *   driver <version text>             nvmlSystemGetDriverVersion
 *   cuda <int, 13000 = 13.0>          nvmlSystemGetCudaDriverVersion
 *   gpu <bus id> <uuid> <cur gen> <max gen> <cur width> <max width> <cc major> <cc minor> <name...>
 *   nvlink <gpus> <links> <active 0|1> <nvmlNvlinkVersion_t value> <remote bus id|-> <gpu|switch|unknown>
 *   ancestor <gpus> <gpus> <nvmlGpuTopologyLevel_t value>   (every pair of two different GPUs)
 *   lost <gpu>                        nvmlDeviceGetHandleByIndex_v2 answers NVML_ERROR_GPU_IS_LOST
 *   missing <function>                it answers NVML_ERROR_FUNCTION_NOT_FOUND
 *   fail_init                         nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED
 */
/* clang-format on */
/*
 * A GPU with nvlink lines has 18 links (0..17; 18 and above are an invalid
 * argument); its links without a line are down and lead nowhere. A GPU
 * without any answers NVML_ERROR_NOT_SUPPORTED. For a link or a pair given
 * twice the later line wins. nvlink and ancestor lines name GPUs by index:
 * they follow the gpu lines they name. A missing or malformed file makes
 * nvmlInit_v2 fail (NVML_ERROR_UNKNOWN, nvmlErrorString says why).
 *
 * Types and codes as in NVIDIA's nvml.h (NVML 13.3); enums are C ints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

#define NVLINK_DEVICE_TYPE_GPU 0x00
#define NVLINK_DEVICE_TYPE_SWITCH 0x02
#define NVLINK_DEVICE_TYPE_UNKNOWN 0xFF

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

#define FAKE_MAX_GPUS 16
#define FAKE_LINKS 18
#define FAKE_MAX_MISSING 16
#define FAKE_TEXT 96

struct fake_link {
  int configured;
  int active;
  int version; /* -1: not supported */
  char remote[32];
  int remote_type;
};

/* A device handle points at one of these. */
struct nvmlDevice_st {
  char bus_id[32];
  char uuid[FAKE_TEXT];
  char name[FAKE_TEXT];
  int current_generation, max_generation, current_width, max_width; /* -1: not supported */
  int cc_major, cc_minor;
  int has_nvlink;
  int lost;
  struct fake_link links[FAKE_LINKS];
};
typedef struct nvmlDevice_st* nvmlDevice_t;

static struct {
  int init_count; /* NVML counts nvmlInit_v2 calls; the last nvmlShutdown ends the session */
  char driver[80];
  int cuda;
  unsigned gpu_count;
  struct nvmlDevice_st gpus[FAKE_MAX_GPUS];
  int ancestor[FAKE_MAX_GPUS][FAKE_MAX_GPUS]; /* level + 1 of a pair, both ways; 0: none given */
  unsigned missing_count;
  char missing[FAKE_MAX_MISSING][64];
  char error[512]; /* why the configuration could not be read */
} fake;

/* Not NVML: lets a test see that read_nvml shut NVML down. */
int ccscope_standin_nvml_init_count(void) { return fake.init_count; }

/* Cuts what does not fit: the file's texts are the test's, any length. */
static void copy_text(char* to, size_t size, const char* from) {
  size_t length = strlen(from);
  if (length >= size) length = size - 1;
  memcpy(to, from, length);
  to[length] = '\0';
}

/* A figure of the file: a decimal integer, or "-" for not supported (-1). */
static int parse_figure(const char* token, int* value) {
  char* end = NULL;
  long parsed;
  if (strcmp(token, "-") == 0) {
    *value = -1;
    return 1;
  }
  parsed = strtol(token, &end, 10);
  if (end == token || *end != '\0' || parsed < 0 || parsed > 100000) return 0;
  *value = (int)parsed;
  return 1;
}

static int parse_gpu_index(const char* token, unsigned* index) {
  int value = 0;
  if (!parse_figure(token, &value) || value < 0 || (unsigned)value >= fake.gpu_count) return 0;
  *index = (unsigned)value;
  return 1;
}

/* An index below `limit`, or a range "a-b" of them (a <= b), as [*first, *last]. */
static int parse_range(const char* token, unsigned limit, unsigned* first, unsigned* last) {
  char low[16];
  const char* dash = strchr(token, '-');
  int a = 0, b = 0;
  if (!dash) {
    if (!parse_figure(token, &a) || a < 0) return 0;
    b = a;
  } else {
    if (dash == token || (size_t)(dash - token) >= sizeof low) return 0;
    memcpy(low, token, (size_t)(dash - token));
    low[dash - token] = '\0';
    if (!parse_figure(low, &a) || !parse_figure(dash + 1, &b) || a < 0 || b < a) return 0;
  }
  if ((unsigned)b >= limit) return 0;
  *first = (unsigned)a;
  *last = (unsigned)b;
  return 1;
}

/* Reads one line of the file; 0 if it is malformed. Tokens are split in place. */
static int parse_line(char* line, int* fail_init) {
  char* tokens[12];
  size_t count = 0;
  char* rest = NULL; /* after the 9th token: a GPU's name, spaces and all */
  char* at = line;
  char* comment = strchr(line, '#');
  if (comment) *comment = '\0';
  while (count < 12) {
    while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r') ++at;
    if (*at == '\0') break;
    if (count == 9) rest = at;
    tokens[count++] = at;
    while (*at && *at != ' ' && *at != '\t' && *at != '\n' && *at != '\r') ++at;
    if (*at) *at++ = '\0';
  }
  if (count == 0) return 1;

  if (strcmp(tokens[0], "fail_init") == 0 && count == 1) {
    *fail_init = 1;
    return 1;
  }
  if (strcmp(tokens[0], "driver") == 0 && count == 2) {
    copy_text(fake.driver, sizeof fake.driver, tokens[1]);
    return 1;
  }
  if (strcmp(tokens[0], "cuda") == 0 && count == 2) return parse_figure(tokens[1], &fake.cuda);
  if (strcmp(tokens[0], "missing") == 0 && count == 2) {
    if (fake.missing_count >= FAKE_MAX_MISSING) return 0;
    copy_text(fake.missing[fake.missing_count++], sizeof fake.missing[0], tokens[1]);
    return 1;
  }
  if (strcmp(tokens[0], "gpu") == 0 && count >= 10) {
    struct nvmlDevice_st* gpu;
    char* end;
    if (fake.gpu_count >= FAKE_MAX_GPUS) return 0;
    gpu = &fake.gpus[fake.gpu_count];
    memset(gpu, 0, sizeof *gpu);
    copy_text(gpu->bus_id, sizeof gpu->bus_id, tokens[1]);
    copy_text(gpu->uuid, sizeof gpu->uuid, tokens[2]);
    if (!parse_figure(tokens[3], &gpu->current_generation) ||
        !parse_figure(tokens[4], &gpu->max_generation) ||
        !parse_figure(tokens[5], &gpu->current_width) ||
        !parse_figure(tokens[6], &gpu->max_width) || !parse_figure(tokens[7], &gpu->cc_major) ||
        !parse_figure(tokens[8], &gpu->cc_minor))
      return 0;
    /* The name runs to the end of the line: undo the splits after it. */
    for (end = rest; end < at; ++end)
      if (*end == '\0') *end = ' ';
    end = rest + strlen(rest);
    while (end > rest && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
      *--end = '\0';
    copy_text(gpu->name, sizeof gpu->name, rest);
    ++fake.gpu_count;
    return 1;
  }
  if (strcmp(tokens[0], "nvlink") == 0 && count == 7) {
    unsigned first_gpu = 0, last_gpu = 0, first_link = 0, last_link = 0, index, link;
    int active = 0, version = 0, remote_type;
    if (!parse_range(tokens[1], fake.gpu_count, &first_gpu, &last_gpu) ||
        !parse_range(tokens[2], FAKE_LINKS, &first_link, &last_link) ||
        !parse_figure(tokens[3], &active) || !parse_figure(tokens[4], &version))
      return 0;
    if (strcmp(tokens[6], "gpu") == 0)
      remote_type = NVLINK_DEVICE_TYPE_GPU;
    else if (strcmp(tokens[6], "switch") == 0)
      remote_type = NVLINK_DEVICE_TYPE_SWITCH;
    else if (strcmp(tokens[6], "unknown") == 0)
      remote_type = NVLINK_DEVICE_TYPE_UNKNOWN;
    else
      return 0;
    for (index = first_gpu; index <= last_gpu; ++index) {
      for (link = first_link; link <= last_link; ++link) {
        struct fake_link* entry = &fake.gpus[index].links[link];
        entry->configured = 1;
        entry->active = active == 1;
        entry->version = version;
        copy_text(entry->remote, sizeof entry->remote,
                  strcmp(tokens[5], "-") == 0 ? "" : tokens[5]);
        entry->remote_type = remote_type;
      }
      fake.gpus[index].has_nvlink = 1;
    }
    return 1;
  }
  if (strcmp(tokens[0], "lost") == 0 && count == 2) {
    unsigned index = 0;
    if (!parse_gpu_index(tokens[1], &index)) return 0;
    fake.gpus[index].lost = 1;
    return 1;
  }
  if (strcmp(tokens[0], "ancestor") == 0 && count == 4) {
    unsigned first_a = 0, last_a = 0, first_b = 0, last_b = 0, a, b;
    int level = 0;
    if (!parse_range(tokens[1], fake.gpu_count, &first_a, &last_a) ||
        !parse_range(tokens[2], fake.gpu_count, &first_b, &last_b) ||
        !parse_figure(tokens[3], &level) || level < 0)
      return 0;
    for (a = first_a; a <= last_a; ++a)
      for (b = first_b; b <= last_b; ++b)
        if (a != b) fake.ancestor[a][b] = fake.ancestor[b][a] = level + 1;
    return 1;
  }
  return 0;
}

/* The value of an environment variable, NULL when unset or empty. */
static const char* environment(const char* name) {
  const char* value = getenv(name);
  return value && *value ? value : NULL;
}

/* Loads the configuration; an NVML code, with fake.error set when it is not a success. */
static nvmlReturn_t load_config(void) {
  const char* path = environment("CCSCOPE_STANDIN_NVML");
  const char* old_name = environment("CCSCOPE_FAKE_NVML_CONFIG");
  char line[512];
  unsigned line_number = 0;
  int fail_init = 0;
  FILE* file;
  memset(&fake, 0, sizeof fake);
  if (path && old_name && strcmp(path, old_name) != 0) {
    snprintf(fake.error, sizeof fake.error,
             "NVML stand-in: CCSCOPE_STANDIN_NVML (%s) and its old name CCSCOPE_FAKE_NVML_CONFIG "
             "(%s) name different files: set one",
             path, old_name);
    return NVML_ERROR_UNKNOWN;
  }
  if (!path) path = old_name;
  if (!path) {
    copy_text(fake.error, sizeof fake.error,
              "NVML stand-in: CCSCOPE_STANDIN_NVML is not set (a machine file: "
              "standin/nvml/machines/*.conf)");
    return NVML_ERROR_UNKNOWN;
  }
  file = fopen(path, "r");
  if (!file) {
    snprintf(fake.error, sizeof fake.error, "NVML stand-in: cannot open %s", path);
    return NVML_ERROR_UNKNOWN;
  }
  while (fgets(line, sizeof line, file)) {
    ++line_number;
    if (!strchr(line, '\n') && !feof(file)) { /* longer than the buffer: not ours */
      snprintf(fake.error, sizeof fake.error, "NVML stand-in: %s:%u: line too long", path,
               line_number);
      fclose(file);
      return NVML_ERROR_UNKNOWN;
    }
    if (!parse_line(line, &fail_init)) {
      snprintf(fake.error, sizeof fake.error, "NVML stand-in: %s:%u: cannot read this line", path,
               line_number);
      fclose(file);
      return NVML_ERROR_UNKNOWN;
    }
  }
  fclose(file);
  return fail_init ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

static int is_missing(const char* function) {
  unsigned i;
  for (i = 0; i < fake.missing_count; ++i)
    if (strcmp(fake.missing[i], function) == 0) return 1;
  return 0;
}

/* Every query: NVML initialised, the function not declared missing. */
#define FAKE_ENTER()                                                \
  do {                                                              \
    if (fake.init_count == 0) return NVML_ERROR_UNINITIALIZED;      \
    if (is_missing(__func__)) return NVML_ERROR_FUNCTION_NOT_FOUND; \
  } while (0)

static struct nvmlDevice_st* gpu_of(nvmlDevice_t device) {
  unsigned i;
  for (i = 0; i < fake.gpu_count; ++i)
    if (device == &fake.gpus[i]) return device;
  return NULL;
}

static nvmlReturn_t write_text(char* to, unsigned length, const char* text) {
  if (!to) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(to, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

static nvmlReturn_t write_figure(unsigned* to, int figure) {
  if (!to) return NVML_ERROR_INVALID_ARGUMENT;
  if (figure < 0) return NVML_ERROR_NOT_SUPPORTED;
  *to = (unsigned)figure;
  return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t* pci, const char* bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  memset(pci, 0, sizeof *pci);
  copy_text(pci->busId, sizeof pci->busId, bus_id);
  if (sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4) {
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.%x", domain & 0xffff,
             bus & 0xff, device & 0x1f, function & 7);
  }
  pci->pciDeviceId = 0x233510DE;
}

/* The link of a GPU with NVLinks; NULL and *status set otherwise. */
static struct fake_link* link_of(nvmlDevice_t device, unsigned link, nvmlReturn_t* status) {
  struct nvmlDevice_st* gpu = gpu_of(device);
  if (!gpu || link >= FAKE_LINKS) {
    *status = NVML_ERROR_INVALID_ARGUMENT;
    return NULL;
  }
  if (!gpu->has_nvlink) {
    *status = NVML_ERROR_NOT_SUPPORTED;
    return NULL;
  }
  return &gpu->links[link];
}

nvmlReturn_t nvmlInit_v2(void) {
  nvmlReturn_t status;
  if (fake.init_count > 0) {
    ++fake.init_count;
    return NVML_SUCCESS;
  }
  status = load_config();
  if (status == NVML_SUCCESS) fake.init_count = 1;
  return status;
}

nvmlReturn_t nvmlShutdown(void) {
  if (fake.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --fake.init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_UNKNOWN:
      return fake.error[0] ? fake.error : "Unknown Error";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_ENTER();
  if (!fake.driver[0]) return NVML_ERROR_NOT_SUPPORTED;
  return write_text(version, length, fake.driver);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  FAKE_ENTER();
  if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
  if (fake.cuda <= 0) return NVML_ERROR_NOT_SUPPORTED;
  *cudaDriverVersion = fake.cuda;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  FAKE_ENTER();
  if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = fake.gpu_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  FAKE_ENTER();
  if (!device || index >= fake.gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
  if (fake.gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
  *device = &fake.gpus[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_text(name, length, device->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_text(uuid, length, device->uuid);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_ENTER();
  if (!gpu_of(device) || !pci) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(pci, device->bus_id);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* currLinkGen) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_figure(currLinkGen, device->current_generation);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* maxLinkGen) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_figure(maxLinkGen, device->max_generation);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* currLinkWidth) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_figure(currLinkWidth, device->current_width);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* maxLinkWidth) {
  FAKE_ENTER();
  if (!gpu_of(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return write_figure(maxLinkWidth, device->max_width);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  FAKE_ENTER();
  if (!gpu_of(device) || !major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->cc_major < 0 || device->cc_minor < 0) return NVML_ERROR_NOT_SUPPORTED;
  *major = device->cc_major;
  *minor = device->cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int* isActive) {
  nvmlReturn_t status = NVML_SUCCESS;
  struct fake_link* entry;
  FAKE_ENTER();
  entry = link_of(device, link, &status);
  if (!entry) return status;
  if (!isActive) return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = entry->configured && entry->active;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                        unsigned int* version) {
  nvmlReturn_t status = NVML_SUCCESS;
  struct fake_link* entry;
  FAKE_ENTER();
  entry = link_of(device, link, &status);
  if (!entry) return status;
  if (!entry->configured) return NVML_ERROR_NOT_SUPPORTED;
  return write_figure(version, entry->version);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  nvmlReturn_t status = NVML_SUCCESS;
  struct fake_link* entry;
  FAKE_ENTER();
  entry = link_of(device, link, &status);
  if (!entry) return status;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  if (!entry->configured || !entry->remote[0]) return NVML_ERROR_NOT_SUPPORTED;
  fill_pci(pci, entry->remote);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 int* pNvLinkDeviceType) {
  nvmlReturn_t status = NVML_SUCCESS;
  struct fake_link* entry;
  FAKE_ENTER();
  entry = link_of(device, link, &status);
  if (!entry) return status;
  if (!pNvLinkDeviceType) return NVML_ERROR_INVALID_ARGUMENT;
  if (!entry->configured) return NVML_ERROR_NOT_SUPPORTED;
  *pNvLinkDeviceType = entry->remote_type;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 int* pathInfo) {
  int given;
  FAKE_ENTER();
  if (!gpu_of(device1) || !gpu_of(device2) || !pathInfo || device1 == device2)
    return NVML_ERROR_INVALID_ARGUMENT;
  given = fake.ancestor[device1 - fake.gpus][device2 - fake.gpus];
  if (!given) return NVML_ERROR_NOT_SUPPORTED;
  *pathInfo = given - 1;
  return NVML_SUCCESS;
}
