#!/usr/bin/python3
"""compressed-tensors conformance of optkit's newer schemes: fp8_block, nvfp4, nvfp4a16, mxfp4, awq_w4a16, w4a8,
fp8_dynamic_kv.

A reader written from the formats' definitions (compressed-tensors 0.18's presets, compressors and
scale rules; vLLM's loaders; OCP FP8 E4M3 and FP4 E2M1), sharing no code with optkit. For each
scheme, optkit compresses a tiny model, and this reader checks:
  1. the quantization_config vLLM dispatches on: quant_method, format, the config group's
     arguments exactly as compressed-tensors' preset serialises them (long-standing keys only);
  2. every decoder linear's tensors: names, dtypes and shapes, and nothing else in their place;
  3. the quantization: scales derived here from the source weights (FP8 block tiles; NVFP4's
     global scale shared by q/k/v and by gate/up, and its FP8 group scales; MXFP4's E8M0
     exponents) equal optkit's exactly, and the stored codes are the nearest grid values (ties to
     the even code) for all but a handful of values on a tie;
     For awq_w4a16 (int4 asymmetric groups of 128 with zero points packed down the columns), whose
     factors s are folded into the norms, s is read back as old norm / new norm and the codes of
     q/k/v and gate/up checked as the nearest on W·diag(s) (o_proj, unsmoothed under grouped-query
     attention, exactly on W clamped at one of AWQ's clip bounds). For w4a8 (GPTQ int4 groups of 128 stored as int8 values, int8
     activations per token) the static group scales max|w|/7.5 are re-derived and the values
     checked to lie on the int4 grid. For fp8_dynamic_kv, the per-channel FP8 scales max|w|/448 and
     codes, and the kv_cache_scheme with one positive k_scale and v_scale per layer in the model's
     dtype;
  4. the runtime: the weights optkit's runtime dequantizes equal this reader's dequantization, and
     its products x·Wᵀ equal this reader's emulation of the scheme's activation quantization (FP8
     per token in groups of 128; NVFP4 groups of 16 under input_global_scale; int8 per token with
     scale max|x|/127, as vLLM's kernels quantize).
  5. NVFP4 W4A4 on a mixture of experts (MOE_MODEL, with a shared expert): every expert's
     matrices, their shared global and input scales, the routers untouched, and the runtime's
     expert products (check_experts_nvfp4).
usage: compressed_tensors_reader.py OPTKIT DEQUANTIZE_LINEARS SOURCE_MODEL CALIB_TEXT MOE_MODEL [WORKDIR]
(without WORKDIR, a temporary folder removed at the end)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

F32 = np.float32

# ---------------------------------------------------------------- number formats, from their definitions


def fp8_e4m3_table():
    """Value of every E4M3 (fn) byte: bias 7, subnormals at e=0, 0x7f/0xff NaN, no infinities."""
    values = np.zeros(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 0x7
        if e == 15 and m == 7:
            values[b] = np.nan
        elif e == 0:
            values[b] = sign * (m / 8.0) * 2.0**-6
        else:
            values[b] = sign * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return values


FP8 = fp8_e4m3_table()
FP8_POSITIVE = FP8[:127]  # codes 0..126 ascending: 0 .. 448
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def nearest_code(magnitudes, grid):
    """Index of the nearest value of an ascending grid, ties to the even index."""
    hi = np.clip(np.searchsorted(grid, magnitudes), 1, len(grid) - 1)
    lo = hi - 1
    d_lo, d_hi = magnitudes - grid[lo], grid[hi] - magnitudes
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo)


def to_fp8_code(values):
    """Round-to-nearest-even E4M3 code of finite values within ±448."""
    v = np.asarray(values, dtype=np.float64)
    code = nearest_code(np.abs(v), FP8_POSITIVE)
    return (code | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def to_fp4_code(values):
    """E2M1 code (bit 3 sign, bits 0-2 index 0, ½, 1, 1½, 2, 3, 4, 6) of values within ±6, nearest
    value, ties to the even code; negative values keep the sign bit even when they round to 0."""
    v = np.asarray(values, dtype=np.float64)
    code = nearest_code(np.abs(v), E2M1)
    return (code | np.where(v < 0, 0x8, 0)).astype(np.uint8)


def fp4_value(codes):
    sign = np.where(codes & 0x8, -1.0, 1.0)
    return sign * E2M1[codes & 0x7]


def bf16_round(values):
    """float32 values rounded to BF16 precision (nearest even), as float32."""
    u = np.asarray(values, dtype=F32).view(np.uint32).astype(np.uint64)
    rounded = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return rounded.astype(np.uint32).view(F32)


# ---------------------------------------------------------------- safetensors


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        raw = data[t["data_offsets"][0] : t["data_offsets"][1]]
        out[name] = (t["dtype"], t["shape"], raw)
    return out


def as_float(tensor):
    dtype, shape, raw = tensor
    if dtype == "F32":
        a = np.frombuffer(raw, dtype=F32)
    elif dtype == "BF16":
        a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(F32)
    elif dtype == "F8_E4M3":
        a = FP8[np.frombuffer(raw, dtype=np.uint8)].astype(F32)
    else:
        raise SystemExit(f"cannot read {dtype} as floats")
    return a.reshape(shape)


def as_bytes(tensor):
    return np.frombuffer(tensor[2], dtype=np.uint8).reshape(tensor[1])


def read_folder(folder):
    tensors = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(folder, name)))
    return tensors


# ---------------------------------------------------------------- the schemes


def args(num_bits, strategy, group_size=None, dynamic=False, block=None):
    out = {"num_bits": num_bits, "type": "float", "symmetric": True, "strategy": strategy, "dynamic": dynamic,
           "group_size": group_size}
    if block:
        out["block_structure"] = block
    return out


SCHEMES = {
    "fp8_block": {"format": "float-quantized", "weights": args(8, "block", block=[128, 128]),
                  "input_activations": args(8, "group", 128, True)},
    "nvfp4": {"format": "nvfp4-pack-quantized", "weights": args(4, "tensor_group", 16),
              "input_activations": args(4, "tensor_group", 16, "local")},
    "nvfp4a16": {"format": "nvfp4-pack-quantized", "weights": args(4, "tensor_group", 16), "input_activations": None},
    "mxfp4": {"format": "mxfp4-pack-quantized", "weights": args(4, "group", 32), "input_activations": None},
    "awq_w4a16": {"format": "pack-quantized", "weights": dict(args(4, "group", 128), type="int", symmetric=False),
                  "input_activations": None},
    "w4a8": {"format": "int-quantized", "weights": dict(args(4, "group", 128), type="int"),
             "input_activations": dict(args(8, "token", dynamic=True), type="int")},
    "fp8_dynamic_kv": {"format": "float-quantized", "weights": args(8, "channel"),
                       "input_activations": args(8, "token", dynamic=True), "kv_cache": args(8, "tensor")},
}
# The norm in front of each linear's input, whose change carries AWQ's factors; up_proj, whose rows
# carry down_proj's factors too, and down_proj are checked through the runtime only.
AWQ_NORM = {"self_attn.q_proj": "input_layernorm", "self_attn.k_proj": "input_layernorm",
            "self_attn.v_proj": "input_layernorm", "mlp.gate_proj": "post_attention_layernorm"}
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]
FUSED = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["mlp.gate_proj", "mlp.up_proj"]]
# Values allowed to round the other way (a scaled value within float rounding of a tie).
MAX_TIE_FLIPS = 1e-4


def fail(message):
    raise SystemExit(f"FAIL: {message}")


def check_config(folder, scheme):
    q = json.load(open(os.path.join(folder, "config.json")))["quantization_config"]
    want = SCHEMES[scheme]
    if q.get("quant_method") != "compressed-tensors" or q.get("format") != want["format"]:
        fail(f"{scheme}: quant_method/format {q.get('quant_method')}/{q.get('format')}, expected {want['format']}")
    if q.get("sparsity_config") != {} or q.get("kv_cache_scheme") != want.get("kv_cache") or "lm_head" not in q.get(
        "ignore", []
    ):
        fail(f"{scheme}: sparsity_config, kv_cache_scheme or ignore differ from compressed-tensors'")
    groups = q["config_groups"]
    if len(groups) != 1:
        fail(f"{scheme}: {len(groups)} config groups")
    group = next(iter(groups.values()))
    if group["targets"] != ["Linear"] or group["weights"] != want["weights"]:
        fail(f"{scheme}: weights {group['weights']} != {want['weights']}")
    if group.get("input_activations") != want["input_activations"]:
        fail(f"{scheme}: input_activations {group.get('input_activations')} != {want['input_activations']}")


def expect_tensor(tensors, name, dtype, shape):
    if name not in tensors:
        fail(f"{name} is missing")
    if tensors[name][0] != dtype or list(tensors[name][1]) != list(shape):
        fail(f"{name} is {tensors[name][0]} {tensors[name][1]}, expected {dtype} {shape}")


def unpack_fp4(packed):
    """[rows, cols/2] bytes → [rows, cols] codes, column 2i in the low nibble."""
    rows, half = packed.shape
    codes = np.empty((rows, half * 2), dtype=np.uint8)
    codes[:, 0::2] = packed & 0xF
    codes[:, 1::2] = packed >> 4
    return codes


def fraction_differing(a, b):
    return float(np.mean(a != b))


def fp8_block(tensors, source, module):
    """→ dequantized weight, after checking tiles' scales and codes against the source."""
    w = source[module + ".weight"]
    rows, cols = w.shape
    tiles = (-(-rows // 128), -(-cols // 128))
    expect_tensor(tensors, module + ".weight", "F8_E4M3", [rows, cols])
    expect_tensor(tensors, module + ".weight_scale", "BF16", list(tiles))
    scales = as_float(tensors[module + ".weight_scale"])
    want = np.zeros(tiles, dtype=F32)
    for i in range(tiles[0]):
        for j in range(tiles[1]):
            tile = w[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128]
            want[i, j] = bf16_round(F32(np.abs(tile).max()) / F32(448.0))
    if not np.array_equal(scales, want):
        fail(f"{module}: block scales differ from amax/448 per 128x128 tile")
    per_value = np.repeat(np.repeat(scales, 128, axis=0), 128, axis=1)[:rows, :cols]
    codes = as_bytes(tensors[module + ".weight"])
    expected = to_fp8_code(np.clip(w / per_value, -448, 448))
    if fraction_differing(codes, expected) > MAX_TIE_FLIPS:
        fail(f"{module}: {fraction_differing(codes, expected):.2e} of FP8 codes are not the nearest")
    return (FP8[codes] * per_value).astype(F32)


def nvfp4(tensors, source, module, fused_absmax, activations):
    w = source[module + ".weight"]
    rows, cols = w.shape
    expect_tensor(tensors, module + ".weight_packed", "U8", [rows, cols // 2])
    expect_tensor(tensors, module + ".weight_scale", "F8_E4M3", [rows, cols // 16])
    expect_tensor(tensors, module + ".weight_global_scale", "F32", [1])
    if activations:
        expect_tensor(tensors, module + ".input_global_scale", "F32", [1])
    elif module + ".input_global_scale" in tensors:
        fail(f"{module}: input_global_scale without FP4 activations")
    g = as_float(tensors[module + ".weight_global_scale"])[0]
    if g != F32(448.0 * 6.0) / F32(fused_absmax):
        fail(f"{module}: global scale {g} != 448·6 / {fused_absmax} (the fused set's largest |w|)")
    groups = w.reshape(rows, cols // 16, 16)
    local = bf16_round(np.abs(groups).max(axis=2).astype(F32) / F32(6.0)) * g
    want = to_fp8_code(np.minimum(local, 448.0))
    want = np.where((want & 0x7F) == 0, to_fp8_code(0.125), want)
    stored = as_bytes(tensors[module + ".weight_scale"])
    if not np.array_equal(stored, want):
        fail(f"{module}: {fraction_differing(stored, want):.2e} of the FP8 group scales differ")
    effective = (FP8[stored].astype(F32) / g).astype(F32)
    per_value = np.repeat(effective, 16, axis=1)
    codes = unpack_fp4(as_bytes(tensors[module + ".weight_packed"]))
    expected = to_fp4_code(bf16_round(np.clip(w / per_value, -6, 6)))
    if fraction_differing(codes, expected) > MAX_TIE_FLIPS:
        fail(f"{module}: {fraction_differing(codes, expected):.2e} of FP4 codes are not the nearest")
    return (fp4_value(codes) * per_value).astype(F32)


def mxfp4(tensors, source, module):
    w = source[module + ".weight"]
    rows, cols = w.shape
    expect_tensor(tensors, module + ".weight_packed", "U8", [rows, cols // 2])
    expect_tensor(tensors, module + ".weight_scale", "U8", [rows, cols // 32])
    amax = bf16_round(np.abs(w.reshape(rows, cols // 32, 32)).max(axis=2))
    mantissa, exponent = np.frexp(amax.astype(np.float64))  # amax = mantissa · 2^exponent, mantissa in [½, 1)
    power = exponent - 1 + (mantissa >= 0.875)  # 2^power: amax rounded to a power of two, up from 1.75
    want = np.where(amax > 0, np.clip(power + 127 - 2, 0, 255), 0).astype(np.uint8)
    stored = as_bytes(tensors[module + ".weight_scale"])
    if not np.array_equal(stored, want):
        fail(f"{module}: {fraction_differing(stored, want):.2e} of the E8M0 exponents differ")
    per_value = np.repeat(np.ldexp(1.0, stored.astype(np.int64) - 127), 32, axis=1)
    codes = unpack_fp4(as_bytes(tensors[module + ".weight_packed"]))
    expected = to_fp4_code(np.clip(w / per_value, -6, 6))
    if fraction_differing(codes, expected) > MAX_TIE_FLIPS:
        fail(f"{module}: {fraction_differing(codes, expected):.2e} of FP4 codes are not the nearest")
    return (fp4_value(codes) * per_value).astype(F32)


def unpack_int32(words, count, bits, axis):
    """compressed-tensors pack_to_int32 undone: ⌊32/bits⌋ values per word, LSB first, offset 2^(bits−1)."""
    per_word = 32 // bits
    w = words.astype(np.int64) & 0xFFFFFFFF
    parts = [(w >> (bits * i)) & ((1 << bits) - 1) for i in range(per_word)]
    stacked = np.stack(parts, axis=axis + 1)  # word w's value i next to it: index w·per_word + i
    shape = list(words.shape)
    shape[axis] *= per_word
    values = stacked.reshape(shape)
    values = values[:, :count] if axis == 1 else values[:count, :]
    return values - (1 << (bits - 1))


def asymmetric_codes(x, scale, zero):
    """q = clamp(round_half_even(x / s + z), −8, 7)."""
    return np.clip(np.rint(x / scale + zero), -8, 7)


def group_absmax(w):
    """max |w| of each row's group of 128 columns, repeated over the group's columns."""
    cols = w.shape[1]
    absmax = np.stack([np.abs(w[:, g : g + 128]).max(axis=1) for g in range(0, cols, 128)], axis=1)
    return np.repeat(absmax, 128, axis=1)[:, :cols]


def clamp_groups(w, b):
    """Each row's group of 128 columns clamped to ±b·max|w| (in float32, as optkit computes it)."""
    limit = (group_absmax(w).astype(np.float64) * float(b)).astype(F32)
    return np.clip(w, -limit, limit)


def awq_w4a16(tensors, source, module, smoothing):
    w = source[module + ".weight"]
    rows, cols = w.shape
    groups = -(-cols // 128)
    expect_tensor(tensors, module + ".weight_packed", "I32", [rows, -(-cols // 8)])
    expect_tensor(tensors, module + ".weight_scale", "BF16", [rows, groups])
    expect_tensor(tensors, module + ".weight_zero_point", "I32", [-(-rows // 8), groups])
    expect_tensor(tensors, module + ".weight_shape", "I64", [2])
    if list(np.frombuffer(tensors[module + ".weight_shape"][2], dtype=np.int64)) != [rows, cols]:
        fail(f"{module}: weight_shape is not [{rows}, {cols}]")
    words = np.frombuffer(tensors[module + ".weight_packed"][2], dtype=np.int32).reshape(rows, -1)
    q = unpack_int32(words, cols, 4, axis=1)
    zp_words = np.frombuffer(tensors[module + ".weight_zero_point"][2], dtype=np.int32).reshape(-1, groups)
    zero = unpack_int32(zp_words, rows, 4, axis=0)
    scale = as_float(tensors[module + ".weight_scale"])
    per_value = np.repeat(scale, 128, axis=1)[:, :cols]
    zero_per_value = np.repeat(zero, 128, axis=1)[:, :cols]
    dequantized = ((q - zero_per_value) * per_value).astype(F32)
    if smoothing is not None:
        x = w * smoothing[None, :]
        flips = fraction_differing(asymmetric_codes(x, per_value, zero_per_value), q)
        if flips > 0.01:
            fail(f"{module}: {flips:.2e} of its codes are not the nearest on W·diag(s) (s from the norms)")
        back = dequantized / smoothing[None, :]
        if np.linalg.norm(back - w) > 0.2 * np.linalg.norm(w):  # int4 groups: ~0.1
            fail(f"{module}: Ŵ·diag(s)⁻¹ is {np.linalg.norm(back - w) / np.linalg.norm(w):.3f} away from W")
    elif module.endswith("o_proj"):
        # AWQ's clip search (llm-awq's auto_clip) may clamp each group to ±b·max|w| first, b one
        # of 1, 0.95, …, 0.55: the stored grid must be the min/max grid of the group clamped at
        # one of those bounds, and the codes the nearest on the clamped values.
        bound = np.full((rows, groups), np.nan, dtype=F32)
        for k in reversed(range(10)):
            b = F32(1.0 - k / 20.0)
            clamped = clamp_groups(w, b)
            lo = np.minimum(np.stack([clamped[:, g : g + 128].min(axis=1) for g in range(0, cols, 128)], axis=1), 0)
            hi = np.maximum(np.stack([clamped[:, g : g + 128].max(axis=1) for g in range(0, cols, 128)], axis=1), 0)
            want_scale = bf16_round(((hi - lo) / F32(15.0)).astype(F32))
            want_zero = np.clip(np.rint(-8 - lo / want_scale), -8, 7)
            bound[(scale == want_scale) & (zero == want_zero)] = b
        if np.isnan(bound).any():
            fail(f"{module}: asymmetric scales or zero points are not (max − min)/15 and −8 − min/s of the group "
                 "clamped at any of AWQ's clip bounds")
        clamped = np.clip(w, -np.repeat(bound, 128, axis=1)[:, :cols] * group_absmax(w),
                          np.repeat(bound, 128, axis=1)[:, :cols] * group_absmax(w))
        if fraction_differing(asymmetric_codes(clamped, per_value, zero_per_value), q) > MAX_TIE_FLIPS:
            fail(f"{module}: its codes are not the nearest")
    return dequantized


def fp8_channel(tensors, source, module):
    w = source[module + ".weight"]
    rows, cols = w.shape
    expect_tensor(tensors, module + ".weight", "F8_E4M3", [rows, cols])
    expect_tensor(tensors, module + ".weight_scale", "BF16", [rows, 1])
    scale = as_float(tensors[module + ".weight_scale"])
    if not np.array_equal(scale[:, 0], bf16_round((np.abs(w).max(axis=1) / F32(448.0)).astype(F32))):
        fail(f"{module}: per-channel scales differ from max|w|/448")
    codes = as_bytes(tensors[module + ".weight"])
    if fraction_differing(codes, to_fp8_code(np.clip(w / scale, -448, 448))) > MAX_TIE_FLIPS:
        fail(f"{module}: its FP8 codes are not the nearest")
    return (FP8[codes] * scale).astype(F32)


def check_kv_scales(tensors, layer):
    for name in ("k_scale", "v_scale"):
        full = f"model.layers.{layer}.self_attn.{name}"
        expect_tensor(tensors, full, "BF16", [1])
        if not as_float(tensors[full])[0] > 0:
            fail(f"{full} is not a positive scale")


def w4a8(tensors, source, module):
    w = source[module + ".weight"]
    rows, cols = w.shape
    groups = -(-cols // 128)
    expect_tensor(tensors, module + ".weight", "I8", [rows, cols])
    expect_tensor(tensors, module + ".weight_scale", "BF16", [rows, groups])
    values = np.frombuffer(tensors[module + ".weight"][2], dtype=np.int8).reshape(rows, cols)
    if values.min() < -8 or values.max() > 7:
        fail(f"{module}: int8-stored values outside the int4 grid [-8, 7]")
    scale = as_float(tensors[module + ".weight_scale"])
    absmax = np.stack([np.abs(w[:, g : g + 128]).max(axis=1) for g in range(0, cols, 128)], axis=1)
    if not np.array_equal(scale, bf16_round((absmax / F32(7.5)).astype(F32))):
        fail(f"{module}: group scales differ from max|w|/7.5 of the original weight's groups (static groups)")
    return (values * np.repeat(scale, 128, axis=1)[:, :cols]).astype(F32)


def quantize_activations(x, scheme, input_global_scale):
    """The scheme's dynamic activation quantization, as its serving kernels apply it."""
    if scheme == "fp8_block":
        out = np.empty_like(x)
        for r in range(x.shape[0]):
            for c in range(0, x.shape[1], 128):
                part = x[r, c : c + 128]
                scale = F32(np.abs(part).max()) / F32(448.0)
                out[r, c : c + 128] = FP8[to_fp8_code(np.clip(part / scale, -448, 448))] * scale
        return out
    if scheme == "fp8_dynamic_kv":
        scale = (np.abs(x).max(axis=1, keepdims=True) / F32(448.0)).astype(F32)
        return (FP8[to_fp8_code(np.clip(x / scale, -448, 448))] * scale).astype(F32)
    if scheme == "w4a8":
        scale = (np.abs(x).max(axis=1, keepdims=True) / F32(127.0)).astype(F32)
        return (np.clip(np.rint(x / scale), -128, 127) * scale).astype(F32)
    if scheme == "nvfp4":
        g = input_global_scale
        out = np.empty_like(x)
        for r in range(x.shape[0]):
            for c in range(0, x.shape[1], 16):
                part = x[r, c : c + 16]
                code = to_fp8_code(min(F32(np.abs(part).max()) / F32(6.0) * g, 448.0))
                code = to_fp8_code(0.125) if (code & 0x7F) == 0 else code
                scale = F32(FP8[code]) / g
                out[r, c : c + 16] = fp4_value(to_fp4_code(bf16_round(np.clip(part / scale, -6, 6)))) * scale
        return out
    return x


def check_scheme(scheme, folder, source, runtime):
    check_config(folder, scheme)
    tensors = read_folder(folder)
    layers = 1 + max(int(k.split(".")[2]) for k in source if k.startswith("model.layers."))
    worst_weight = worst_product = 0.0
    for layer in range(layers):
        prefix = f"model.layers.{layer}."
        fused = {}
        for names in FUSED:
            m = max(float(np.abs(source[prefix + n + ".weight"]).max()) for n in names)
            fused.update({n: F32(m) for n in names})
        input_scales = {}
        for name in LINEARS:
            module = prefix + name
            if scheme == "fp8_block":
                w = fp8_block(tensors, source, module)
            elif scheme == "w4a8":
                w = w4a8(tensors, source, module)
            elif scheme == "fp8_dynamic_kv":
                w = fp8_channel(tensors, source, module)
            elif scheme == "awq_w4a16":
                norm = AWQ_NORM.get(name)
                smoothing = None
                if norm:
                    new = as_float(tensors[prefix + norm + ".weight"]).astype(np.float64)
                    smoothing = source[prefix + norm + ".weight"].astype(np.float64) / new
                w = awq_w4a16(tensors, source, module, smoothing)
            elif scheme == "mxfp4":
                w = mxfp4(tensors, source, module)
            else:
                own = F32(np.abs(source[module + ".weight"]).max())
                w = nvfp4(tensors, source, module, fused.get(name, own), scheme == "nvfp4")
            if module + ".weight" in tensors and scheme not in ("fp8_block", "w4a8", "fp8_dynamic_kv"):
                fail(f"{module}: a dense weight beside the packed one")
            ours = runtime[module + ".weight"]
            worst_weight = max(worst_weight, float(np.max(np.abs(ours - w) / np.maximum(np.abs(w), 1e-30))))
            g_in = as_float(tensors[module + ".input_global_scale"])[0] if scheme == "nvfp4" else None
            input_scales[name] = g_in
            x = runtime[module + ".x"]
            y_ref = quantize_activations(x, scheme, g_in).astype(np.float64) @ w.astype(np.float64).T
            y = runtime[module + ".y"].astype(np.float64)
            worst_product = max(worst_product, float(np.linalg.norm(y - y_ref) / np.linalg.norm(y_ref)))
        if scheme == "fp8_dynamic_kv":
            check_kv_scales(tensors, layer)
        if scheme == "nvfp4":
            for names in FUSED:  # one input, one calibrated global scale
                if len({input_scales[n] for n in names}) != 1:
                    fail(f"layer {layer}: {names} have different input_global_scale")
    if worst_weight > 1e-6:
        fail(f"{scheme}: optkit's runtime dequantizes up to {worst_weight:.2e} away from this reader")
    if worst_product > 1e-5:
        fail(f"{scheme}: optkit's products differ from this reader's emulation by {worst_product:.2e} (relative)")
    print(f"{scheme}: config, tensors, scales, codes and runtime agree "
          f"(weights within {worst_weight:.1e}, products within {worst_product:.1e})")


def check_experts_nvfp4(optkit, dequantize, moe_dir, calib, work):
    """NVFP4 W4A4 on a mixture of experts: every expert's matrices (the shared expert's too) as a
    dense linear's, the global weight scale shared by each expert's gate and up, one positive
    input_global_scale shared by them and another on its down; the routers and the shared expert's
    gate stored unquantized, equal to the source's; and the runtime's expert products equal this
    reader's emulation under the file's input scales."""
    folder = os.path.join(work, "nvfp4-moe")
    subprocess.run([optkit, "compress", "--model", moe_dir, "--recipe", "nvfp4", "-o", folder, "--calib", calib,
                    "--samples", "16", "--seq-len", "64"], check=True, stdout=subprocess.DEVNULL)
    dump = os.path.join(work, "nvfp4-moe.runtime.safetensors")
    subprocess.run([dequantize, folder, dump], check=True)
    runtime = {k: as_float(v) for k, v in read_safetensors(dump).items()}
    raw_source = read_folder(moe_dir)
    source = {k: as_float(v) for k, v in raw_source.items() if v[0] in ("F32", "BF16")}
    tensors = read_folder(folder)
    experts = sorted({k.rsplit(".", 2)[0] for k in source if ".experts." in k or ".shared_expert." in k})
    if not experts:
        fail(f"{moe_dir}: no experts")
    worst_weight = worst_product = 0.0
    for expert in experts:
        names = sorted(k[: -len(".weight")] for k in source if k.startswith(expert + ".") and k.endswith(".weight"))
        gate_up = [n for n in names if n.endswith(("gate_proj", "up_proj", ".w1", ".w3"))]
        fused = F32(max(float(np.abs(source[n + ".weight"]).max()) for n in gate_up))
        input_scales = {}
        for module in names:
            own = F32(np.abs(source[module + ".weight"]).max())
            w = nvfp4(tensors, source, module, fused if module in gate_up else own, True)
            g_in = as_float(tensors[module + ".input_global_scale"])[0]
            if not g_in > 0:
                fail(f"{module}: input_global_scale {g_in} is not positive")
            input_scales[module] = g_in
            worst_weight = max(worst_weight, float(np.max(np.abs(runtime[module + ".weight"] - w) /
                                                          np.maximum(np.abs(w), 1e-30))))
            x = runtime[module + ".x"]
            y_ref = quantize_activations(x, "nvfp4", g_in).astype(np.float64) @ w.astype(np.float64).T
            y = runtime[module + ".y"].astype(np.float64)
            worst_product = max(worst_product, float(np.linalg.norm(y - y_ref) / np.linalg.norm(y_ref)))
        if len({input_scales[n] for n in gate_up}) != 1:
            fail(f"{expert}: its gate and up have different input_global_scale")
    for router in (k for k in source if k.endswith((".mlp.gate.weight", ".shared_expert_gate.weight"))):
        if tensors[router][2] != raw_source[router][2]:
            fail(f"{router}: changed (a router is never quantized)")
    if worst_weight > 1e-6 or worst_product > 1e-5:
        fail(f"nvfp4 experts: runtime weights within {worst_weight:.2e}, products within {worst_product:.2e}")
    print(f"nvfp4 on {len(experts)} experts: scales, codes, input scales and runtime agree "
          f"(weights within {worst_weight:.1e}, products within {worst_product:.1e})")


def main():
    optkit, dequantize, source_dir, calib, moe_dir = sys.argv[1:6]
    if len(sys.argv) > 6:
        check_all(optkit, dequantize, source_dir, calib, sys.argv[6])
        check_experts_nvfp4(optkit, dequantize, moe_dir, calib, sys.argv[6])
        return
    with tempfile.TemporaryDirectory() as work:
        check_all(optkit, dequantize, source_dir, calib, work)
        check_experts_nvfp4(optkit, dequantize, moe_dir, calib, work)


def check_all(optkit, dequantize, source_dir, calib, work):
    source = {k: as_float(v) for k, v in read_folder(source_dir).items() if v[0] in ("F32", "BF16")}
    for scheme in SCHEMES:
        folder = os.path.join(work, scheme)
        command = [optkit, "compress", "--model", source_dir, "--recipe", scheme, "-o", folder]
        if scheme in ("nvfp4", "awq_w4a16", "w4a8", "fp8_dynamic_kv"):
            command += ["--calib", calib, "--samples", "16", "--seq-len", "64"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        dump = os.path.join(work, scheme + ".runtime.safetensors")
        subprocess.run([dequantize, folder, dump], check=True)
        runtime = {k: as_float(v) for k, v in read_safetensors(dump).items()}
        check_scheme(scheme, folder, source, runtime)


if __name__ == "__main__":
    main()
