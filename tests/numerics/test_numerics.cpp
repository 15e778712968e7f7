// The numerics fingerprint (runtime/numerics.h) and the BLAS core policy (runtime/blas_env.h):
// the fields a rank reports, how differences between ranks and between a checkpoint and a run
// are named, the record's round trip, and which core brt-dist chooses when none is set.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/blas_env.h"
#include "runtime/numerics.h"

namespace brt::runtime {
namespace {

Numerics fingerprint(const std::string& core, const std::string& probe, const std::string& cpu = "CPU A") {
  Numerics n;
  n.add("blas", "BLAS", "OpenBLAS 0.3.21");
  n.add("blas_core", "OpenBLAS core", core);
  n.add("gemm_probe", "GEMM probe bits", probe);
  n.add("cpu", "CPU", cpu, false);
  n.add("threads", "OpenMP threads", "1");
  return n;
}

TEST(Numerics, ThisProcessReportsEveryField) {
  const Numerics n = cpu_numerics(1);
  for (const char* key : {"blas", "blas_core", "blas_core_choice", "gemm_probe", "blas_check", "cpu", "cpu_isa",
                          "compiled_for", "compiler", "build", "threads"})
    EXPECT_FALSE(n.value(key).empty()) << key;
  EXPECT_EQ(n.value("blas").rfind("OpenBLAS 0.", 0), 0u) << n.value("blas");
  EXPECT_EQ(n.value("gemm_probe").size(), 16u);
  EXPECT_EQ(n.value("threads"), "1");
  EXPECT_EQ(blas_self_check_problem(n), "") << n.value("blas_check");
  EXPECT_NE(n.summary().find("core " + n.value("blas_core")), std::string::npos) << n.summary();
  // The same process, the same bits.
  EXPECT_EQ(cpu_numerics(1).decisive_text(), n.decisive_text());
}

TEST(Numerics, TextRoundTripKeepsEveryField) {
  const Numerics n = fingerprint("Haswell", "00ff");
  const Numerics back = Numerics::from_text(n.to_text());
  ASSERT_EQ(back.fields.size(), n.fields.size());
  EXPECT_EQ(back.to_text(), n.to_text());
  EXPECT_FALSE(back.fields[3].decisive);
}

TEST(Numerics, DifferencesNameTheFieldRanksAndHosts) {
  const std::vector<NumericsGroup> groups = {{"h1", {0, 1}, fingerprint("Haswell", "aaaa")},
                                             {"h2", {2, 3}, fingerprint("SkylakeX", "bbbb", "CPU B")}};
  EXPECT_FALSE(numerics_agree(groups));
  EXPECT_EQ(numerics_differences(groups),
            "OpenBLAS core: Haswell on ranks 0-1 on h1, SkylakeX on ranks 2-3 on h2; "
            "GEMM probe bits: aaaa on ranks 0-1 on h1, bbbb on ranks 2-3 on h2");
}

TEST(Numerics, AnInformationalFieldAloneIsNoDifference) {
  const std::vector<NumericsGroup> groups = {{"h1", {0}, fingerprint("Haswell", "aaaa", "CPU A")},
                                             {"h2", {1}, fingerprint("Haswell", "aaaa", "CPU B")}};
  EXPECT_TRUE(numerics_agree(groups));
  EXPECT_EQ(numerics_differences(groups), "");
}

TEST(Numerics, RecordRoundTripAndChange) {
  const std::vector<NumericsGroup> haswell = {{"h1", {0, 1}, fingerprint("Haswell", "aaaa")}};
  const std::vector<NumericsGroup> skylake = {{"h9", {0}, fingerprint("SkylakeX", "bbbb")}};
  const std::string a = numerics_record(haswell), b = numerics_record(skylake);
  const std::vector<NumericsGroup> back = parse_numerics_record(a);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].host, "h1");
  EXPECT_EQ(back[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(back[0].numerics.to_text(), haswell[0].numerics.to_text());
  EXPECT_EQ(numerics_record_change(a, b),
            "OpenBLAS core Haswell in the checkpoint, SkylakeX now; GEMM probe bits aaaa in the checkpoint, bbbb now");
  // Another host or rank count on the same numerics is no change; nor is an old checkpoint
  // without a record, or a record this build cannot read.
  const std::vector<NumericsGroup> moved = {{"h5", {0, 1, 2}, fingerprint("Haswell", "aaaa", "CPU C")}};
  EXPECT_EQ(numerics_record_change(a, numerics_record(moved)), "");
  EXPECT_EQ(numerics_record_change("", b), "");
  EXPECT_EQ(numerics_record_change("{not json", b), "");
  EXPECT_NE(numerics_record_lines(a, "  ").find("  ranks 0-1 on h1: OpenBLAS 0.3.21 core Haswell"), std::string::npos);
}

TEST(Numerics, AFailedSelfCheckSaysWhatToDo) {
  Numerics n = fingerprint("SkylakeX", "aaaa");
  n.add("blas_check", "BLAS self-check", "FAILED: sgemm NN 33x47x1000 is 1e+03 times its rounding bound", false);
  const std::string problem = blas_self_check_problem(n);
  EXPECT_NE(problem.find("OpenBLAS core SkylakeX"), std::string::npos) << problem;
  EXPECT_NE(problem.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << problem;
}

// docs/reliability.md "Which BLAS core": OpenBLAS's own detection is kept unless it fell back
// to pre-AVX2 kernels on an AVX2 CPU; brt-dist then runs SkylakeX on an Intel AVX-512 CPU and
// Haswell on any other, never AVX-512 kernels on another vendor's CPU.
TEST(BlasCorePolicy, KeepsRealDetectionsAndReplacesFallbacks) {
  for (const char* real : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})
    for (const bool intel_avx512 : {false, true}) EXPECT_EQ(blas_core_override(real, true, intel_avx512), "") << real;
  for (const char* fallback : {"Prescott", "Core2", "Nehalem", "Sandybridge", "Barcelona"}) {
    EXPECT_EQ(blas_core_override(fallback, true, false), "Haswell") << fallback;
    EXPECT_EQ(blas_core_override(fallback, true, true), "SkylakeX") << fallback;
  }
  EXPECT_EQ(blas_core_override("Prescott", false, false), "");  // no AVX2: OpenBLAS's choice stands
}

}  // namespace
}  // namespace brt::runtime
