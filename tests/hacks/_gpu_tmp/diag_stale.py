# Mimics the harness's per-trial order on CUDA and reports whether a fresh allocation returns the
# reference's freed intermediate (pre-ReLU GEMM for L3_05, x*rsqrt(ms) for L2_04).
import sys, torch, importlib.util
def load(pid):
    spec = importlib.util.spec_from_file_location(pid, f"/tmp/head/envs/builtin/problems/{pid}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
def clone(a): return [t.clone() for t in a]
dev = torch.device("cuda")
for pid in ["L3_05_linear_bias_relu", "L2_04_rms_norm"]:
    p = load(pid)
    torch.manual_seed(1)
    with torch.device(dev):
        model = p.Model(*p.get_init_inputs())
    with torch.no_grad():
        for trial in range(3):
            torch.manual_seed(10 + trial)
            with torch.device(dev):
                inputs = p.get_inputs()
            expected = model(*clone(inputs))
            torch.cuda.synchronize()
            xs = clone(inputs)
            x = xs[0]
            if pid.startswith("L3"):
                buf = torch.empty((x.shape[0], model.linear.out_features), device=dev)
                pre = torch.nn.functional.linear(x, model.linear.weight, model.linear.bias)
                print(pid, trial, "empty==pre-relu GEMM:", torch.equal(buf, pre), " relu(buf)==expected:", torch.allclose(buf.clamp_min(0), expected))
            else:
                buf = torch.empty_like(x)
                tmp = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + model.eps)
                print(pid, trial, "empty==x*rsqrt:", torch.equal(buf, tmp), " buf*w==expected:", torch.allclose(buf * model.weight, expected))
            del inputs, expected, xs, x, buf
