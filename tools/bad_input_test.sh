#!/usr/bin/env bash
# The bad-input table (docs/bad-input.md): every row run through the posenc program, checking
# its exit code and message. Each command runs under `timeout`, so a hang (a FIFO read, a
# device that never ends) fails the row instead of the suite. Run by ctest as
#   tools/bad_input_test.sh <posenc> <source dir> <scratch dir>
# Prints one line per row: "ok: <row> -> exit <code>: <the line of output that matched>".
set -u
export LC_ALL=C
POSENC=$1
SRC=$2
WORK=$3
DATA="$SRC/golden/data"
CASE=rope_half_d96_r24_b1e4_neox_20b_f32
OTHER=rope_half_d128_b5e5_llama3_8b_f32
MAN="$DATA/rope/$CASE.json"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 2
failures=0
rows=0

# expect CODE REGEX ROW ARGS...: posenc ARGS exits CODE and its output matches REGEX.
expect() {
  local code=$1 regex=$2 row=$3 out rc
  shift 3
  rows=$((rows + 1))
  out=$(timeout 30 "$POSENC" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$code" ]; then
    echo "FAIL: $row: exit $rc, expected $code: posenc $*"
    printf '%s\n' "$out" | head -20
    failures=$((failures + 1))
  elif ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: $row: output does not match '$regex': posenc $*"
    printf '%s\n' "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok: $row -> exit $rc: $(grep -E -m1 -- "$regex" <<<"$out" | sed "s|$WORK/||g; s|$SRC/||g")"
  fi
}

# le64 V: V as 8 little-endian bytes.
le64() {
  local i
  for ((i = 0; i < 8; i++)); do
    # shellcheck disable=SC2059
    printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"
  done
}
# st FILE HEADER N: a safetensors file with this header and N zero bytes of data.
st() {
  { le64 ${#2}; printf '%s' "$2"; head -c "$3" /dev/zero; } >"$1"
}

"$POSENC" engine "$CASE" --data "$DATA" --out good.safetensors 2>/dev/null || exit 2
"$POSENC" engine "$OTHER" --data "$DATA" --out other.safetensors 2>/dev/null || exit 2

# ---- engine output files (--actual) ---------------------------------------------------------
head -c 300 good.safetensors >truncated.safetensors
expect 2 "truncated.safetensors: truncated" "truncated safetensors" verify "$MAN" --actual truncated.safetensors
printf 'this is not a safetensors file at all' >garbage.safetensors
expect 2 "garbage.safetensors: header length of [0-9]+ bytes exceeds the limit" "garbage safetensors" verify "$MAN" --actual garbage.safetensors
{ le64 4096; printf '{}'; } >beyond.safetensors
expect 2 "beyond.safetensors: truncated: header length says 4096 bytes, file has 2" "header length beyond the file" verify "$MAN" --actual beyond.safetensors
printf '\xff\xff\xff\xff\xff\xff\xff\xff{}' >absurd.safetensors
expect 2 "absurd.safetensors: header length of 18446744073709551615 bytes exceeds the limit of 104857600 bytes" "absurd header length" verify "$MAN" --actual absurd.safetensors
st badjson.safetensors '{"q_rot":{"dtype":' 0
expect 2 "badjson.safetensors: header is not valid JSON" "invalid header JSON" verify "$MAN" --actual badjson.safetensors
st overlap.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' 12
expect 2 "overlap.safetensors: tensors \"a\" and \"b\" have overlapping data_offsets" "overlapping offsets" verify "$MAN" --actual overlap.safetensors
st outside.safetensors '{"q_rot":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' 8
expect 2 "outside.safetensors: truncated: header says 16 bytes of data, file has 8" "out-of-bounds offsets" verify "$MAN" --actual outside.safetensors
st dtype.safetensors '{"q_rot":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}' 2
expect 2 "dtype.safetensors: tensor \"q_rot\": unsupported dtype \"U8\"" "unknown dtype" verify "$MAN" --actual dtype.safetensors
st size.safetensors '{"q_rot":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
expect 2 "size.safetensors: tensor \"q_rot\": data_offsets \[0, 8\] hold 8 bytes, but dtype F32 and shape \[3\] need 12" "shape and size disagreeing" verify "$MAN" --actual size.safetensors
st overflow.safetensors '{"q_rot":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}' 4
expect 2 "overflow.safetensors: tensor \"q_rot\": shape \[4294967296, 4294967296\] overflows" "shape whose element count overflows" verify "$MAN" --actual overflow.safetensors
st huge.safetensors '{"q_rot":{"dtype":"F32","shape":[1048576,1048576],"data_offsets":[0,4398046511104]}}' 0
expect 2 "huge.safetensors: tensor \"q_rot\" \(F32 \[1048576, 1048576\]\) of 4398046511104 bytes exceeds the limit of 8589934592 bytes \(8 GiB; POSENC_MAX_TENSOR_BYTES raises it\)" "tensor larger than the limit" verify "$MAN" --actual huge.safetensors
POSENC_MAX_FILE_BYTES=1K expect 2 "safetensors: the tensor file of [0-9]+ bytes exceeds the limit of 1024 bytes \(1 KiB; POSENC_MAX_FILE_BYTES" "file larger than POSENC_MAX_FILE_BYTES" verify "$MAN" --actual good.safetensors
POSENC_MAX_FILE_BYTES=lots expect 2 "POSENC_MAX_FILE_BYTES must be a positive count" "a limit variable that is not a count" verify "$MAN" --actual good.safetensors
st empty.safetensors '{}' 0
expect 2 "nothing|no stage|MISSING" "no tensors at all" verify "$MAN" --actual empty.safetensors
st zero.safetensors '{"q_rot":{"dtype":"F32","shape":[0,2,96],"data_offsets":[0,0]}}' 0
expect 2 "q_rot.*shape" "an empty tensor where data is expected" verify "$MAN" --actual zero.safetensors
expect 2 "shape" "the output of another case" verify "$MAN" --actual other.safetensors
# NaN and Inf in outputs: FAIL (exit 1) with the count. The first tensor of the data section
# (sorted by name: cos, f32) gets a NaN and an Inf.
cp good.safetensors nan.safetensors
hlen=$(od -An -tu8 -N8 nan.safetensors | tr -d ' ')
printf '\x00\x00\xc0\x7f\x00\x00\x80\x7f' | dd of=nan.safetensors bs=1 seek=$((8 + hlen)) conv=notrunc status=none
expect 1 "cos .*over=2/228 .*FAIL \(non-finite output: 1 NaN, 1 \+-Inf element\(s\): non-finite values never pass\)" "NaN and Inf in outputs" verify "$MAN" --actual nan.safetensors
# An Inf beyond --max-position (the last of cos's 228 f32 elements, the last position): not
# judged against a budget, yet non-finite, so FAIL (it read "PASS (non-finite output ...)").
cp good.safetensors maxinf.safetensors
printf '\x00\x00\x80\x7f' | dd of=maxinf.safetensors bs=1 seek=$((8 + hlen + 908)) conv=notrunc status=none
expect 1 "cos .*over=0/12 skipped=216 \(beyond --max-position\).*FAIL \(non-finite output: 1 \+-Inf element\(s\): non-finite values never pass\)" "+Inf, -Inf or NaN at a position beyond --max-position" verify "$MAN" --actual maxinf.safetensors --max-position 0
# +Inf or -Inf in the output for a negative control: FAIL (exit 1, "non-finite output"), never
# "DIFFERS from the known-wrong output" (a PASS). The correct engine's slopes of the naive-slopes
# control (one f32 tensor) with its first element +Inf, then -Inf.
NEG=alibi_slopes_h12_naive_invalid_f32
"$POSENC" engine "$NEG" --data "$DATA" --out neg.safetensors 2>/dev/null || exit 2
for inf in '\x00\x00\x80\x7f' '\x00\x00\x80\xff'; do
  cp neg.safetensors neginf.safetensors
  hlen=$(od -An -tu8 -N8 neginf.safetensors | tr -d ' ')
  printf "$inf" | dd of=neginf.safetensors bs=1 seek=$((8 + hlen)) conv=notrunc status=none
  expect 1 "profile=strict  FAIL \(non-finite output: 1 \+-Inf element\(s\): non-finite values never pass\)" "+Inf or -Inf in a negative control's output" verify "$DATA/alibi/$NEG.json" --actual neginf.safetensors
done

# ---- .npy outputs ---------------------------------------------------------------------------
mkdir -p npy
"$POSENC" engine "$CASE" --data "$DATA" --format npy --out "npy/$CASE" 2>/dev/null || exit 2
head -c 100 "npy/$CASE/q_rot.npy" >q_rot.npy && mv q_rot.npy "npy/$CASE/q_rot.npy"
expect 2 "q_rot.npy: truncated" "truncated .npy" verify "$MAN" --actual npy
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }%*s\n" 46 ''; } >"npy/$CASE/q_rot.npy"
expect 2 "q_rot.npy: the array \(F32 \[1048576, 1048576\]\) of 4398046511104 bytes exceeds the limit" ".npy array larger than the limit" verify "$MAN" --actual npy

# ---- golden files: manifests and catalogs ---------------------------------------------------
mkdir -p case
cp "$MAN" "$DATA/rope/$CASE.safetensors" case/
sed 's/^ "version": 2$/ "version": 99/' "$MAN" >case/v99.json
expect 2 "v99.json: unsupported schema version 99 \(this posenc reads version 2; regenerate" "unknown schema version" verify case/v99.json --actual good.safetensors
{ printf '{"schema": '; head -c 100000 /dev/zero | tr '\0' '['; } >case/deep.json
expect 2 "deep.json: JSON nests deeper than the limit of 64 arrays and objects \(POSENC_MAX_JSON_DEPTH" "JSON nested too deep" verify case/deep.json --actual good.safetensors
POSENC_MAX_JSON_BYTES=4K expect 2 "$CASE.json: the JSON file of [0-9]+ bytes exceeds the limit of 4096 bytes" "manifest larger than POSENC_MAX_JSON_BYTES" verify "case/$CASE.json" --actual good.safetensors
printf '{ "schema": "posenc-golden", ' >case/bad.json
expect 2 "bad.json: invalid JSON" "invalid manifest JSON" verify case/bad.json --actual good.safetensors
sed "s|\"tensors_file\": \"$CASE.safetensors\"|\"tensors_file\": \"../../etc/passwd\"|" "$MAN" >case/escape.json
expect 2 "escape.json: manifest: \"tensors_file\" must be a plain file name in the manifest's folder \(no path separators, not . or ..; got \"../../etc/passwd\"\)" "path traversal in tensors_file" verify case/escape.json --actual good.safetensors
mkdir -p link
sed "s|\"tensors_file\": \"$CASE.safetensors\"|\"tensors_file\": \"t.safetensors\"|" "$MAN" >link/link.json
ln -s "$DATA/rope/$CASE.safetensors" link/t.safetensors
expect 2 "tensors_file \"t.safetensors\" is a symbolic link leaving the manifest's folder" "tensors_file a symbolic link out of its folder" verify link/link.json --actual good.safetensors
cp case/$CASE.safetensors tampered.safetensors
hlen=$(od -An -tu8 -N8 tampered.safetensors | tr -d ' ')
printf '\x01' | dd of=tampered.safetensors bs=1 seek=$((8 + hlen + 5)) conv=notrunc status=none
mkdir -p tampered && cp "$MAN" tampered/ && cp tampered.safetensors "tampered/$CASE.safetensors"
expect 2 "SHA-256" "golden tensor differing from the manifest's SHA-256" verify "tampered/$CASE.json" --actual good.safetensors
mkdir -p cat/rope && cp case/$CASE.json case/$CASE.safetensors cat/rope/
"$POSENC" catalog --data cat >/dev/null 2>&1
printf ' ' >>"cat/rope/$CASE.json"
expect 2 "$CASE.json: SHA-256 differs from catalog.json" "manifest differing from the catalog's SHA-256" verify cat --actual good.safetensors
expect 2 "cat/rope/$CASE.json: SHA-256 differs from catalog.json" "an edited manifest of a catalog, named by its path" verify "cat/rope/$CASE.json" --actual good.safetensors
expect 2 "cat/rope/$CASE.json: SHA-256 differs from catalog.json" "an edited manifest of a catalog, its scheme folder named" verify cat/rope --actual good.safetensors
expect 2 "cat/rope/$CASE.json: SHA-256 differs from catalog.json" "an edited manifest of a catalog, named by case id" show "$CASE" --data cat
cp "case/$CASE.json" cat/rope/extra.json
expect 2 "extra.json: lies in the catalog folder .*cat but .*catalog.json does not list it; refused" "a manifest in a catalog folder that its catalog does not list" verify cat/rope/extra.json --actual good.safetensors

# ---- golden files: the scheme's schema and KV traces ----------------------------------------
sed '/^ "params": {$/,/^ },$/d' "$MAN" >case/noparams.json
expect 2 "noparams.json: params: missing \(a rope manifest needs its parameters\)" "a manifest without params" verify case/noparams.json --actual good.safetensors
sed 's/^ "scheme": "rope",$/ "scheme": "shaw",/' "$MAN" >case/relabelled.json
expect 2 "relabelled.json: params.n_heads: missing \(a shaw manifest has it\)" "a RoPE manifest relabelled \"scheme\": \"shaw\"" verify case/relabelled.json --actual good.safetensors
sed 's/^  "n_q_heads": 2,$/  "n_q_heads": 7,/' "$MAN" >case/heads.json
expect 2 "heads.json: tensor \"q\" shape: expected \[n_tokens, n_q_heads, head_dim\] = \[19, 7, 96\] from params, got \[19, 2, 96\]" "params disagreeing with a tensor's shape" verify case/heads.json --actual good.safetensors
KV=kv_cache_rope_context_shift_f32
mkdir -p kv && cp "$DATA/kv_cache/$KV.safetensors" kv/
sed '0,/^    "index": 2,$/s//    "index": 1,/' "$DATA/kv_cache/$KV.json" >kv/repeated.json
expect 2 "repeated.json: trace.steps\[2\].index: expected 2 \(step indexes increase by one from 0: none repeated, reversed or missing; got 1\)" "a KV trace step repeated" verify kv/repeated.json --actual good.safetensors
sed '0,/"kind": "decode"/s//"kind": "rewind"/' "$DATA/kv_cache/$KV.json" >kv/kind.json
expect 2 "kind.json: trace.steps\[1\].kind: expected prefill, batch, decode, verify or shift \(got \"rewind\"\)" "a KV trace step of unknown kind" verify kv/kind.json --actual good.safetensors
sed '0,/^    "columns": 1,$/s//    "columns": -1,/' "$DATA/kv_cache/$KV.json" >kv/columns.json
expect 2 "columns.json: trace.steps\[1\].columns: expected an integer >= 1 \(got -1\)" "a KV trace step with negative columns" verify kv/columns.json --actual good.safetensors
KVC=kv_cache_rope_llama4_chunk8192_boundary_f32
cp "$DATA/kv_cache/$KVC.safetensors" kv/
sed 's/"chunk": 8192/"chunk": 0/' "$DATA/kv_cache/$KVC.json" >kv/chunk.json
expect 2 "chunk.json: params.chunk: expected an integer in \[1, 1000000000000000\] \(got 0\)" "a KV trace with chunk 0" verify kv/chunk.json --actual good.safetensors

# ---- special files --------------------------------------------------------------------------
mkfifo fifo.safetensors fifo.json
expect 2 "fifo.safetensors: is a FIFO, not a regular file" "a FIFO as the engine output" verify "$MAN" --actual fifo.safetensors
expect 2 "fifo.json: is a FIFO, not a regular file" "a FIFO as the manifest" verify fifo.json --actual good.safetensors
expect 2 "/dev/zero: is a character device, not a regular file" "/dev/zero as the engine output" verify "$MAN" --actual /dev/zero
expect 2 "/dev/null: is a character device, not a regular file" "/dev/null as the manifest" verify /dev/null --actual good.safetensors
expect 2 "fifo.json: is a FIFO, not a regular file" "a FIFO as a config" generate --config fifo.json --out cfg_out
expect 2 "/dev/zero: is a character device, not a regular file" "/dev/zero as a config" generate --config /dev/zero --out cfg_out
expect 2 "case: is a directory, not a regular file" "a directory as a config" generate --config case --out cfg_out
expect 2 "/dev/null: is a character device, not a regular file" "/dev/null as a case" show /dev/null --data "$DATA"
mkdir -p fifocat && mkfifo fifocat/catalog.json
expect 2 "catalog.json: is a FIFO, not a regular file" "a FIFO as catalog.json" verify fifocat --actual good.safetensors
mkdir -p fifodir/$CASE && mkfifo "fifodir/$CASE/q_rot.npy"
expect 2 "q_rot.npy: is a FIFO, not a regular file" "a FIFO among .npy outputs" verify "$MAN" --actual fifodir

# ---- configs: dimensions and positions ------------------------------------------------------
printf '{"num_attention_heads": 4, "head_dim": 63}' >odd_head.json
expect 2 "odd_head.json: .*63" "odd head_dim" generate --config odd_head.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "rotary_dim": 33}' >odd_rot.json
expect 2 "odd_rot.json: rotary_dim = 33: must be an even integer in \[2, head_dim = 64\]" "odd rotary_dim" generate --config odd_rot.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "rotary_dim": 128}' >big_rot.json
expect 2 "big_rot.json: .*128" "rotary_dim > head_dim" generate --config big_rot.json --out cfg_out
# absurd numbers: refused on the value as the file writes it, with the key and the range
printf '{"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 4611686018427387904, "rope_scaling": {"type": "dynamic", "factor": 2}}' >huge_l.json
expect 2 "huge_l.json: max_position_embeddings = 4611686018427387904: must be an integer in \[1, 268435456\] \(2\^28, the kernel's position limit\)" "max_position_embeddings 2^62 (config)" generate --config huge_l.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 134217729, "rope_scaling": {"type": "dynamic", "factor": 2}}' >dyn_l.json
expect 2 "dyn_l.json: max_position_embeddings = 134217729: must be an integer in \[1, 134217728\] for dynamic scaling" "dynamic max_position_embeddings > 2^27 (config)" generate --config dyn_l.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4, "attention_factor": -1}}' >neg_af.json
expect 2 "neg_af.json: rope_scaling.attention_factor = -1: must be a number in \(0, 100\]" "yarn attention_factor -1 (config)" generate --config neg_af.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 2147483648}' >hd31.json
expect 2 "hd31.json: head_dim = 2147483648: must be an integer in \[1, 16384\]" "head_dim 2^31 (config)" generate --config hd31.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 1e20}' >hd20.json
expect 2 "hd20.json: head_dim = 1e20: must be an integer in \[1, 16384\]" "head_dim 1e20 (config)" generate --config hd20.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 0}}' >factor0.json
expect 2 "factor0.json: rope_scaling.factor = 0: must be a number in \[0.001, 65536\]" "factor 0 (config)" generate --config factor0.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32}}' >beta.json
expect 2 "beta.json: rope_scaling.beta_fast = 1: must be > beta_slow = 32" "yarn beta_fast <= beta_slow (config)" generate --config beta.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192, "low_freq_factor": 4, "high_freq_factor": 2}}' >freq.json
expect 2 "freq.json: rope_scaling.high_freq_factor = 2: must be >= low_freq_factor = 4" "llama3 high_freq_factor < low_freq_factor (config)" generate --config freq.json --out cfg_out
printf '{"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "fator": 8}}}}' >pt.json
expect 2 "pt.json: \"text_config.rope_parameters.sliding_attention\" of type default has unknown key \"fator\"" "per-layer-type rope block with an unknown key (config)" generate --config pt.json --out cfg_out
printf '{"model_type": "gemma3", "text_config": [1]}' >tc.json
expect 2 "tc.json: text_config = \[1\]: must be an object" "text_config not an object (config)" generate --config tc.json --out cfg_out
printf '{"num_attention_heads": 4, "head_dim": 64, "model_type": ["llama"]}' >mt.json
expect 2 "mt.json: model_type = \[\"llama\"\]: must be a string" "model_type not a string (config)" generate --config mt.json --out cfg_out
# Vision-language configs (M-RoPE) and prompt layouts (golden/cases/mrope_case.hpp).
vl() {  # vl FILE MODEL_TYPE SECTION EXTRA_ROPE_KEYS VISION
  printf '{"model_type": "%s", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "rope_scaling": {"type": "mrope", "mrope_section": %s%s}, "vision_config": %s}' \
    "$2" "$3" "$4" "$5" >"$1"
}
vl vl_sum.json qwen2_vl "[8, 12, 10]" "" '{}'
expect 2 "vl_sum.json: rope_scaling.mrope_section = \[8,12,10\]: must sum to head_dim / 2 = 32 pairs \(sums to 30\)" "mrope_section sum (VL config)" generate --config vl_sum.json --out cfg_out
vl vl_factor.json qwen2_vl "[8, 12, 12]" ', "factor": 2' '{}'
expect 2 "vl_factor.json: rope_scaling.factor = 2: not an M-RoPE key" "scaling key in an M-RoPE block (VL config)" generate --config vl_factor.json --out cfg_out
vl vl_il.json qwen2_vl "[8, 12, 12]" ', "mrope_interleaved": true' '{}'
expect 2 "vl_il.json: rope_scaling.mrope_interleaved = true: contradicts model_type qwen2_vl" "mrope_interleaved on Qwen2-VL (VL config)" generate --config vl_il.json --out cfg_out
vl vl_merge.json qwen2_vl "[8, 12, 12]" "" '{"spatial_merge_size": 0}'
expect 2 "vl_merge.json: vision_config.spatial_merge_size = 0: must be an integer in \[1, 64\]" "spatial_merge_size 0 (VL config)" generate --config vl_merge.json --out cfg_out
vl vl_tps.json qwen2_5_vl "[8, 12, 12]" "" '{"tokens_per_second": -1}'
expect 2 "vl_tps.json: vision_config.tokens_per_second = -1: must be a number in \(0, 1e\+06\]" "tokens_per_second -1 (VL config)" generate --config vl_tps.json --out cfg_out
vl vl_ok.json qwen2_vl "[8, 12, 12]" "" '{"spatial_merge_size": 2}'
printf '{"spans": [{"type": "text", "tokens": 2}, {"type": "image", "grid_thw": [1, 3, 4]}]}' >layout_grid.json
expect 2 "layout_grid.json: spans\[1\].grid_thw\[1\] = 3: must be a multiple of vision_config.spatial_merge_size 2" "layout grid not a multiple of the merge size" generate --config vl_ok.json --layout layout_grid.json --out cfg_out
printf '{"spans": [{"type": "image", "grid_thw": [1, 2, 2]}]}' >layout_first.json
expect 2 "layout_first.json: spans\[0\].type = \"image\": a visual span must follow a text span" "layout starting with an image" generate --config vl_ok.json --layout layout_first.json --out cfg_out
printf '{"spans": [{"type": "text", "tokens": 2}, {"type": "image", "grid_thw": [1, 64, 66]}]}' >layout_big.json
expect 2 "layout_big.json: the layout has more than 512 tokens with spans\[0..1\]" "layout over 512 tokens" generate --config vl_ok.json --layout layout_big.json --out cfg_out
expect 2 "a vision-language config takes --layout, not --positions" "--positions with a VL config" generate --config vl_ok.json --positions 0-3 --out cfg_out
expect 2 "--layout needs a vision-language config" "--layout with a text-only config" generate --config mt.json --layout layout_grid.json --out cfg_out
vl vl_glm_sum.json glm4v "[8, 12, 12]" ', "partial_rotary_factor": 0.5' '{}'
expect 2 "vl_glm_sum.json: rope_scaling.mrope_section = \[8,12,12\]: must sum to rotary_dim / 2 = 16 pairs \(sums to 32\)" "GLM-4.1V mrope_section sum over the rotated half (VL config)" generate --config vl_glm_sum.json --out cfg_out
vl vl_glm_prf.json glm4v "[8, 12, 12]" ', "partial_rotary_factor": 0.01' '{}'
expect 2 "vl_glm_prf.json: rope_scaling.partial_rotary_factor = 0.01: rotates int\(head_dim 64 \* factor\) = 0 channels: must be even and at least 2" "GLM-4.1V partial_rotary_factor rotating nothing (VL config)" generate --config vl_glm_prf.json --out cfg_out
vl vl_glm.json glm4v "[4, 6, 6]" ', "partial_rotary_factor": 0.5' '{}'
printf '{"spans": [{"type": "text", "tokens": 2}, {"type": "video", "grid_thw": [2, 2, 2]}]}' >layout_video.json
expect 2 "layout_video.json: spans\[1\].type = \"video\": videos are not modelled for model_type glm4v" "--layout video span on GLM-4.1V" generate --config vl_glm.json --layout layout_video.json --out cfg_out
# a hostile _name_or_path: the case names hold its sanitised basename and the config's hash
printf '{"_name_or_path": "../../etc/x;rm -rf", "num_attention_heads": 4, "head_dim": 64}' >hostile.json
expect 0 "rope/rope_x_rm_rf_[0-9a-f]{8}_all_f32 " "hostile _name_or_path (config)" generate --config hostile.json --out hostile_out
if [ "$(find hostile_out -type f -name '*.safetensors' | wc -l)" != 1 ] || [ -n "$(find . -path '*etc*')" ]; then
  echo "FAIL: hostile _name_or_path: files not as expected: $(find hostile_out . -path '*etc*')"
  failures=$((failures + 1))
fi
printf '{"num_attention_heads": 4, "head_dim": 64}' >ok.json
# a call whose scores would exceed the input limits verify reads back: refused before any work
POSENC_MAX_TENSOR_BYTES=1M expect 2 "would write a tensor of about [0-9]+ bytes, over the limit of 1048576 bytes that verify reads \(POSENC_MAX_TENSOR_BYTES raises it\)" "generate --config beyond the tensor limit" generate --config ok.json --positions 0-511 --out big_out
if [ -e big_out ]; then
  echo "FAIL: generate --config beyond the tensor limit: wrote big_out"
  failures=$((failures + 1))
fi
expect 2 "--positions: \"-5\" is negative \(positions are >= 0\)" "negative position" generate --config ok.json --positions -5 --out cfg_out
expect 2 "--positions: position 9007199254740993 is out of range \(at most 2\^28 = 268435456\)" "position > 2^53" generate --config ok.json --positions 9007199254740993 --out cfg_out
expect 2 "positions must be <= 2\^28 \(the kernel's valid range\) \(got 999999999999\)" "position > 2^28" generate --config ok.json --positions 999999999999 --out cfg_out
expect 2 "--positions: more than 4194304 positions \(at \"0-5000000\"\)" "more than 2^22 positions" generate --config ok.json --positions 0-5000000 --out cfg_out
expect 2 "--level must be 1 or 2 \(got \"3\"\)" "generate --level 3" generate --level 3 --out l2_out
expect 2 "generate --level 2 needs --out DIR \(level 2 is never committed" "generate --level 2 without --out" generate --level 2
expect 2 "--out .* is the committed catalog golden/data; choose another folder" "generate --level 2 into golden/data" generate --level 2 --out "$DATA"
expect 2 "generate --level 2 takes no --positions" "generate --level 2 with --positions" generate --level 2 --config ok.json --positions 0-5 --out l2_out
expect 2 "generate --level 2: no case matches the selection" "generate --level 2, nothing selected" generate --level 2 --case nothing_matches --out l2_out
expect 2 "--case \(: not a valid regular expression" "generate --level 2, bad --case" generate --level 2 --case "(" --out l2_out
expect 2 "list --config needs --level 2" "list --config without --level 2" list --config ok.json
if [ -e cfg_out ]; then
  echo "FAIL: a refused config left files in cfg_out"
  failures=$((failures + 1))
fi

# ---- outputs: the output rule (golden/format/output_path.hpp) -------------------------------
# same FILE...: each file still has the bytes its copy FILE.orig holds.
same() {
  local f
  for f in "$@"; do
    if ! cmp -s "$f" "$f.orig"; then
      echo "FAIL: $f was changed by a refused write"
      failures=$((failures + 1))
    fi
  done
}
# still TEST FILE WHAT: [ TEST FILE ] holds after the refused write.
still() {
  if ! [ "$1" "$2" ]; then
    echo "FAIL: $2 is no longer $3 after a refused write"
    failures=$((failures + 1))
  fi
}
cp good.safetensors good.safetensors.orig
expect 2 "good.safetensors: is the file good.safetensors that this command reads \(same device and inode\); refused, --force or not" "--report onto the engine output being verified" verify "$MAN" --actual good.safetensors --report good.safetensors
expect 2 "that this command reads" "--report onto the engine output, with --force" verify "$MAN" --actual good.safetensors --report good.safetensors --force
ln -s good.safetensors goodlink.html
expect 2 "goodlink.html: is the file good.safetensors that this command reads" "--report a symbolic link to the engine output" verify "$MAN" --actual good.safetensors --report goodlink.html
same good.safetensors
still -L goodlink.html "a symbolic link"
mkfifo report.fifo
expect 2 "report.fifo: is a FIFO, not a regular file; posenc writes regular files only" "--report a FIFO" verify "$MAN" --actual good.safetensors --report report.fifo
still -p report.fifo "a FIFO"
if mknod full c 1 7 2>/dev/null; then
  expect 2 "full: is a character device, not a regular file; posenc writes regular files only" "--report a character device (mknod c 1 7, /dev/full's numbers)" verify "$MAN" --actual good.safetensors --report full --force
  expect 2 "full: is a character device, not a regular file" "engine --out a character device" engine "$CASE" --data "$DATA" --out full
  still -c full "a character device"
else
  echo "skip: mknod is not permitted here (not root?): the character-device rows did not run"
fi
mkdir -p report_dir
expect 2 "report_dir: is a directory, not a regular file" "--report a directory" diagnose "$MAN" --actual good.safetensors --report report_dir
mkdir -p ofifo && mkfifo ofifo/buckets.npy
expect 2 "ofifo/buckets.npy: is a FIFO, not a regular file" "oracle --out a folder whose file is a FIFO" oracle t5 --positions 1 --out ofifo --force
still -p ofifo/buckets.npy "a FIFO"
mkdir -p own && cp "$MAN" "$DATA/rope/$CASE.safetensors" own/ && cp "own/$CASE.safetensors" "own/$CASE.safetensors.orig"
expect 2 "own/$CASE.safetensors: is the file own/$CASE.safetensors that this command reads" "engine --out onto the case's own golden tensors" engine "own/$CASE.json" --out "own/$CASE.safetensors"
cp "cat/rope/$CASE.safetensors" "cat/rope/$CASE.safetensors.orig"
expect 2 "cat/rope/$CASE.safetensors: is the file cat/rope/$CASE.safetensors that this command reads" "check --keep into the golden folder" check --data cat --case "^$CASE\$" --keep cat/rope
same "own/$CASE.safetensors" "cat/rope/$CASE.safetensors"
printf 'my notes\n' >notes.html && cp notes.html notes.html.orig
expect 2 "notes.html: exists and is not an HTML report of posenc \(it does not start with posenc's doctype and generator mark\); refused to replace it \(--force replaces it\)" "--report an existing file that is not a posenc report" verify "$MAN" --actual good.safetensors --report notes.html
same notes.html
expect 0 "verify: 1 checked: 1 passed" "the same with --force (replaced)" verify "$MAN" --actual good.safetensors --report notes.html --force
if ! head -c 200 notes.html | grep -q '<meta name="generator" content="posenc">'; then
  echo "FAIL: --report notes.html --force did not replace notes.html with the report"
  failures=$((failures + 1))
fi
expect 0 "verify: 1 checked: 1 passed" "--report onto its own previous report (no --force needed)" verify "$MAN" --actual good.safetensors --report notes.html
cp other.safetensors other.safetensors.orig
printf 'engine bytes' >mine.safetensors && cp mine.safetensors mine.safetensors.orig
expect 2 "mine.safetensors: exists and is not a .safetensors output of posenc" "engine --out a file posenc did not write" engine "$CASE" --data "$DATA" --out mine.safetensors
same mine.safetensors
expect 2 "ok.json: is a regular file, not a directory" "generate --out onto its own --config" generate --config ok.json --out ok.json
mkdir -p fcat && printf '{"schema": "mine"}' >fcat/catalog.json
expect 2 "fcat/catalog.json: exists and is not a posenc catalog" "catalog --data onto a catalog.json posenc did not write" catalog --data fcat
"$POSENC" generate --scheme learned --shard 0/3 --no-catalog --out batch 2>/dev/null
"$POSENC" generate --scheme learned --shard 2/3 --no-catalog --out batch 2>/dev/null
expect 2 "batch: incomplete, no catalog.json written: 1 shard\(s\) of a sharded generate did not finish" "catalog --data of a sharded generate whose shard 1/3 never ran" catalog --data batch
[ -e batch/catalog.json ] && { echo "FAIL: a refused merge wrote batch/catalog.json"; failures=$((failures + 1)); }
mkdir -p records/.posenc-shards && printf '{"schema": "posenc-shard", "level": 1, "scheme": "", "case": "", "shard": "4/2"}' >records/.posenc-shards/a-4-of-2.json
expect 2 "records/.posenc-shards/a-4-of-2.json: not a shard record of posenc: parse_shard: shard i/n needs 0 <= i < n \(got 4/2\)" "catalog --data with a malformed shard record" catalog --data records


# ---- round two: files posenc did not write, patterns and counts, sizes, VL keys -------------
# exists FILE...: each file is still there.
exists() {
  local f
  for f in "$@"; do
    if ! [ -e "$f" ] && ! [ -L "$f" ]; then
      echo "FAIL: $f was removed (posenc did not write it)"
      failures=$((failures + 1))
    fi
  done
}
"$POSENC" generate --scheme learned --out mine 2>/dev/null
printf 'notes\n' >mine/learned/notes.json && printf 'text\n' >mine/learned/x.safetensors
expect 0 "kept 2 file\(s\) in the scheme folders that this run neither wrote nor may remove" "generate into a folder holding files posenc did not write (kept, named)" generate --scheme learned --out mine
exists mine/learned/notes.json mine/learned/x.safetensors
"$POSENC" generate --scheme plan --out mine 2>/dev/null
mkdir -p mine/plan/sub && printf 'mine\n' >mine/plan/mine.json
sed 's/"model_type"/"_name_or_path": "my-gemma", "model_type"/' "$SRC/golden/presets/gemma-2-9b.json" >mygemma.json
"$POSENC" generate --config mygemma.json --out mine 2>/dev/null
mine_cases=$(ls mine/plan/plan_my_gemma* 2>/dev/null | wc -l)
expect 0 "plan_my_gemma.*\(a case of .posenc generate --config.\)" "generate --scheme plan after generate --config into the same folder (the config's cases kept)" generate --scheme plan --out mine
exists mine/plan/mine.json mine/plan/sub mine/plan.json
if [ "$mine_cases" -lt 2 ] || [ "$(ls mine/plan/plan_my_gemma* | wc -l)" != "$mine_cases" ]; then
  echo "FAIL: generate --scheme plan removed cases of generate --config ($mine_cases before)"
  failures=$((failures + 1))
fi
mkdir -p victim linked && printf '{}' >victim/a.json && printf 'v' >victim/b.safetensors && ln -s ../victim linked/learned
expect 2 "linked/learned: is a symbolic link \(to ../victim\); posenc never writes into or cleans a folder through a link" "generate into a folder whose scheme folder is a symbolic link" generate --scheme learned --out linked
exists victim/a.json victim/b.safetensors
if [ "$(ls victim | wc -l)" != 2 ]; then
  echo "FAIL: generate wrote through linked/learned into victim: $(ls victim)"
  failures=$((failures + 1))
fi
nested=$(printf '%.0s(' $(seq 1 30000))
expect 2 "--case \(+\.\.\.: the pattern has 30000 characters, more than the 256 a --case pattern may have" "list --case with 30000 nested parentheses" list --case "$nested"
expect 0 "^0 cases" "list --case '(.*)*x\$' (linear time, no backtracking)" list --case '(.*)*x$'
expect 2 "parse_shard: shard i/n needs n <= 10000" "--shard 0/1000000000" list --shard 0/1000000000
expect 2 "parse_shard: shard must look like i/n with decimal integers" "--shard ' 1/2'" list --shard " 1/2"
expect 2 "--report: must not be empty" "--report ''" verify "$MAN" --actual good.safetensors --report ""
expect 2 "--scheme: must not be empty" "--scheme '' (it meant every scheme)" list --scheme ""
expect 2 "--case: must not be empty" "--case '' (it matched every case)" generate --case "" --out empty_case_out
long=$(printf 'r%.0s' $(seq 1 245)).html
expect 0 "verify: 1 checked: 1 passed" "--report with a 250-byte name" verify "$MAN" --actual good.safetensors --report "$long"
mkdir -p rec2/.posenc-shards
printf '{"schema": "posenc-shard", "level": 1, "shard": "0/1000000000", "options": [], "cases": []}' >rec2/.posenc-shards/a-0-of-1000000000.json
expect 2 "not a shard record of posenc: parse_shard: shard i/n needs n <= 10000" "a shard record with 10^9 shards" catalog --data rec2
printf '{"schema": "posenc-shard", "level": 1, "shard": "0/2", "options": [], "cases": [["learned", "%s", 1]]}' "$nested" >rec2/.posenc-shards/a-0-of-1000000000.json
expect 2 "not a shard record of posenc: case id \"\(+\" is not a plain case id" "a shard record naming a case by 30000 parentheses" catalog --data rec2
printf '{"schema": "posenc-shard", "level": 1, "shard": "0/2", "options": ["--case", "'"'"'; touch pwned #"], "cases": [["learned", "learned_missing", 1]]}' >rec2/.posenc-shards/a-0-of-1000000000.json
expect 2 "posenc generate --case ''\\\\''; touch pwned #' --shard 1/2 --no-catalog --out rec2" "a shard record's options printed shell-quoted in the rerun command" catalog --data rec2
[ -e pwned ] && { echo "FAIL: a rerun command ran"; failures=$((failures + 1)); }
llama=$SRC/golden/presets/llama-2-7b.json
expect 2 "generate --config: the run would write about [0-9.]+ GB .* over the limit of 4 GiB \(POSENC_MAX_OUTPUT_BYTES raises it\); nothing written" "--positions 0-4194303, the documented maximum (refused with the estimate)" generate --config "$llama" --positions 0-4194303 --out huge_out
expect 2 "the run would take .* over the limit of 300 s \(POSENC_MAX_JOB_SECONDS raises it\); nothing written" "--positions 0-2047, the most of one full case (refused with the estimate)" generate --config "$llama" --positions 0-2047 --out huge_out
sed 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 268435456/' "$SRC/golden/presets/llama-3.1-8b.json" >ctx28.json
expect 2 "generate --level 2: the run would write about [0-9.]+ GB .* over the limit of 4 GiB" "generate --level 2 of a 2^28 context (refused with the estimate)" generate --level 2 --config ctx28.json --out huge_out
[ -e huge_out ] && { echo "FAIL: a refused job wrote huge_out"; failures=$((failures + 1)); }
layout_tokens() {  # a Qwen2-VL layout: text, one 16 x 32 image (128 tokens after the 2 x 2 merge), text
  printf '{"spans": [{"type": "text", "tokens": %d}, {"type": "image", "grid_thw": [1, 16, 32]}, {"type": "text", "tokens": 8}]}' "$1" >"$2"
}
layout_tokens 377 vl513.json
expect 2 "vl513.json: the layout has more than 512 tokens" "--layout of 513 tokens" generate --config "$SRC/golden/presets/qwen2-vl-7b-instruct.json" --layout vl513.json --out vl_out
sed 's/"vision_start_token_id": [0-9]*/"vision_start_token_id": 151655/' "$SRC/golden/presets/qwen2-vl-7b-instruct.json" >vl_ids.json
expect 2 "vl_ids.json: image_token_id = 151655 equals vision_start_token_id: the token ids that mark visual spans must differ" "image_token_id equal to vision_start_token_id (VL config)" generate --config vl_ids.json --out vl_out
sed 's/"video_token_id": [0-9]*/"video_token_id": 151655/' "$SRC/golden/presets/qwen2-vl-7b-instruct.json" >vl_ids2.json
expect 2 "vl_ids2.json: image_token_id = 151655 equals video_token_id" "video_token_id equal to image_token_id (VL config)" generate --config vl_ids2.json --out vl_out
# GLM-4.1V: video_start / video_end are checked too (HF's get_rope_index switches to video on
# video_start, so an image token equal to it reads every image as a video).
sed 's/"video_start_token_id": [0-9]*/"video_start_token_id": 151343/' "$SRC/golden/presets/glm-4.1v-9b-thinking.json" >glm_ids.json
expect 2 "glm_ids.json: image_token_id = 151343 equals video_start_token_id" "GLM-4.1V image_token_id equal to video_start_token_id (VL config)" generate --config glm_ids.json --out vl_out
sed 's/"video_end_token_id": [0-9]*/"video_end_token_id": 151341/' "$SRC/golden/presets/glm-4.1v-9b-thinking.json" >glm_ids2.json
expect 2 "glm_ids2.json: video_start_token_id = 151341 equals video_end_token_id" "GLM-4.1V video_start_token_id equal to video_end_token_id (VL config)" generate --config glm_ids2.json --out vl_out
sed 's/"vision_config": {/"vision_config": [1], "x_vision_config": {/' "$SRC/golden/presets/qwen2-vl-7b-instruct.json" >vl_shape.json
expect 2 "vl_shape.json: vision_config = \[1\]: must be an object" "vision_config: [1] (VL config)" generate --config vl_shape.json --out vl_out
printf '{"model_type": "gemma3_text", "num_attention_heads": 4, "head_dim": 64, "num_hidden_layers": 6, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], "sliding_window": 512, "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}, "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}, "chunked_attention": {"rope_type": "default", "rope_theta": 500000.0}}}' >rp_absent.json
expect 2 "rp_absent.json: \"rope_parameters\" has a block for layer type \"chunked_attention\", which no layer of this model has" "rope_parameters block for a layer type the model lacks (config)" generate --config rp_absent.json --out vl_out
[ -e vl_out ] && { echo "FAIL: a refused config wrote vl_out"; failures=$((failures + 1)); }

# ---- the documented maxima, run under a memory cap (ulimit -v, KiB) and a time limit --------
# bounded KIB SECONDS CODE REGEX ROW ARGS...: as expect, under ulimit -v KIB and timeout SECONDS.
bounded() {
  local kib=$1 secs=$2 code=$3 regex=$4 row=$5 out rc t0 t1
  shift 5
  if [ -n "${POSENC_SANITIZED:-}" ]; then  # ASan reserves terabytes of address space
    echo "skip: $row: not under a sanitizer (ulimit -v)"
    return
  fi
  rows=$((rows + 1))
  t0=$(date +%s.%N)
  out=$( (ulimit -v "$kib" && timeout "$secs" "$POSENC" "$@") 2>&1)
  rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" != "$code" ] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: $row: exit $rc (expected $code) under ulimit -v $kib and timeout $secs: posenc $*"
    printf '%s\n' "$out" | tail -5
    failures=$((failures + 1))
  else
    printf 'ok: %s -> exit %s in %.1f s under %d MiB: %s\n' "$row" "$rc" "$(echo "$t1 - $t0" | bc)" \
      $((kib / 1024)) "$(grep -E -m1 -- "$regex" <<<"$out")"
  fi
}
# The most --positions: the estimate and the refusal come within a 512 MiB cap (sorting 2^22
# positions through a set of reasons took about 600 MB before the estimate was printed).
bounded 524288 30 2 "estimate: 513 cases, about 15103.4 MB.*peak memory about [0-9]+ MB" "--positions 0-4194303 under a 512 MiB cap (estimate, then refused)" generate --config "$llama" --positions 0-4194303 --out huge_out
bounded 2097152 30 0 "^32770 level-2 cases \(estimated" "list --level 2 of a 2^28 context (max_position_embeddings at its maximum)" list --level 2 --config ctx28.json
bounded 2097152 30 0 "level-2 cases \(shard 9999/10000" "list --level 2 --shard 9999/10000 (the most shards)" list --level 2 --config ctx28.json --shard 9999/10000
bounded 2097152 30 0 "cases \(shard 0/10000" "list --shard 0/10000 (the most shards)" list --shard 0/10000
layout_tokens 376 vl512.json
bounded 2097152 120 0 "generated 1 cases" "--layout of 512 tokens, the most of a VL case" generate --config "$SRC/golden/presets/qwen2-vl-7b-instruct.json" --layout vl512.json --out vl512_out
# ---- plan manifests (plan.json) and per-layer outputs -------------------------------------------
# A Gemma 3 plan as generate --config writes it, each row on a copy with plan.json edited (python3).
"$POSENC" generate --config "$SRC/golden/presets/gemma-3-4b-it.json" --out g3 >/dev/null 2>&1 || exit 2
PL=plan_gemma_3_4b_it
for t in sliding_attention full_attention; do
  "$POSENC" engine ${PL}_${t}_f32 --data g3 --pipeline fp32 --out g3out/${PL}_${t}_f32.safetensors 2>/dev/null || exit 2
done
# planedit NAME PYTHON: g3_NAME/, a copy of g3/ whose plan.json j is edited by PYTHON
planedit() {
  rm -rf "g3_$1" && cp -r g3 "g3_$1"
  python3 - "g3_$1/plan.json" "$2" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
exec(sys.argv[2])
json.dump(j, open(p, "w"), indent=1)
PY
}
planedit point 'f, s = j["types"][1], j["types"][0]
for k in ("case", "manifest", "manifest_sha256", "tensors", "tensors_sha256"): f[k] = s[k]
for l in j["layers"]:
    if l["type"] == "full_attention": l["case"] = s["case"]'
expect 2 "g3_point/plan.json: layers\[5\]\.base: 1000000\.0 \(type full_attention\) but its case ${PL}_sliding_attention_f32 says 10000\.0" "plan.json pointing full_attention at the sliding case" verify g3_point/plan.json --actual g3out --profile fp32
planedit swap 'a, b = j["types"]
for k in ("case", "manifest", "manifest_sha256", "tensors", "tensors_sha256"): a[k], b[k] = b[k], a[k]
for l in j["layers"]: l["case"] = a["case"] if l["type"] == a["name"] else b["case"]'
expect 2 "g3_swap/plan.json: layers\[0\]\.base: 10000\.0 \(type sliding_attention\) but its case ${PL}_full_attention_f32 says 1000000\.0" "plan.json with the two types' cases swapped" verify g3_swap/plan.json --actual g3out --profile fp32
planedit window 'for l in j["layers"]:
    if l["window"]: l["window"] = 2048'
expect 2 "g3_window/plan.json: layers\[0\]\.window: 2048 \(type sliding_attention\) but its case ${PL}_sliding_attention_f32 says 1024" "plan.json with a changed window" verify g3_window/plan.json --actual g3out --profile fp32
planedit notes 'j["notes"].append("edited")'
expect 2 "g3_notes/plan.json: SHA-256 differs from g3_notes/catalog.json" "plan.json edited within the rules (its catalog hash)" verify g3_notes/plan.json --actual g3out --profile fp32
planedit tensors 'pass'
printf 'x' >>"g3_tensors/plan/${PL}_full_attention_f32.safetensors"
expect 2 "g3_tensors/plan.json: types\[1\]\.tensors_sha256: .*has another SHA-256 than the plan records" "a plan's case file changed after the plan" verify g3_tensors/plan.json --actual g3out --profile fp32
planedit v1 'j["version"] = 1'
expect 2 "g3_v1/plan.json: version: expected 2 \(got 1\); regenerate the plan" "plan.json of version 1" verify g3_v1/plan.json --actual g3out --profile fp32
mkdir -p g3miss && cp g3out/${PL}_sliding_attention_f32.safetensors g3miss/
expect 1 "1 layer type not passing \(1 without output, which fails its layers\), 5 of 34 layers affected" "plan with one type's output missing" verify g3/plan.json --actual g3miss --profile fp32
expect 1 "plan gemma_3_4b_it: 1 layer type not passing \(1 without output, which fails its layers\)" "the plan's folder with one type's output missing (verified as a folder)" verify g3 --actual g3miss --profile fp32
python3 - g3/plan.json <<'PY' >table.json
import json, sys
p = json.load(open(sys.argv[1]))
keys = ["rope", "base", "scaling", "mask", "window", "chunk", "temperature", "sinks", "qk_norm"]
by = {l["type"]: {k: l[k] for k in keys} for l in p["layers"]}
rows = [dict(index=i, **by["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"]) for i in range(34)]
del rows[3]["qk_norm"]
print(json.dumps({"schema": "posenc-layer-table", "layers": rows}))
PY
expect 2 "table.json: layers\[3\]\.qk_norm: missing \(null where the layer has none\)" "layer table with a key missing" verify g3/plan.json --layer-table table.json
expect 2 "--layer-table needs one plan manifest \(plan.json\) as GOLDEN" "--layer-table without a plan" verify "$MAN" --layer-table table.json
expect 2 "verify: --actual is required" "verify without --actual or --layer-table" verify "$MAN"
mkdir -p g3layers/layers/00 && cp g3out/${PL}_sliding_attention_f32.safetensors g3layers/layers/00/
expect 1 "plan gemma_3_4b_it: 33 of 34 layers fail: 1-33" "per-layer outputs with layers missing" verify g3/plan.json --actual g3layers --profile fp32

echo "bad input: $rows rows, $failures failed"
[ "$failures" -eq 0 ]
