import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
hold = torch.empty(8 * 2**30, dtype=torch.bfloat16, device="cuda")  # 16 GiB held, as another program would
t = time.time()
while time.time() - t < 40:
    c = a @ b
    torch.cuda.synchronize()
print("load done", flush=True)
