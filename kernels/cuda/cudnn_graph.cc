// CudnnGraph: see cudnn_graph.h.
#include "kernels/cuda/cudnn_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "lib/core/error.h"

namespace trainer::cuda {
namespace {

// cuDNN 9.19 marks the handle attributes of the operation graph and the execution plan
// deprecated in favour of a device-properties descriptor (for building plans without a GPU); with
// a GPU and a handle at hand they are the documented way, and what cuDNN's own frontend sets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

constexpr int64_t kAlignment = 16;  // the arena's and the allocator's alignment is at least this

}  // namespace

BackendDesc::BackendDesc(cudnnBackendDescriptorType_t type) {
  CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
}

BackendDesc::~BackendDesc() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

BackendDesc& BackendDesc::operator=(BackendDesc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

void BackendDesc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                      const void* value, const char* what) {
  const cudnnStatus_t st = cudnnBackendSetAttribute(d_, name, type, count, value);
  if (st != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(fmt::format("cuDNN graph: setting {} (attribute {}) failed: {}", what, int(name),
                                   cudnnGetErrorString(st)));
}

cudnnStatus_t BackendDesc::finalize() { return cudnnBackendFinalize(d_); }

std::array<int64_t, 4> nhwc_strides(int64_t /*n*/, int64_t c, int64_t h, int64_t w) {
  return {h * w * c, 1, w * c, c};
}

std::array<int64_t, 4> nchw_strides(int64_t /*n*/, int64_t c, int64_t h, int64_t w) {
  return {c * h * w, h * w, w, 1};
}

void CudnnGraph::tensor(const GraphTensor& t) {
  BackendDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t.type, "a tensor's dtype");
  d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims.data(), "a tensor's dims");
  d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.strides.data(), "a tensor's strides");
  d.set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, t.uid, "a tensor's id");
  d.set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment, "a tensor's alignment");
  const bool v = t.is_virtual;
  d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v, "a tensor's virtual flag");
  const cudnnStatus_t st = d.finalize();
  if (st != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(fmt::format("cuDNN graph: tensor {} ({}x{}x{}x{}) refused: {}", t.uid, t.dims[0],
                                   t.dims[1], t.dims[2], t.dims[3], cudnnGetErrorString(st)));
  tensors_.emplace_back(t.uid, std::move(d));
}

const BackendDesc& CudnnGraph::find(int64_t uid, const char* what) const {
  for (const auto& t : tensors_)
    if (t.first == uid) return t.second;
  throw InternalError(fmt::format("cuDNN graph: {} names tensor {}, which was not declared", what, uid));
}

BackendDesc CudnnGraph::conv_desc(const GraphConv& g) const {
  BackendDesc d(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t dims = 2;
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dil[2] = {1, 1}, stride[2] = {g.stride_h, g.stride_w}, pad[2] = {g.pad_h, g.pad_w};
  d.set_i64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, dims, "the convolution's spatial dims");
  d.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "the convolution's compute type");
  d.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "the convolution's mode");
  d.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "the convolution's dilations");
  d.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride, "the convolution's strides");
  d.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "the convolution's padding");
  d.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "the convolution's padding");
  CUDNN_CHECK(d.finalize());
  return d;
}

void CudnnGraph::conv_fprop(int64_t x, int64_t w, int64_t y, const GraphConv& g) {
  helpers_.push_back(conv_desc(g));
  BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.f, beta = 0.f;
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, find(x, "conv_fprop"), "fprop x");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, find(w, "conv_fprop"), "fprop w");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, find(y, "conv_fprop"), "fprop y");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, helpers_.back(), "fprop convolution");
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "fprop alpha");
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "fprop beta");
  CUDNN_CHECK(op.finalize());
  ops_.push_back(std::move(op));
}

void CudnnGraph::conv_wgrad(int64_t x, int64_t dy, int64_t dw, const GraphConv& g) {
  helpers_.push_back(conv_desc(g));
  BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  const float alpha = 1.f, beta = 0.f;
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, find(x, "conv_wgrad"), "wgrad x");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, find(dy, "conv_wgrad"), "wgrad dy");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, find(dw, "conv_wgrad"), "wgrad dw");
  op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, helpers_.back(), "wgrad convolution");
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "wgrad alpha");
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "wgrad beta");
  CUDNN_CHECK(op.finalize());
  ops_.push_back(std::move(op));
}

void CudnnGraph::pointwise(cudnnPointwiseMode_t mode, int64_t in, int64_t in2, int64_t out) {
  BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "a pointwise mode");
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "a pointwise precision");
  CUDNN_CHECK(pw.finalize());
  helpers_.push_back(std::move(pw));
  BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, helpers_.back(), "pointwise descriptor");
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, find(in, "pointwise"), "pointwise x");
  if (in2 >= 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, find(in2, "pointwise"), "pointwise b");
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, find(out, "pointwise"), "pointwise y");
  CUDNN_CHECK(op.finalize());
  ops_.push_back(std::move(op));
}

void CudnnGraph::genstats(int64_t x, int64_t sum, int64_t sqsum) {
  BackendDesc op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode, "genstats mode");
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "genstats precision");
  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, find(x, "genstats"), "genstats x");
  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, find(sum, "genstats"), "genstats sum");
  op.set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, find(sqsum, "genstats"), "genstats sqsum");
  CUDNN_CHECK(op.finalize());
  ops_.push_back(std::move(op));
}

int CudnnGraph::finalize(std::string* why) {
  graph_ = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> ops;
  ops.reserve(ops_.size());
  for (const BackendDesc& o : ops_) ops.push_back(o.get());
  graph_.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()), ops.data(),
             "the graph's operations");
  graph_.set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle_, "the graph's handle");
  cudnnStatus_t st = graph_.finalize();
  if (st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = std::string("the operation graph: ") + cudnnGetErrorString(st);
    return 0;
  }
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_, "the heuristics' graph");
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "the heuristics' mode");
  st = heur.finalize();
  if (st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = std::string("the heuristics: ") + cudnnGetErrorString(st);
    return 0;
  }
  int64_t count = 0;
  st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                &count, nullptr);
  if (st != CUDNN_STATUS_SUCCESS || count <= 0) {
    if (why)
      *why = st != CUDNN_STATUS_SUCCESS ? std::string("the heuristics' results: ") + cudnnGetErrorString(st)
                                        : std::string("no engine supports it");
    return 0;
  }
  configs_.clear();
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs_.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs_.back().get());
  }
  int64_t got = 0;
  st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                count, &got, raw.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    configs_.clear();
    if (why) *why = std::string("the heuristics' results: ") + cudnnGetErrorString(st);
    return 0;
  }
  configs_.resize(size_t(got));
  return int(configs_.size());
}

namespace {

// A configuration's engine: its global index (-1 when cuDNN does not say) and whether it is
// compiled at run time (NVRTC).
struct EngineInfo {
  int64_t index = -1;
  bool runtime_compiled = false;
};
EngineInfo engine_info(cudnnBackendDescriptor_t cfg) {
  EngineInfo info;
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return info;
  cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index);
  cudnnBackendBehaviorNote_t notes[8];
  int64_t n_notes = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 8, &n_notes,
                               notes) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n_notes && i < 8; ++i)
      info.runtime_compiled = info.runtime_compiled || notes[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  return info;
}

// "engine 12" or "engine 12 (runtime-compiled)" for a configuration.
std::string config_name(cudnnBackendDescriptor_t cfg) {
  const EngineInfo info = engine_info(cfg);
  if (info.index < 0) return "engine ?";
  return fmt::format("engine {}{}", info.index, info.runtime_compiled ? " (runtime-compiled)" : "");
}

}  // namespace

CudnnGraph::Plan CudnnGraph::config_plan(int i) const {
  if (i < 0 || size_t(i) >= configs_.size()) throw InternalError("CudnnGraph: no such configuration");
  Plan p;
  p.config = i;
  p.plan = BackendDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  p.plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle_, "the plan's handle");
  p.plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs_[size_t(i)], "the plan's configuration");
  p.name = config_name(configs_[size_t(i)].get());
  return p;
}

bool CudnnGraph::make_plan(int i, size_t max_ws, std::string* why) {
  Plan p = config_plan(i);
  if (!finalize_plan(p, max_ws, why)) return false;
  keep_plan(std::move(p));
  return true;
}

int CudnnGraph::make_plans(int want, size_t max_ws, std::string* why, bool precompiled_only) {
  std::vector<int> candidates;
  for (int i = 0; i < int(configs_.size()); ++i)
    if (!precompiled_only || !engine_info(configs_[size_t(i)].get()).runtime_compiled)
      candidates.push_back(i);
  const int first = std::min<int>(want, int(candidates.size()));
  std::vector<Plan> batch;
  for (int i = 0; i < first; ++i) batch.push_back(config_plan(candidates[size_t(i)]));
  std::vector<std::string> whys(static_cast<size_t>(first));
  std::vector<char> ok(static_cast<size_t>(first), 0);
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  for (int i = 0; i < first; ++i)
    threads.emplace_back([&, i] {
      try {
        ok[size_t(i)] = finalize_plan(batch[size_t(i)], max_ws, &whys[size_t(i)]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        error = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  std::string failures;
  for (int i = 0; i < first; ++i) {
    if (ok[size_t(i)])
      keep_plan(std::move(batch[size_t(i)]));
    else
      failures += (failures.empty() ? "" : "; ") + whys[size_t(i)];
  }
  for (int i = first; i < int(candidates.size()) && plan_count() < want; ++i) {
    std::string w;
    if (!make_plan(candidates[size_t(i)], max_ws, &w)) failures += (failures.empty() ? "" : "; ") + w;
  }
  if (why) *why = failures;
  return plan_count();
}

bool CudnnGraph::load_plan(const std::string& json, size_t max_ws, std::string* why) {
  Plan p;
  p.config = -1;
  p.plan = BackendDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  p.plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle_, "the plan's handle");
  p.name = "a stored plan";
  const cudnnStatus_t st =
      cudnnBackendSetAttribute(p.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                               int64_t(json.size()), json.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = std::string("a stored plan: ") + cudnnGetErrorString(st);
    return false;
  }
  if (!finalize_plan(p, max_ws, why)) return false;
  keep_plan(std::move(p));
  // Its engine, for the logs.
  BackendDesc cfg(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  cudnnBackendDescriptor_t c = cfg.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(plans_.back().plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &c) == CUDNN_STATUS_SUCCESS &&
      n == 1)
    plans_.back().name = config_name(c) + ", stored";
  return true;
}

bool CudnnGraph::finalize_plan(Plan& p, size_t max_ws, std::string* why) const {
  const cudnnStatus_t st = p.plan.finalize();
  if (st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = p.name + ": " + cudnnGetErrorString(st);
    return false;
  }
  int64_t ws = 0, n = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(p.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &ws));
  if (ws < 0 || size_t(ws) > max_ws) {
    if (why) *why = fmt::format("{}: needs {} bytes of workspace", p.name, ws);
    return false;
  }
  p.workspace = size_t(ws);
  return true;
}

void CudnnGraph::keep_plan(Plan p) {
  plans_.push_back(std::move(p));
  selected_ = int(plans_.size()) - 1;
}

std::string CudnnGraph::plan_json(int p) const {
  const cudnnBackendDescriptor_t plan = plans_.at(size_t(p)).plan.get();
  int64_t count = 0;
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0,
                               &count, nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return {};
  std::string json(size_t(count), '\0');
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, count,
                               &count, json.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  json.resize(std::min(json.size(), size_t(std::max<int64_t>(count, 0))));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

void GraphPointers::add(int64_t id, const void* p) {
  if (n == kMax) throw InternalError("GraphPointers: more than " + std::to_string(kMax) + " tensors");
  uid[size_t(n)] = id;
  data[size_t(n)] = const_cast<void*>(p);  // cuDNN's variant pack takes void* for inputs too
  ++n;
}

cudnnStatus_t CudnnGraph::try_run(const GraphPointers& ptrs, void* workspace) {
  if (selected_ < 0 || size_t(selected_) >= plans_.size())
    throw InternalError("CudnnGraph::run: no plan selected");
  if (pack_plan_ != selected_ || pack_ptrs_ != ptrs || pack_ws_ != workspace || !pack_.get()) {
    BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    GraphPointers copy = ptrs;  // cuDNN's setter takes non-const arrays
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(copy.n), copy.uid.data(),
             "the variant pack's ids");
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(copy.n), copy.data.data(),
             "the variant pack's pointers");
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace,
             "the variant pack's workspace");
    const cudnnStatus_t st = pack.finalize();
    if (st != CUDNN_STATUS_SUCCESS) return st;
    pack_ = std::move(pack);
    pack_plan_ = selected_;
    pack_ptrs_ = ptrs;
    pack_ws_ = workspace;
  }
  return cudnnBackendExecute(handle_, plans_[size_t(selected_)].plan.get(), pack_.get());
}

void CudnnGraph::run(const GraphPointers& ptrs, void* workspace) {
  const cudnnStatus_t st = try_run(ptrs, workspace);
  if (st != CUDNN_STATUS_SUCCESS)
    throw RuntimeError(fmt::format("cuDNN error: executing a fused graph ({}) failed on {}: {}",
                                   plans_[size_t(selected_)].name, current_device_name(),
                                   cudnnGetErrorString(st)));
}

}  // namespace trainer::cuda
