# The unfused attention core as dot_product_attention.py (local) runs it, forward + backward, timed:
# baddbmm into a buffer, a view, masked_fill_ in place, softmax, dropout, bmm.
import json, sys, torch
def timed(fn, reps=10):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / reps / 1e3
out = []
for b, n, sq, d in ((4, 16, 2048, 64), (1, 16, 8192, 64), (2, 16, 4096, 64), (1, 16, 16384, 64), (2, 32, 2048, 128), (1, 32, 4096, 128)):
    bh = b * n
    q = torch.randn(sq, bh, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(sq, bh, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(sq, bh, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    buf = torch.empty(bh, sq, sq, device="cuda", dtype=torch.bfloat16)
    mask = torch.triu(torch.ones(sq, sq, device="cuda", dtype=torch.bool), diagonal=1)
    go = torch.randn(bh, sq, d, device="cuda", dtype=torch.bfloat16)
    def full():
        scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=0.125)
        s4 = scores.view(b, n, sq, sq)
        s4.masked_fill_(mask, -10000.0)
        p = torch.softmax(s4, dim=-1)
        p = torch.nn.functional.dropout(p, 0.1, training=True)
        ctx = torch.bmm(p.view(bh, sq, sq), v.transpose(0, 1))
        ctx.backward(go)
    def mm_only():
        scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=0.125)
        ctx = torch.bmm(scores, v.transpose(0, 1))
        ctx.backward(go)
    try:
        out.append({"b": b, "heads": n, "s": sq, "d": d, "fwd_bwd_s": timed(full), "matmuls_only_s": timed(mm_only)})
    except Exception as exc:
        out.append({"b": b, "heads": n, "s": sq, "d": d, "error": repr(exc)})
    del q, k, v, buf, mask, go
    torch.cuda.empty_cache()
    print(out[-1], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
