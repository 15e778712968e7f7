"""Copies kernels/cuda/ and its rooms into <out>/kernels/cuda/ (same relative paths) rewritten
as plain C++ for the strict host emulator (docs/gpu.md "The host emulator"), .cu files becoming
.cpp:
  kernel<A><<<grid, block, smem, stream>>>(args);
    -> emu::launch(emu::config(grid, block, smem, stream), [=]() { kernel<A>(args); },
                   "kernel", "kernel<A>", BOUNDS);
     where "kernel<A>" is the key cudaFuncSetAttribute's rewrite uses too, and BOUNDS the
     kernel's __launch_bounds__ maximum (0 without one): the launch is checked against both;
  cudaFuncSetAttribute(kernel<A>, attr, v) -> emu::func_set_attribute("kernel<A>", attr, v);
  extern __shared__ T name[];  -> T* name = the emulated block's dynamic shared memory;
  __shared__ T name[N];        -> static T name[N]; emu::shared_array(&name, sizeof(name));
     (blocks run one at a time; shared_array fills it with 0xFF per block and counts its size).
Extra .cu/.cpp files (the emulator's self-test kernels) are rewritten into <out>/ by name.
Usage: transform.py <repo root> <out dir> [extra source ...]"""
import pathlib
import re
import sys

QUALIFIED = r'(?:\w+::)*\w+(?:<[^<>;]*(?:<[^<>;]*>[^<>;]*)*>)?'


def key_of(name):
    """The attribute key of a kernel as written: no spaces, no namespace qualifiers."""
    name = re.sub(r'\s+', '', name).lstrip('&')
    return re.sub(r'^(?:\w+::)+', '', name)


def launch_bounds(sources):
    """kernel name -> the expression of its __launch_bounds__ maximum."""
    bounds = {}
    pattern = re.compile(r'__launch_bounds__\s*\(\s*([^,()]+(?:\([^()]*\))?[^,()]*?)\s*(?:,[^()]*)?\)'
                         r'\s*(?:void\s+)?(\w+)\s*\(')
    for text in sources:
        for m in pattern.finditer(text):
            bounds[m.group(2)] = m.group(1).strip()
    return bounds


def rewrite(s, bounds):
    s = re.sub(r'extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;',
               lambda m: '%s* %s = reinterpret_cast<%s*>(emu::block->smem.data());' % (m.group(1), m.group(2), m.group(1)), s)
    s = re.sub(r'__shared__\s+([\w:<>, ]+?)\s+(\w+)((?:\s*\[[^\]]+\])*)\s*;',
               lambda m: 'static %s %s%s; emu::shared_array(&%s, sizeof(%s));' % (m.group(1), m.group(2), m.group(3), m.group(2), m.group(2)), s)

    def launch(m):
        kernel, cfg, args = m.group(1), m.group(2), m.group(3)
        bare = re.sub(r'<.*', '', key_of(kernel))
        return 'emu::launch(emu::config(%s), [=]() { %s(%s); }, "%s", "%s", %s);' % (
            cfg, kernel, args, bare, key_of(kernel), bounds.get(bare, '0'))
    s = re.sub(r'(' + QUALIFIED + r')\s*<<<(.*?)>>>\s*\((.*?)\);', launch, s, flags=re.S)
    s = re.sub(r'cudaFuncSetAttribute\(\s*(' + QUALIFIED + r')\s*,',
               lambda m: 'emu::func_set_attribute("%s",' % key_of(m.group(1)), s)
    return s


def main():
    src = pathlib.Path(sys.argv[1]) / 'kernels' / 'cuda'
    out = pathlib.Path(sys.argv[2])
    dst = out / 'kernels' / 'cuda'
    dst.mkdir(parents=True, exist_ok=True)
    files = [f for ext in ('*.cu', '*.cuh', '*.h', '*.cpp') for f in src.rglob(ext)]
    extra = [pathlib.Path(p) for p in sys.argv[3:]]
    texts = {f: f.read_text() for f in files + extra}
    bounds = launch_bounds(texts.values())
    for f, text in texts.items():
        folder = dst / f.parent.relative_to(src) if f in files else out
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / (f.name[:-3] + '.cpp' if f.suffix == '.cu' else f.name)
        target.write_text(rewrite(text, bounds))


if __name__ == '__main__':
    main()
