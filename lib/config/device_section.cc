#include "lib/config/device_section.h"

#include "lib/backend/device_spec.h"

namespace trainer {

const KeySpecs& device_keys() {
  static const KeySpecs keys{
      choice_key("type", "cpu", {"cpu", "gpu", "auto"},
                 "cpu | gpu | auto (the first usable GPU, else the CPU)"),
      integer_key("id", 0, 0, kMaxGpuIndex, "type gpu: which GPU of those this process sees"),
      string_key("gpus", "",
                 "type gpu, fit only: several GPUs, one replica each: 'N,M,...' or 'all' (instead of id)"),
      integer_key("memory_limit", 0, 0, int64_t(1) << 30,
                  "MiB: hard cap on every byte the tool allocates on the device (0: no cap)"),
      bool_key("memory_growth", false, "GPU: grow on demand up to the cap instead of reserving up front"),
      number_key("bucket_mb", 25, 0, 1e6,
                 "several GPUs: MiB of gradients per all-reduce bucket, each launched during the backward "
                 "pass (0: one bucket, after it)"),
      choice_key("gradient_compression", "none", {"none", "bf16", "fp16"},
                 "several GPUs: the dtype the gradients travel in through the all-reduce: bf16 or fp16 (half "
                 "the bytes; each replica's weighted gradients rounded before the sum, as PyTorch DDP's "
                 "compress hooks) or none (fp32)"),
      bool_key(
          "sync_batchnorm", false,
          "several replicas (GPUs or mpirun ranks): batchnorm in training normalizes by the statistics of "
          "the whole global batch, all-reduced over the replicas (false: each replica's own shard, as "
          "PyTorch DDP)"),
  };
  return keys;
}

static YAML::Node mapping_of(const DeviceSpec& d) {
  YAML::Node m(YAML::NodeType::Map);
  m["type"] = d.kind == DeviceSpec::Kind::gpu ? "gpu" : d.str();
  if (d.several())
    m["gpus"] = d.str().substr(4);  // "0,1" or "all"
  else if (d.kind == DeviceSpec::Kind::gpu)
    m["id"] = d.index;
  return m;
}

void normalize_device(YAML::Node& root) {
  if (!root.IsMap()) return;
  const YAML::Node& const_root = root;  // a lookup that inserts nothing
  const YAML::Node n = const_root["device"];
  if (!n || !n.IsScalar()) return;
  if (std::optional<DeviceSpec> d = parse_device(n.Scalar())) root["device"] = mapping_of(*d);
}

void read_device(Config& c, NodeReader& r) {
  YAML::Node n = r.child("device");
  YAML::Node section;
  section.reset(n);
  if (present(n) && n.IsScalar()) {  // "device: gpu:0"
    const std::optional<DeviceSpec> d = parse_device(n.Scalar());
    if (!d)
      r.fail("device", "'" + n.Scalar() + "' is not a device; allowed: " + kDeviceForms +
                           ", or a mapping {type: gpu, id: 0, memory_limit: MiB, memory_growth: true}");
    section.reset(mapping_of(*d));
  }
  NodeReader dr(section, "device", c.file);
  const KeyValues v = read_keys(dr, device_keys());
  const std::string type = v.string("type");
  if (type != "gpu" && dr.has("id"))
    v.fail("id", "is only for type gpu (this device is " + type + "); remove it or set type: gpu");
  DeviceSpec d;
  d.kind = type == "gpu"    ? DeviceSpec::Kind::gpu
           : type == "auto" ? DeviceSpec::Kind::automatic
                            : DeviceSpec::Kind::cpu;
  d.index = int(v.integer("id"));
  if (v.has("gpus") && !v.string("gpus").empty()) {
    if (type != "gpu")
      v.fail("gpus", "is only for type gpu (this device is " + type + "); remove it or set type: gpu");
    if (dr.has("id")) v.fail("gpus", "and device.id both name GPUs; give one of them");
    const std::optional<DeviceSpec> list = parse_device("gpu:" + v.string("gpus"));
    if (!list)
      v.fail("gpus", "'" + v.string("gpus") + "' is not a GPU list; allowed: N,M,... (GPU indices) or all");
    d = *list;
  }
  c.device = d.str();
  c.memory_limit_mib = v.integer("memory_limit");
  c.memory_growth = v.boolean("memory_growth");
  c.bucket_mb = v.number("bucket_mb");
  c.gradient_compression = v.string("gradient_compression");
  c.sync_batchnorm = v.boolean("sync_batchnorm");
  YAML::Node out = mapping_of(d);
  out["memory_limit"] = c.memory_limit_mib;
  out["memory_growth"] = c.memory_growth;
  out["bucket_mb"] = c.bucket_mb;
  out["gradient_compression"] = c.gradient_compression;
  out["sync_batchnorm"] = c.sync_batchnorm;
  c.resolved["device"] = out;
}

}  // namespace trainer
