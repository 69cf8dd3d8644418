// Weights out and back in: the safetensors format (round trip, every corruption a one-line
// error), the export layouts (GPT-2's transposed Conv1D weights, BERT's split Q/K/V by hand),
// export of a trained run's checkpoint then model.init_from giving the same parameters bit for
// bit, the load's checks (shapes, names, tied copies, zero tensors, architecture), and the whole
// model against PyTorch (scripts/torch-parity) for BERT and the GPT: logits within 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
#include "framework/inference/export.h"
#include "workloads/weights/safetensors.h"
#include "framework/train/trainer.h"
#include "tests/models/model_checks.h"
#include "tests/nn/gradcheck.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;

namespace fs = std::filesystem;
using laconic::testing::snapshot;

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("laconic_export_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}
// A file of the given JSON header and `data` bytes of buffer.
std::string raw_file(const std::string& header, std::size_t data = 0) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data, '\0');
}

// The message of the InputError `fn` throws ("" if it throws none).
template <typename Fn>
std::string input_error(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_F(Export, SafetensorsRoundTripsTensorsAndMetadataAndAlignsTheBuffer) {
  const std::vector<SafeTensor> ts = {{"a.weight", {2, 3}, {1, 2, 3, 4, 5, -6.5f}},
                                      {"b", {4}, {0.25f, -0.0f, 1e-30f, 3e38f}},
                                      {"empty", {0, 5}, {}}};
  write_safetensors(path("t.safetensors"), ts, {{"k", "v"}});
  const std::string bytes = read_all(path("t.safetensors"));
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 10 * sizeof(float));
  EXPECT_EQ(bytes[8], '{');
  const SafeTensorsFile f = read_safetensors(path("t.safetensors"));
  ASSERT_EQ(f.tensors.size(), 3u);
  for (const SafeTensor& t : ts) {
    const SafeTensor* g = f.find(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(g->shape, t.shape);
    EXPECT_TRUE(same_bits(g->data, t.data)) << t.name;
  }
  EXPECT_EQ(f.metadata.at("k"), "v");
  EXPECT_FALSE(fs::exists(path("t.safetensors.tmp")));
}

TEST_F(Export, SafetensorsReadsHalfAndDoublePrecision) {
  // F16 1.0 = 0x3c00, BF16 -2.0 = 0xc000, F64 0.5 (unaligned: the tensors tile the buffer).
  std::string h = R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]},"d":{"dtype":"F64","shape":[1],"data_offsets":[4,12]}})";
  std::string file = raw_file(h, 12);
  const std::size_t at = 8 + h.size();
  const std::uint16_t one = 0x3c00, minus_two = 0xc000;
  const double half = 0.5;
  std::memcpy(&file[at], &one, 2);
  std::memcpy(&file[at + 2], &minus_two, 2);
  std::memcpy(&file[at + 4], &half, 8);
  write_all(path("h.safetensors"), file);
  const SafeTensorsFile f = read_safetensors(path("h.safetensors"));
  EXPECT_EQ(f.find("h")->data[0], 1.0f);
  EXPECT_EQ(f.find("b")->data[0], -2.0f);
  EXPECT_EQ(f.find("d")->data[0], 0.5f);
}

TEST_F(Export, EveryCorruptSafetensorsFileIsAOneLineErrorNamingIt) {
  const auto error_of = [&](const std::string& bytes) {
    write_all(path("bad.safetensors"), bytes);
    return input_error([&] { read_safetensors(path("bad.safetensors")); });
  };
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    std::string bytes, expect;
  } cases[] = {
      {"abc", "shorter than the 8-byte header length"},
      {raw_file(ok, 8).substr(0, 20), "exceeds the file"},
      {raw_file("{\"x\": ", 0), "corrupt safetensors header: not valid JSON"},
      {raw_file("[1, 2]", 0), "expected a JSON object"},
      {raw_file(R"({"x":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 2), "tensor 'x': dtype \"I8\""},
      {raw_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "shape[0]: expected a size >= 0"},
      {raw_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8), "outside the data buffer of 8 bytes"},
      {raw_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12"},
      {raw_file(R"({"x":{"dtype":"F32","shape":[2]}})", 8), "expected {\"dtype\", \"shape\", \"data_offsets\"}"},
      {raw_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "overlap"},
      {raw_file(R"({"__metadata__":{"k":1}})", 0), "__metadata__: 'k': expected a string value"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.bytes);
    EXPECT_NE(e.find(path("bad.safetensors")), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(input_error([&] { read_safetensors(path("none.safetensors")); }).find("cannot open"), std::string::npos);
}

// Malformed headers that crashed, wrapped or slipped through: each a one-line error that names the
// tensor (escaped) and never echoes a value from the header.
TEST_F(Export, SafetensorsHeadersAreBoundedAndNeverEchoed) {
  const auto error_of = [&](const std::string& bytes) {
    write_all(path("bad.safetensors"), bytes);
    const std::string e = input_error([&] { read_safetensors(path("bad.safetensors")); });
    EXPECT_EQ(e.rfind(path("bad.safetensors") + ": ", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  // 10^6 levels inside dtype or shape: the message printed them recursively (a stack overflow).
  EXPECT_NE(error_of(raw_file(R"({"x":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})", 4))
                .find("corrupt safetensors header: JSON nested deeper than 64 levels"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"x":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]}})", 4)).find("nested deeper"),
            std::string::npos);
  // Values are described by their JSON type, names escaped.
  std::string e = error_of(raw_file(R"({"x":{"dtype":["SECRET"],"shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(e.find("tensor 'x': dtype array: expected one of"), std::string::npos) << e;
  EXPECT_EQ(e.find("SECRET"), std::string::npos) << e;
  e = error_of(raw_file(R"({"x":{"dtype":"F32","shape":[{"k":"SECRET"}],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(e.find("tensor 'x': shape[0]: expected a size >= 0, got object"), std::string::npos) << e;
  EXPECT_NE(error_of(raw_file(R"({"a\nb\u0007":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1))
                .find("tensor 'a\\nb\\x07': dtype \"I8\""),
            std::string::npos);
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += i ? ",1" : "1";
  EXPECT_NE(error_of(raw_file(R"({"x":{"dtype":"F32","shape":)" + many + R"(],"data_offsets":[0,4]}})", 4))
                .find("shape: 65 dimensions, expected at most 64"),
            std::string::npos);
  // [2^32, 2^32] wrapped to 0 elements and passed as an empty tensor.
  EXPECT_NE(error_of(raw_file(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0))
                .find("tensor 'x': shape [4294967296, 4294967296]...: more than 2^64 elements"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"x":{"dtype":"F64","shape":[4294967296,1073741824],"data_offsets":[0,0]}})", 0))
                .find("more than 2^64 bytes of F64"),
            std::string::npos);
  // An overlap that no two neighbours in offset order show: a, then an empty b inside a, then c
  // inside a's end.
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                              R"("c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16))
                .find("overlap in the data buffer"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8))
                .find("tensors 'a' and 'c' overlap"),
            std::string::npos);
  // The tensors tile the buffer: no gap between them, nothing after them.
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("c":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12))
                .find("bytes [4, 8) of the data buffer belong to no tensor"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12))
                .find("bytes [4, 12) of the data buffer belong to no tensor"),
            std::string::npos);
  // A directory, a device: not regular files; a file over the caller's limit.
  EXPECT_EQ(input_error([&] { read_safetensors(dir_.string()); }),
            dir_.string() + ": a directory, expected a regular file (safetensors file)");
  EXPECT_EQ(input_error([&] { read_safetensors("/dev/zero"); }),
            "/dev/zero: a character device, expected a regular file (safetensors file)");
  write_all(path("ok.safetensors"), raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_EQ(read_safetensors(path("ok.safetensors"), 66).tensors.size(), 1u);
  EXPECT_NE(input_error([&] { read_safetensors(path("ok.safetensors"), 65); }).find("66 bytes, more than the limit of 65 (65 B) for a safetensors file"),
            std::string::npos);
}

GptOptions tiny_gpt() {
  GptOptions o;
  o.vocab = 23;
  o.seq_len = 9;
  o.dim = 12;
  o.layers = 2;
  o.heads = 3;
  o.ffn = 20;
  return o;
}
BertOptions tiny_bert() {
  BertOptions o;
  o.vocab = 29;
  o.seq_len = 10;
  o.dim = 16;
  o.layers = 2;
  o.heads = 4;
  o.ffn = 24;
  o.dropout = 0;
  return o;
}

// GPT-2 stores every linear layer transposed ([in, out]); the fused Q|K|V stays fused.
TEST_F(Export, GptLayoutTransposesLinearWeightsByName) {
  Gpt model(tiny_gpt());
  model.init(3);
  const ExportLayout l = model.export_layout();
  const ParamStore& s = model.params();
  const auto tensor = [&](const std::string& name) {
    for (const ExportTensor& t : l.tensors)
      if (t.name == name) return export_tensor(s, s.params(), t);
    ADD_FAILURE() << "no " << name;
    return std::vector<float>{};
  };
  const int d = 12;
  const std::vector<float> c_attn = tensor("transformer.h.1.attn.c_attn.weight");  // [d, 3d]
  const float* qkv = s.param(view_named(s, "layer1.attn.qkv.weight"));             // [3d, d]
  for (int i = 0; i < d; ++i)
    for (int o = 0; o < 3 * d; ++o) ASSERT_EQ(c_attn[i * 3 * d + o], qkv[o * d + i]);
  const std::vector<float> fc = tensor("transformer.h.0.mlp.c_fc.weight");  // [d, ffn]
  const float* fc1 = s.param(view_named(s, "layer0.fc1.weight"));          // [ffn, d]
  for (int i = 0; i < d; ++i)
    for (int o = 0; o < 20; ++o) ASSERT_EQ(fc[i * 20 + o], fc1[o * d + i]);
  EXPECT_EQ(l.tensors.size(), 2 + 2 * 12 + 2u);
  std::size_t total = 0;
  for (const ExportTensor& t : l.tensors) total += export_tensor(s, s.params(), t).size();
  EXPECT_EQ(total, s.size());  // every parameter exactly once
}

TEST_F(Export, BertLayoutSplitsQueryKeyValueAndAddsZeroTokenTypes) {
  Bert model(tiny_bert());
  model.init(3);
  const ExportLayout l = model.export_layout();
  const ParamStore& s = model.params();
  const int d = 16;
  const float* qkv = s.param(view_named(s, "layer0.attn.qkv.weight"));
  const float* qkv_b = s.param(view_named(s, "layer0.attn.qkv.bias"));
  const char* parts[] = {"query", "key", "value"};
  for (int j = 0; j < 3; ++j) {
    const std::string base = std::string("bert.encoder.layer.0.attention.self.") + parts[j];
    for (const ExportTensor& t : l.tensors) {
      if (t.name == base + ".weight") {
        EXPECT_EQ(t.shape, (std::vector<std::int64_t>{d, d}));
        const auto w = export_tensor(s, s.params(), t);
        EXPECT_TRUE(same_bits(w, std::span<const float>(qkv + j * d * d, d * d))) << t.name;
      }
      if (t.name == base + ".bias") {
        EXPECT_TRUE(same_bits(export_tensor(s, s.params(), t), std::span<const float>(qkv_b + j * d, d))) << t.name;
      }
    }
  }
  bool zeros = false;
  for (const ExportTensor& t : l.tensors)
    if (t.name == "bert.embeddings.token_type_embeddings.weight") {
      zeros = t.view == ExportTensor::kZeros && t.shape == std::vector<std::int64_t>{2, d};
      for (float v : export_tensor(s, s.params(), t)) EXPECT_EQ(v, 0.0f);
    }
  EXPECT_TRUE(zeros);
}

// A recipe whose resolved TOML reads back (a GPT on token files), trained on streams in memory.
Recipe gpt_recipe() {
  Recipe r;
  r.run.seed = 5;
  r.model.name = "gpt";
  r.model.dim = 12;
  r.model.layers = 2;
  r.model.heads = 3;
  r.model.ffn = 20;
  r.data.name = "tokens";
  r.data.train_path = {"unused.bin"};
  r.data.seq_len = 8;
  r.data.vocab_size = 23;
  r.train.micro_batch = 4;
  r.train.steps = 5;
  r.optimizer.name = "adamw";
  r.optimizer.lr = 0.01;
  r.distributed.world_size = 2;
  r.checkpoint.every = 3;  // and the last step (5)
  return r;
}
TrainData gpt_data() {
  TokenStream s;
  s.vocab = 23;
  const auto key = rng::key({11, rng::kTest});
  for (int i = 0; i < 400; ++i) s.tokens.push_back(static_cast<std::int32_t>(rng::below(key, i, 23)));
  return token_data(s, {}, 8);
}

TEST_F(Export, ExportOfARunThenInitFromGivesItsParametersBitForBit) {
  const Recipe r = gpt_recipe();
  const TrainData data = gpt_data();
  TrainOptions opts;
  opts.run_dir = path("run");
  const TrainSummary s = train(r, data, opts);
  EXPECT_TRUE(fs::exists(path("run/checkpoints/step-000000005/MANIFEST.json")));  // the last step is saved

  ExportOptions eo;
  eo.source = path("run");
  eo.out = path("gpt.safetensors");
  eo.config_out = path("config.json");
  const ExportReport rep = export_checkpoint(eo);
  EXPECT_EQ(rep.step, 5);
  EXPECT_EQ(rep.architecture, "gpt");
  const SafeTensorsFile f = read_safetensors(eo.out);
  EXPECT_EQ(f.metadata.at("laconic.step"), "5");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_NE(f.metadata.at("laconic.config").find("\"n_layer\": 2"), std::string::npos);
  EXPECT_NE(read_all(eo.config_out).find("GPT2LMHeadModel"), std::string::npos);
  ASSERT_NE(f.find("transformer.h.1.mlp.c_proj.weight"), nullptr);
  EXPECT_EQ(f.find("transformer.h.1.mlp.c_proj.weight")->shape, (std::vector<std::int64_t>{20, 12}));

  GptOptions go = tiny_gpt();
  go.seq_len = 8;
  Gpt fresh(go);
  fresh.init(99);
  load_model_safetensors(eo.out, fresh, "model.init_from");
  EXPECT_TRUE(same_bits(fresh.params().params(), s.final_params));

  // The checkpoint directory itself exports the same bytes.
  eo.source = path("run/checkpoints/step-000000005");
  eo.out = path("again.safetensors");
  eo.config_out.clear();
  export_checkpoint(eo);
  EXPECT_EQ(read_all(path("again.safetensors")), read_all(path("gpt.safetensors")));

  // A run from those weights starts, on every rank, from the first run's final parameters.
  Recipe from = r;
  from.model.init_from = {path("gpt.safetensors")};
  from.train.steps = 1;
  from.checkpoint.every = 0;
  struct Capture : StepHook {
    Loop& loop;
    std::vector<std::vector<float>>& out;
    Capture(Loop& l, std::vector<std::vector<float>>& o) : loop(l), out(o) {}
    void before_step(StepState& st) override {
      if (st.step == 0) out[loop.rank()] = snapshot(loop.store().params());
    }
  };
  std::vector<std::vector<float>> start(2);
  TrainOptions o2;
  o2.hooks.push_back([&](Loop& l) { return std::make_unique<Capture>(l, start); });
  train(from, data, o2);
  for (const auto& p : start) EXPECT_TRUE(same_bits(p, s.final_params));
}

TEST_F(Export, InitFromRefusesWrongShapesNamesArchitecturesAndTiedCopies) {
  Gpt model(tiny_gpt());
  model.init(1);
  const std::vector<float> p = snapshot(model.params().params());
  write_model_safetensors(path("g.safetensors"), model, p, {});
  const ExportLayout l = model.export_layout();
  std::vector<SafeTensor> ts;
  for (const ExportTensor& t : l.tensors) ts.push_back({t.name, t.shape, export_tensor(model.params(), p, t)});
  const auto error_loading = [&](std::vector<SafeTensor> tensors, std::map<std::string, std::string> meta = {}) {
    write_safetensors(path("x.safetensors"), tensors, meta);
    Gpt target(tiny_gpt());
    target.init(2);
    const std::vector<float> before = snapshot(target.params().params());
    const std::string e = input_error([&] { load_model_safetensors(path("x.safetensors"), target, "model.init_from"); });
    EXPECT_NE(e.find(path("x.safetensors") + ": model.init_from: "), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  {
    auto bad = ts;
    for (auto& t : bad)
      if (t.name == "transformer.h.0.attn.c_attn.weight") t.shape = {t.shape[1], t.shape[0]};
    EXPECT_NE(error_loading(bad).find("shape [36, 12], expected [12, 36]"), std::string::npos);
  }
  {
    auto bad = ts;
    bad.push_back({"transformer.h.9.ln_1.weight", {12}, std::vector<float>(12, 1.0f)});
    EXPECT_NE(error_loading(bad).find("unknown tensor 'transformer.h.9.ln_1.weight'"), std::string::npos);
  }
  {
    auto bad = ts;
    bad.erase(bad.begin() + 1);
    EXPECT_NE(error_loading(bad).find("missing tensor 'transformer.wpe.weight'"), std::string::npos);
  }
  {
    // NaN or infinite weights were loaded, to surface as a NaN loss steps later.
    auto bad = ts;
    bad[2].data[3] = std::nanf("");
    EXPECT_NE(error_loading(bad).find("tensor '" + bad[2].name + "': value nan at index 3: expected finite weights"),
              std::string::npos);
    bad[2].data[3] = -INFINITY;
    EXPECT_NE(error_loading(bad).find("tensor '" + bad[2].name + "': value -inf at index 3"), std::string::npos);
  }
  {
    auto bad = ts;
    bad.push_back({"two\nlines", {1}, {0.0f}});
    EXPECT_NE(error_loading(bad).find("unknown tensor 'two\\nlines'"), std::string::npos);
  }
  EXPECT_NE(error_loading(ts, {{"laconic.architecture", "bert"}}).find("weights of a \"bert\" model, this recipe's is \"gpt\""),
            std::string::npos);
  {
    auto tied = ts;
    tied.push_back({"lm_head.weight", ts[0].shape, ts[0].data});  // an equal tied copy is accepted
    write_safetensors(path("tied.safetensors"), tied, {});
    Gpt target(tiny_gpt());
    load_model_safetensors(path("tied.safetensors"), target, "model.init_from");
    EXPECT_TRUE(same_bits(target.params().params(), p));
    tied.back().data[0] += 1.0f;
    EXPECT_NE(error_loading(tied).find("'lm_head.weight' differs from 'transformer.wte.weight'"), std::string::npos);
  }
  Bert bert(tiny_bert());
  bert.init(1);
  const ExportLayout bl = bert.export_layout();
  std::vector<SafeTensor> bts;
  for (const ExportTensor& t : bl.tensors) bts.push_back({t.name, t.shape, export_tensor(bert.params(), bert.params().params(), t)});
  for (auto& t : bts)
    if (t.name == "bert.embeddings.token_type_embeddings.weight") t.data[5] = 0.5f;
  write_safetensors(path("tt.safetensors"), bts, {});
  Bert target(tiny_bert());
  EXPECT_NE(input_error([&] { load_model_safetensors(path("tt.safetensors"), target, "model.init_from"); })
                .find("token_type_embeddings.weight': expected zeros"),
            std::string::npos);
}

TEST_F(Export, InitFromRefusesAFileLargerThanTheModelCanHoldBeforeReadingIt) {
  Gpt model(tiny_gpt());
  // An honest header for 200 MB of one tensor and a (sparse) file that large: no weights of this
  // model take as much, even as F64 behind the largest header, so nothing of it is read.
  const std::string h = R"({"x":{"dtype":"F32","shape":[50000000],"data_offsets":[0,200000000]}})";
  write_all(path("big.safetensors"), raw_file(h));
  fs::resize_file(path("big.safetensors"), 8 + h.size() + 200000000);
  const std::string e = input_error([&] { read_model_safetensors(path("big.safetensors"), model); });
  EXPECT_EQ(e.rfind(path("big.safetensors") + ": " + std::to_string(8 + h.size() + 200000000) + " bytes, more than the limit of ", 0), 0u) << e;
  EXPECT_NE(e.find("for a safetensors file for " + model.describe()), std::string::npos) << e;
  // The model's own export is within its limit.
  model.init(1);
  write_model_safetensors(path("own.safetensors"), model, model.params().params(), {});
  EXPECT_EQ(read_model_safetensors(path("own.safetensors"), model).tensors.size(), model.export_layout().tensors.size());
}

// ---- parity with PyTorch ----

// A NumPy .npy file (format 1.0) of a C-order array.
void write_npy(const std::string& p, const char* descr, const std::vector<std::int64_t>& shape, const void* data,
               std::size_t bytes) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ", ";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const std::uint16_t n = static_cast<std::uint16_t>(header.size());
  out.append(reinterpret_cast<const char*>(&n), 2);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  write_all(p, out);
}

bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0; }

// Exports `model` (its parameters perturbed well away from init, so that every tensor matters),
// runs it on a batch of every position predicted, and has scripts/torch-parity compare logits.
void expect_torch_parity(Model& model, const std::string& dir, int vocab, int seq, const float* (*logits)(Model&)) {
  laconic::testing::randomize_params(model.params(), 17, 1.0f);
  const std::string weights = dir + "/model.safetensors";
  write_model_safetensors(weights, model, model.params().params(), {});
  Batch b;
  b.size = 3;
  b.seq_len = seq;
  const auto key = rng::key({21, rng::kTest});
  for (int i = 0; i < b.size * seq; ++i) {
    b.tokens.push_back(static_cast<std::int32_t>(rng::below(key, i, vocab)));
    b.targets.push_back(0);  // every position predicted: the logits of every row
  }
  model.forward(b, {false, 0, 0, 0});
  const std::size_t n = b.tokens.size() * static_cast<std::size_t>(vocab);
  write_npy(dir + "/tokens.npy", "<i4", {b.size, seq}, b.tokens.data(), b.tokens.size() * 4);
  write_npy(dir + "/logits.npy", "<f4", {static_cast<std::int64_t>(b.tokens.size()), vocab}, logits(model), n * 4);
  const std::string cmd = "/usr/bin/python3 " LACONIC_SOURCE_DIR "/scripts/torch-parity " + weights + " --tokens " + dir +
                          "/tokens.npy --logits " + dir + "/logits.npy --tolerance 1e-4 > " + dir + "/parity.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string out = read_all(dir + "/parity.txt");
  std::printf("%s", out.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
}

TEST_F(Export, BertLogitsMatchPyTorchsBertForMaskedLM) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/install-deps installs python3-torch)";
  BertOptions o = tiny_bert();
  o.seq_len = 12;
  Bert model(o);
  model.init(4);
  expect_torch_parity(model, dir_.string(), o.vocab, o.seq_len, [](Model& m) { return static_cast<Bert&>(m).logits(); });
}

TEST_F(Export, GptLogitsMatchPyTorchsGpt2LMHeadModel) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (scripts/install-deps installs python3-torch)";
  Gpt model(tiny_gpt());
  model.init(4);
  expect_torch_parity(model, dir_.string(), 23, 9, [](Model& m) { return static_cast<Gpt&>(m).logits(); });
}

}  // namespace
}  // namespace laconic
