"""Copies kernels/cuda/ into <out>/kernels/cuda/ rewritten as plain C++ for the host emulator
(docs/gpu.md): `kernel<<<grid, block, smem, stream>>>(args);` becomes
`emu::launch(grid, block, smem, stream, [=]() { kernel(args); }, "kernel");`, dynamic shared memory
becomes the emulated block's buffer, and .cu files become .cpp.
Usage: transform.py <repo root> <out dir>"""
import re, sys, pathlib
src = pathlib.Path(sys.argv[1]) / 'kernels' / 'cuda'
dst = pathlib.Path(sys.argv[2]) / 'kernels' / 'cuda'
dst.mkdir(parents=True, exist_ok=True)
for f in list(src.glob('*.cu')) + list(src.glob('*.cuh')) + list(src.glob('*.h')) + list(src.glob('*.cpp')):
    s = f.read_text()
    s = s.replace('extern __shared__ float smem[];', 'float* smem = reinterpret_cast<float*>(emu::block->smem.data());')
    s = re.sub(r'(\w+(?:<[^<>;]*>)?)<<<(.*?)>>>\((.*?)\);',
               lambda m: 'emu::launch(%s, [=]() { %s(%s); }, "%s");' % (m.group(2), m.group(1), m.group(3), re.sub(r'<.*', '', m.group(1))), s, flags=re.S)
    out = dst / (f.name[:-3] + '.cpp' if f.suffix == '.cu' else f.name)
    out.write_text(s)
