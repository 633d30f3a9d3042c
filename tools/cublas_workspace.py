# cuBLAS / cuBLASLt workspace bytes that torch's caching allocator holds after the first GEMMs
import torch
x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
m0 = torch.cuda.memory_allocated()
y = x @ w
torch.cuda.synchronize()
m1 = torch.cuda.memory_allocated()
y.sum().backward()
torch.cuda.synchronize()
m2 = torch.cuda.memory_allocated()
b = torch.baddbmm(torch.empty(4, 64, 64, device="cuda", dtype=torch.bfloat16), torch.randn(4, 64, 32, device="cuda", dtype=torch.bfloat16), torch.randn(4, 32, 64, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()
m3 = torch.cuda.memory_allocated()
print({"after_first_matmul_bytes": m1 - m0 - 256 * 256 * 2, "after_backward_bytes": m2 - m0, "after_baddbmm_bytes": m3 - m0,
       "max_allocated_bytes": torch.cuda.max_memory_allocated()}, flush=True)
