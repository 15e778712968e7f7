// `brt-dist export --hf DIR CHECKPOINT`: a checkpoint as a Hugging Face folder
// (launch/cli/export/hf_export.h, docs/huggingface.md). One process; the checkpoint argument resolves
// as eval's does (a file, or a checkpoint.dir's newest committed checkpoint).
#include <cstdio>
#include <string>

#include "launch/cli/checkpoint_model.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/cli/export/hf_export.h"
#include "parallel/mpi/mpi_session.h"

namespace brt::launch {

namespace {

int run_export(parallel::MpiSession& mpi, const CommandLine& cl) {
  if (mpi.world_size() != 1) throw UsageError("export: runs as one process, not under mpirun -np " +
                                              std::to_string(mpi.world_size()));
  HfExportOptions o;
  o.dir = required_flag(cl, "hf", "DIR");
  const std::string given = flag_or(cl, "checkpoint", cl.positional.empty() ? "" : cl.positional[0]);
  // Before anything is read: an existing folder is replaced only when asked.
  if (const std::string problem = hf_export_dir_problem(o.dir); !problem.empty() && !cl.flags.count("force"))
    throw UsageError(problem);
  o.checkpoint = resolve_checkpoint_argument(mpi, given, "export");
  o.tokenizer = flag_or(cl, "tokenizer", "");
  o.allow_tokenizer_mismatch = cl.flags.count("allow-tokenizer-mismatch") > 0;
  const HfExportReport r = write_hf_export(o);
  if (!r.note.empty()) std::fprintf(stderr, "brt-dist export: %s\n", r.note.c_str());
  if (!cl.flags.count("quiet"))
    std::printf("%s: %lld tensors (%lld parameters, %.1f MB float32)%s%s, from %s\n", o.dir.c_str(),
                (long long)r.tensors, (long long)r.parameters, double(r.bytes) / 1e6,
                r.tokenizer.empty() ? "" : ", tokenizer ", r.tokenizer.c_str(), o.checkpoint.c_str());
  return 0;
}

}  // namespace

int command_export(int argc, char** argv) {
  return parallel::run_mpi_main(
      argc, argv,
      [&](parallel::MpiSession& mpi) {
        const CommandLine cl = parse_command_line(argc, argv, {}, {"force", "quiet", "allow-tokenizer-mismatch"});
        reject_unknown_flags(cl, {"hf", "checkpoint", "tokenizer", "force", "quiet", "allow-tokenizer-mismatch"});
        reject_extra_arguments(cl, cl.flags.count("checkpoint") ? 0 : 1);
        if (!cl.overrides.empty())
          throw UsageError("export: takes no key=value (got " + cl.overrides.front() + "): the checkpoint's config "
                           "is the model's");
        return run_export(mpi, cl);
      },
      "brt-dist export");
}

}  // namespace brt::launch
