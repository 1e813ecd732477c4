#!/usr/bin/python3
"""Independent PyTorch reference for optkit's GPTQ and SparseGPT 2:4 (the algorithms as the GPTQ
and SparseGPT papers and their reference code describe them), used as a test oracle and as the
baseline of tests/perf/perf_gptq. Never a dependency of optkit.

  gptq_reference.py golden OUT.safetensors    writes small cases with expected reconstructions
  gptq_reference.py time ROWS COLS TOKENS OUT.safetensors
                                              times the Hessian and GPTQ int4 g128 (act-order) on
                                              random data, prints JSON, saves W, H and Q for optkit
"""
import json
import resource
import struct
import sys
import time

import torch


def grid(w, bits, group):
    """Static symmetric groups: scale = max|w| / ((qmax - qmin) / 2), rounded to bf16."""
    rows, cols = w.shape
    qmax, qmin = 2 ** (bits - 1) - 1, -(2 ** (bits - 1))
    scales = torch.empty(rows, (cols + group - 1) // group)
    for g in range(scales.shape[1]):
        block = w[:, g * group:(g + 1) * group]
        m = torch.maximum(block.abs().amax(dim=1), torch.zeros(rows))
        s = (m / ((qmax - qmin) / 2)).clamp(min=torch.finfo(torch.float32).eps)
        scales[:, g] = s.to(torch.bfloat16).float().clamp(min=torch.finfo(torch.float32).eps)
    return scales, qmin, qmax


def quantize(x, s, qmin, qmax, midrise=False):
    """Mid-tread levels q*s, or mid-rise levels (q + 1/2)*s (no zero level)."""
    if midrise:
        return (torch.round(torch.clamp(x / s - 0.5, qmin, qmax)) + 0.5) * s
    return torch.round(torch.clamp(x / s, qmin, qmax)) * s


def gptq(W, H, bits, group, block=128, percdamp=0.01, actorder=False, sparse24=False, midrise=False):
    W = W.clone().float()
    H = H.clone().float()
    rows, cols = W.shape
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    scales, qmin, qmax = grid(W, bits, group) if bits else (None, 0, 0)
    perm = torch.argsort(torch.diag(H), descending=True, stable=True) if actorder else torch.arange(cols)
    W = W[:, perm]
    H = H[perm][:, perm]
    damp = percdamp * torch.mean(torch.diag(H))
    H[range(cols), range(cols)] += damp
    L = torch.linalg.cholesky(H)
    Hinv = torch.cholesky_inverse(L)
    U = torch.linalg.cholesky(Hinv, upper=True).float()
    Q = torch.zeros_like(W)
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        U1 = U[i1:i2, i1:i2]
        mask = torch.zeros_like(W1, dtype=torch.bool)
        for i in range(i2 - i1):
            if sparse24 and i % 4 == 0:
                score = W1[:, i:i + 4] ** 2 / torch.diag(U1)[i:i + 4].reshape(1, -1) ** 2
                low = torch.topk(score, 2, dim=1, largest=False)[1]
                mask[:, i:i + 4].scatter_(1, low, True)
            w = W1[:, i]
            d = U1[i, i]
            if bits:
                s = scales[:, perm[i1 + i] // group]
                q = quantize(w, s, qmin, qmax, midrise)
            else:
                q = w.clone()
            if sparse24:
                q[mask[:, i]] = 0
            Q1[:, i] = q
            err = (w - q) / d
            W1[:, i:] -= err.unsqueeze(1) @ U1[i, i:].unsqueeze(0)
            Err1[:, i] = err
        Q[:, i1:i2] = Q1
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    out = torch.empty_like(Q)
    out[:, perm] = Q
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().float().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def golden(path):
    torch.manual_seed(7)
    rows, cols, tokens = 48, 96, 400
    # Inputs with correlated channels and a few outliers, like real activations.
    mix = torch.randn(cols, cols) * 0.3 + torch.eye(cols)
    X = torch.randn(tokens, cols) @ mix
    X[:, 5] *= 8
    X[:, 17] = 0  # a dead input channel
    W = torch.randn(rows, cols) * 0.05
    H = 2.0 * X.T @ X / 4  # 4 "sequences"
    cases = {"X": X, "W": W}
    cases["gptq_int4_g32"] = gptq(W, H, 4, 32, block=32)
    cases["gptq_int4_g32_actorder"] = gptq(W, H, 4, 32, block=32, actorder=True)
    cases["gptq_int8_channel"] = gptq(W, H, 8, cols, block=32)
    cases["sparsegpt_24"] = gptq(W, H, 0, cols, block=32, sparse24=True)
    cases["sparsegpt_24_int4_g32"] = gptq(W, H, 4, 32, block=32, sparse24=True)
    cases["sparsegpt_24_int2_g32_midrise"] = gptq(W, H, 2, 32, block=32, sparse24=True, midrise=True)
    write_safetensors(path, cases)


def timing(rows, cols, tokens, out):
    torch.manual_seed(0)
    X = torch.randn(tokens, cols) @ (torch.eye(cols) + 0.05 * torch.randn(cols, cols))
    W = torch.randn(rows, cols) * 0.02
    t0 = time.perf_counter()
    H = 2.0 * X.T @ X / 128
    t1 = time.perf_counter()
    del X
    Q = gptq(W, H, 4, 128, block=128, actorder=True)
    t2 = time.perf_counter()
    err = ((W - Q) @ H * (W - Q)).sum() / ((W @ H) * W).sum()
    print(json.dumps({"hessian_s": t1 - t0, "gptq_s": t2 - t1, "total_s": t2 - t0, "relative_error": float(err),
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "threads": torch.get_num_threads()}))
    write_safetensors(out, {"W": W, "H": H, "Q": Q})


if __name__ == "__main__":
    if sys.argv[1] == "golden":
        golden(sys.argv[2])
    else:
        timing(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
