# PyTorch's f16 decode attention for one Llama-3.1-70B layer (64 query
# heads, 8 kv heads, D 128) at 8K, 32K and 128K positions, timed as the
# harness times the .metal kernels: CUDA events, L2 flushed before each
# repetition. Two forms: scaled_dot_product_attention with enable_gqa=True
# (the GQA path), and the 8 query heads of a group as 8 query rows against
# their kv head (the same math, K/V read once: the best case for SDPA).
import sys

import torch
import torch.nn.functional as F

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 50
dev = "cuda"
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
print(f"torch {torch.__version__} cuda {torch.version.cuda} on {torch.cuda.get_device_name()}")
for n in (8 << 10, 32 << 10, 128 << 10):
    torch.manual_seed(0)
    q = torch.randn(1, 64, 1, 128, dtype=torch.float16, device=dev)
    k = torch.randn(1, 8, n, 128, dtype=torch.float16, device=dev)
    v = torch.randn(1, 8, n, 128, dtype=torch.float16, device=dev)
    unique = 2 * k.numel() * 2 + 2 * q.numel() * 2
    forms = {
        "sdpa enable_gqa": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "sdpa grouped rows": lambda: F.scaled_dot_product_attention(q.view(1, 8, 8, 128), k, v),
    }
    ref = forms["sdpa enable_gqa"]().float()
    for name, fn in forms.items():
        out = fn().float().reshape(ref.shape)
        assert torch.allclose(out, ref, atol=2e-3, rtol=2e-3), name
        for _ in range(3):
            fn()
        times = []
        for _ in range(iters):
            flush.fill_(1)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        times.sort()
        med, best = times[len(times) // 2], times[0]
        print(f"pytorch {name:18s} n={n>>10:4d}K median {med:8.1f} us best {best:8.1f} us "
              f"{unique/med/1e3:6.0f} GB/s on {unique/1e6:.0f} MB")
