"""tools/check_structure.py on small planted trees: each rule names the file and the rule it
breaks, and a tree that keeps the rules passes (docs/architecture.md "The rules")."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'check_structure.py')


def run_checker(files):
    """Writes {path: text} into a fresh tree and runs the checker on it: (exit status, stdout)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as f:
                f.write(text)
        done = subprocess.run([sys.executable, CHECKER, '--functions', root], capture_output=True, text=True)
        return done.returncode, done.stdout


# core/ with a room below the model (layers) and the model at the root built from it.
GOOD = {
    'core/param_store.h': '#pragma once\n',
    'core/layers/mlp.h': '#include "core/param_store.h"\n',
    'core/model.h': '#include "core/layers/mlp.h"\n',
    'kernels/backend.h': '#pragma once\n',
}


class CheckStructureTest(unittest.TestCase):
    def test_a_tree_that_keeps_the_rules_passes(self):
        self.assertEqual(run_checker(GOOD), (0, ''))

    def test_an_upward_include_between_top_folders_is_named(self):
        rc, out = run_checker({**GOOD, 'kernels/cpu.h': '#include "core/model.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("kernels/cpu.h: includes core/model.h (kernels/ may use nothing)", out)

    def test_a_cycle_between_rooms_names_the_includes_that_close_it(self):
        rc, out = run_checker({**GOOD, 'core/layers/mlp.cpp': '#include "core/model.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn('include cycle between rooms core, core/layers:', out)
        self.assertIn('core/layers/mlp.cpp -> core/model.h', out)
        self.assertIn('core/model.h -> core/layers/mlp.h', out)

    def test_modules_of_one_root_may_use_each_other(self):
        rc, _ = run_checker({**GOOD, 'core/flops.h': '#include "core/config.h"\n',
                             'core/config.cpp': '#include "core/flops.h"\n'})
        self.assertEqual(rc, 0)

    def test_a_launch_room_may_not_include_a_room_above_it(self):
        rc, out = run_checker({'launch/config/config.h': '#include "launch/train/trainer.h"\n',
                               'launch/train/trainer.h': '#pragma once\n'})
        self.assertEqual(rc, 1)
        self.assertIn('launch/config/config.h: includes launch/train/trainer.h', out)

    def test_a_long_file_and_a_long_function_are_named(self):
        body = 'int f() {\n' + '  int x = 0;\n' * 85 + '  return x;\n}\n'
        rc, out = run_checker({**GOOD, 'data/long.cpp': '// filler\n' * 600 + body})
        self.assertEqual(rc, 1)
        self.assertIn('data/long.cpp: 688 lines (at most 600; split it by concern)', out)
        self.assertIn('data/long.cpp:601: f is 88 lines (at most 80; split it)', out)


if __name__ == '__main__':
    unittest.main()
