// Config files: loading, base inheritance, command-line overrides, error messages that name the
// key and the file, and render -> parse round trips of every shipped config.
#include <gtest/gtest.h>

#include <filesystem>

#include "launch/config/config.h"
#include "launch/config/config_keys.h"
#include "tests/launch/config/config_test_util.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(BRT_SOURCE_DIR) / "configs";

// A scratch directory for config files, removed afterwards.
struct TempDir : testing::ConfigScratchDir {
  TempDir() : ConfigScratchDir("brt-config-test-") {}
};

// The ConfigError message of `f`, failing the test when nothing is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Config, TinyLoadsWithItsValues) {
  const RunConfig c = load_run_config((kConfigs / "tiny.toml").string());
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.window, 64);
  EXPECT_EQ(c.model.family, core::ModelFamily::kRecurrent);
  EXPECT_EQ(c.model.recurrent_layers, std::vector<int>{1});
  EXPECT_EQ(c.optim.kind, core::OptimKind::kAdafactor);
  EXPECT_EQ(c.optim.total_steps, c.train.steps);  // filled from train.steps
  EXPECT_EQ(c.optim.clip_norm, 0.0);              // Adafactor: off
  EXPECT_EQ(c.train.batch, 4);
}

TEST(Config, OverridesAnyKeyTypedByTheKey) {
  ConfigSources sources;
  const RunConfig c = load_run_config((kConfigs / "tiny.toml").string(),
                                      {"model.d_model=256", "optim.lr=0.01", "train.steps=10", "optim.kind=adamw",
                                       "data.path=\"some dir\"", "model.layers = 24", "model.recurrent_layers=9,19",
                                       "checkpoint.resume=false", "optim.min_lr=1e-4"},
                                      &sources);
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_EQ(c.train.steps, 10);
  EXPECT_EQ(c.optim.total_steps, 10);
  EXPECT_EQ(c.optim.kind, core::OptimKind::kAdamW);
  EXPECT_EQ(c.optim.clip_norm, 1.0);  // AdamW default
  EXPECT_EQ(c.data.path, "some dir");
  EXPECT_EQ(c.model.recurrent_layers, (std::vector<int>{9, 19}));
  EXPECT_FALSE(c.checkpoint.resume);
  EXPECT_DOUBLE_EQ(c.optim.min_lr, 1e-4);
  EXPECT_EQ(sources.at("model.d_model"), "command line");
  EXPECT_EQ(sources.at("model.heads"), (kConfigs / "tiny.toml").string());
}

TEST(Config, UnknownKeyNamesKeyAndFile) {
  TempDir dir;
  const std::string path = dir.write("bad.toml", "[model]\nlayers = 2\nd_modle = 128\n");
  const std::string msg = error_of([&] { load_run_config(path); });
  EXPECT_TRUE(contains(msg, path + ":3")) << msg;  // file and line
  EXPECT_TRUE(contains(msg, "model.d_modle")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean model.d_model")) << msg;
  const std::string section = error_of([&] { load_run_config(dir.write("s.toml", "[modle]\nlayers = 2\n")); });
  EXPECT_TRUE(contains(section, "modle.layers")) << section;
  const std::string cli = error_of([&] { load_run_config((kConfigs / "tiny.toml").string(), {"train.lr=0.1"}); });
  EXPECT_TRUE(contains(cli, "command line: train.lr: unknown key (did you mean optim.lr?)")) << cli;
}

// A value holding a control character (TOML's \u0000 escape) is refused, naming the key and
// showing the value escaped: the message is printed as a C string (what()), which a raw NUL
// would cut short, so the whole value must be there.
TEST(Config, ControlCharactersInAValueAreShownEscaped) {
  TempDir dir;
  const std::string msg = error_of([&] { load_run_config(dir.write("nul.toml", "[model]\nvariant = \"sl\\u0000ide\"\n")); });
  EXPECT_TRUE(contains(msg, "model.variant")) << msg;
  EXPECT_TRUE(contains(msg, "nul.toml:2: model.variant: the value \"sl\\u0000ide\" holds a control character (U+0000)"))
      << msg;
}

TEST(Config, BadValuesNameKeyAndSource) {
  TempDir dir;
  std::string msg = error_of([&] { load_run_config(dir.write("t.toml", "[model]\nd_model = \"wide\"\n")); });
  EXPECT_TRUE(contains(msg, "t.toml:2: model.d_model: expected an integer, got string")) << msg;
  msg = error_of([&] { load_run_config(dir.write("r.toml", "[model]\nlayers = 0\n")); });
  EXPECT_TRUE(contains(msg, "r.toml:2: model.layers: 0 must be >= 1")) << msg;
  msg = error_of([&] { load_run_config(dir.write("e.toml", "[optim]\nschedule = \"exponential\"\n")); });
  EXPECT_TRUE(contains(msg, "optim.schedule")) << msg;
  EXPECT_TRUE(contains(msg, "e.toml")) << msg;
  msg = error_of([&] { load_run_config(dir.write("p.toml", "[train]\nprecision = \"fp8\"\n")); });
  EXPECT_TRUE(contains(msg, "train.precision: \"fp8\" is not one of fp32 | fp64")) << msg;
  msg = error_of([&] { load_run_config(dir.write("x.toml", "[model\n")); });
  EXPECT_TRUE(contains(msg, "x.toml:1: invalid TOML")) << msg;
  const std::string tiny = (kConfigs / "tiny.toml").string();
  msg = error_of([&] { load_run_config(tiny, {"model.layers=abc"}); });
  EXPECT_TRUE(contains(msg, "command line: model.layers: cannot read \"abc\" as an integer")) << msg;
  msg = error_of([&] { load_run_config(tiny, {"optim.lr=-1"}); });
  EXPECT_TRUE(contains(msg, "command line: optim.lr: -1 must be >= 0")) << msg;
  msg = error_of([&] { load_run_config(tiny, {"model.layers"}); });
  EXPECT_TRUE(contains(msg, "not key=value")) << msg;
  msg = error_of([&] { load_run_config(tiny, {"train.steps=1.5"}); });
  EXPECT_TRUE(contains(msg, "train.steps: expected an integer, got floating-point")) << msg;
}

TEST(Config, CrossKeyErrorsNameTheKeyAndWhereItWasSet) {
  TempDir dir;
  const std::string path = dir.write("w.toml", "base = \"" + (kConfigs / "tiny.toml").string() +
                                                   "\"\n[model]\nwindow = 100\n");
  std::string msg = error_of([&] { load_run_config(path); });
  EXPECT_TRUE(contains(msg, path + ": model.window: 100 does not divide model.seq_len 256")) << msg;
  msg = error_of([&] { load_run_config(path, {"model.window=48"}); });
  EXPECT_TRUE(contains(msg, "command line: model.window: 48 does not divide")) << msg;
  // xl keeps W: N = 4·W is four Transformer-XL segments per step (model.md §6).
  EXPECT_EQ(load_run_config((kConfigs / "tiny.toml").string(), {"model.variant=xl"}).model.window, 64);
  msg = error_of([&] { load_run_config((kConfigs / "tiny.toml").string(), {"model.variant=feedback:fixed:tripple"}); });
  EXPECT_TRUE(contains(msg, "command line: model.variant:")) << msg;
  EXPECT_TRUE(contains(msg, "the configuration is skip | dual, not \"tripple\"")) << msg;
  msg = error_of([&] { load_run_config((kConfigs / "tiny.toml").string(), {"model.recurrent_layers=[4]"}); });
  EXPECT_TRUE(contains(msg, "model.recurrent_layers: [4] names layer 4, outside [0, model.layers = 4)")) << msg;
  msg = error_of([&] { load_run_config((kConfigs / "tiny.toml").string(), {"data.source=shards", "data.path="}); });
  EXPECT_TRUE(contains(msg, "data.path")) << msg;
}

TEST(Config, XlWindowFollowsACommandLineSeqLen) {
  // resolve(): XL attends over its whole segment, so a model.seq_len given on the command line
  // (eval at a longer context) takes model.window along unless model.window is given there too;
  // what files set is kept as written; a window given with it is kept (N = k·W: k XL segments
  // per step, model.md §6), and one that does not divide N is refused.
  const std::string tiny = (kConfigs / "tiny.toml").string();  // N 256, W 64
  EXPECT_EQ(load_run_config(tiny, {"model.variant=xl", "model.seq_len=128"}).model.window, 128);
  EXPECT_EQ(load_run_config(tiny, {"model.variant=xl", "model.window=128", "model.seq_len=128"}).model.window, 128);
  EXPECT_EQ(load_run_config(tiny, {"model.variant=xl", "model.seq_len=128", "model.window=64"}).model.window, 64);
  const std::string msg =
      error_of([&] { load_run_config(tiny, {"model.variant=xl", "model.seq_len=128", "model.window=48"}); });
  EXPECT_TRUE(contains(msg, "command line: model.window: 48 does not divide model.seq_len 128")) << msg;
  EXPECT_EQ(load_run_config(tiny, {"model.seq_len=128"}).model.window, 64);  // other variants keep theirs
}

TEST(Config, BaseInheritanceIsRelativeAndKeyByKey) {
  TempDir dir;
  dir.write("common/parent.toml", "[model]\nlayers = 6\nd_model = 64\n[optim]\nlr = 0.5\n");
  dir.write("common/child.toml", "base = \"parent.toml\"\n[model]\nd_model = 96\n");
  const std::string leaf = dir.write("leaf.toml", "base = \"common/child.toml\"\n[optim]\nwarmup = 7\n");
  ConfigSources sources;
  const RunConfig c = load_run_config(leaf, {}, &sources);
  EXPECT_EQ(c.model.layers, 6);     // from the grandparent
  EXPECT_EQ(c.model.d_model, 96);   // the child overrides one key of the section
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.5);
  EXPECT_EQ(c.optim.warmup, 7);
  EXPECT_TRUE(contains(sources.at("model.layers"), "parent.toml"));
  EXPECT_TRUE(contains(sources.at("model.d_model"), "child.toml"));
  // Loops and missing bases are errors naming the file.
  const std::string a = dir.write("a.toml", "base = \"b.toml\"\n");
  dir.write("b.toml", "base = \"a.toml\"\n");
  EXPECT_TRUE(contains(error_of([&] { load_run_config(a); }), "inheritance loop"));
  const std::string m = dir.write("m.toml", "base = \"missing.toml\"\n");
  const std::string msg = error_of([&] { load_run_config(m); });
  EXPECT_TRUE(contains(msg, "m.toml:1: base: no such file")) << msg;
}

TEST(Config, RenderParsesBackIdenticallyForEveryShippedConfig) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    const RunConfig c = load_run_config(entry.path().string());
    const std::string text = render_toml(c);
    const RunConfig back = parse_run_config(text, "rendered " + entry.path().filename().string());
    EXPECT_TRUE(same_values(c, back)) << entry.path() << "\n" << text;
    EXPECT_EQ(render_toml(back), text) << entry.path();
  }
  EXPECT_GE(files, 33);
}

TEST(Config, RenderRoundTripsAwkwardValues) {
  RunConfig c = load_run_config((kConfigs / "tiny.toml").string(),
                                {"optim.lr=0.1", "optim.eps=1e-30", "optim.min_lr=0.033333333333333333", "train.peak_gflops=1234.5678901234567",
                                 "data.path=we\"ird\\dir\tname", "log.metrics_path=", "optim.kind=adamw",
                                 "optim.weight_decay=0.30000000000000004"});
  const RunConfig back = parse_run_config(render_toml(c), "rendered");
  EXPECT_TRUE(same_values(c, back)) << render_toml(c);
  EXPECT_EQ(back.data.path, "we\"ird\\dir\tname");
  EXPECT_EQ(back.optim.weight_decay, 0.30000000000000004);
}

TEST(Config, EveryKeyIsRenderedAndOverridable) {
  const RunConfig base = load_run_config((kConfigs / "tiny.toml").string());
  const std::string text = render_toml(base);
  for (const auto& spec : config_keys()) {
    const std::string name = spec.key.substr(spec.key.find('.') + 1);
    EXPECT_TRUE(contains(text, "\n" + name + " = ")) << spec.key;
    // Setting a key to its own rendered value through the command line is accepted.
    RunConfig c = base;
    const std::string section = "[" + spec.key.substr(0, spec.key.find('.')) + "]";
    std::string value = text.substr(text.find("\n" + name + " = ", text.find(section)) + name.size() + 4);
    value = value.substr(0, value.find("  #"));
    while (!value.empty() && value.back() == ' ') value.pop_back();
    EXPECT_NO_THROW(apply_override(c, spec.key + "=" + value)) << spec.key << " = " << value;
    EXPECT_TRUE(same_values(c, base)) << spec.key;
  }
}

}  // namespace
}  // namespace brt::launch
