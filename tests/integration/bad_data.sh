#!/usr/bin/env bash
# Bad data gets one clear line and exit 2 before step 1, on every rank of an mpirun job:
# a missing or empty file, a token file whose size is not a multiple of its dtype, a wrong
# magic number, an .npy of an unsupported dtype or in Fortran order, tensors whose first
# dimensions differ, a label out of range for the logits, a data set smaller than one
# batch, data a model cannot take (byte text for an image classifier; an input name the
# model does not take, a model input no data provides), each with the hint
# that fits the model in hand. Fixtures: tests/fixtures/data/bad (scripts/make_fixtures.py).
#
# usage: bad_data.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR
set -euo pipefail
ppstage=$1
read -r -a mpiexec <<< "$2"
data=$3/data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
resnet=(--model.name "$data/small_resnet.pt" --train.batch_size 16)
refused() {  # name, expected text, train options...
  local name=$1 expected=$2 code=0
  shift 2
  # timeout: a hang guard only (a refusal takes seconds), not a measurement.
  timeout 300 "${mpiexec[@]}" -np 2 "$ppstage" train --train.threads 1 --comm.timeout_s 60 \
    --train.steps 100000 "$@" > "$work/$name.log" 2>&1 || code=$?
  local line
  line=$(grep -m1 "ppstage: error: " "$work/$name.log") || line=""
  if [ "$code" != 2 ]; then
    echo "FAIL $name: exit $code, not 2"; tail -3 "$work/$name.log"; failed=1
  elif ! grep -qF -- "$expected" <<< "$line"; then
    echo "FAIL $name: the error line lacks '$expected':"; echo "  $line"; failed=1
  elif grep -q "^step" "$work/$name.log"; then
    echo "FAIL $name: a step ran"; failed=1
  else
    echo "ok   $name: ${line#*ppstage: error: }"
  fi
}

: > "$work/empty.bin"
printf 'abc' > "$work/odd.bin"
printf 'not an npy file' > "$work/x.npy"
refused empty "the token file '$work/empty.bin' is empty" --data.path "$work/empty.bin"
refused missing "cannot read the data file --data.path '$work/none.bin'" --data.path "$work/none.bin"
refused odd-size "has 3 bytes of tokens, not a multiple of 2 (uint16)" --data.path "$work/odd.bin"
refused magic "is not a NumPy .npy file" --data.path "$work/x.npy" --data.format npy
refused idx-magic "does not start with an IDX magic number" --data.path "$data/classes.pt" \
  --data.format idx --data.targets "$data/classes.pt"
refused fortran "is in Fortran order" "${resnet[@]}" --data.path "$data/bad/fortran.npy" \
  --data.targets "$data/classes_npy/labels.npy"
refused big-endian "has dtype '>f4', which ppstage cannot read" "${resnet[@]}" \
  --data.path "$data/bad/big_endian.npy" --data.targets "$data/classes_npy/labels.npy"
refused complex "has dtype '<c8'" "${resnet[@]}" --data.path "$data/bad/complex.npy" \
  --data.targets "$data/classes_npy/labels.npy"
refused first-dims "the tensors' first dimensions differ ('images' has 64 samples, 'labels' 10)" \
  "${resnet[@]}" --data.path "$data/bad/differ.pt"
refused label-range "the labels 'labels' go up to 14 but the model's output has 10 classes" \
  "${resnet[@]}" --data.path "$data/bad/out_of_range"
refused small "has fewer samples than one batch (--train.batch_size 128)" \
  --model.name "$data/small_resnet.pt" --data.path "$data/classes.pt" --train.batch_size 128
refused no-target "--data.target 'x' is not in the data, which gives images, onehot" "${resnet[@]}" \
  --data.path "$data/classes_npy/images.npy" --data.targets "$data/onehot.npy" --data.target x
# Hints right for the model in hand.
refused text-for-images "the model fails on an example input (int64 [2, 32]): Expected 3D (unbatched) or 4D (batched) input to conv2d" \
  "${resnet[@]}"
refused text-for-images-shaped "the embedded text gives sequences of byte token ids, int64 (seq_len); the model takes float32 [1, 8, 8] samples" \
  "${resnet[@]}" --model.input_dtype float32 --model.input_shape 16,1,8,8 --train.loss cross_entropy
refused small-vocab "has byte tokens (0-255) but the model's output has 64 classes: give it a token file" \
  --model.name "$3/traced_gpt.pt" --model.vocab_size 64 --model.seq_len 16 --train.batch_size 8
refused builtin-vocab "has byte tokens (0-255) but the model's output has 100 classes (set --model.vocab_size 256)" \
  --model.vocab_size 100 --model.seq_len 16 --train.batch_size 8
# Inputs: a name forward does not take, a field nothing takes, an argument nothing feeds.
hf=(--model.name "$3/hf_gpt2.pt" --train.batch_size 8 --data.path "$data/masked_npy")
refused unknown-argument "--model.inputs names 'ids', which the model's forward does not take (it takes input_ids, attention_mask)" \
  "${hf[@]}" --model.inputs ids=tokens
refused unknown-field "--model.inputs feeds 'input_ids' the field 'input', which the data does not give (it gives mask, tokens)" \
  "${hf[@]}" --model.inputs input_ids=input
refused field-not-taken "the data gives 'mask', which is no argument of the model's forward (it takes input_ids, attention_mask)" \
  "${hf[@]}"
refused input-not-fed "the model's forward needs 'y', which no data field feeds (the data gives images)" \
  --model.name "$3/two_inputs.pt" --train.batch_size 16 --data.path "$data/classes.pt" --model.inputs x=images
# --train.loss model: labels need a data file, a forward that takes them, a scalar loss out.
refused model-loss-no-data "--train.loss model passes the labels to the model: give a data file with them" \
  --model.name "$3/hf_gpt2_loss.pt" --train.batch_size 8 --model.seq_len 16 --model.vocab_size 96 --train.loss model
refused model-loss-no-labels-argument "the data gives 'labels', which is no argument of the model's forward (it takes input_ids, attention_mask)" \
  --model.name "$3/hf_gpt2.pt" --train.batch_size 8 --data.path "$data/masked_tokens.pt" --train.loss model
refused model-loss-labels-not-fed "--train.loss model passes the labels to the model, but they feed none of forward's arguments (fed: input_ids, attention_mask)" \
  --model.name "$3/hf_gpt2_loss.pt" --train.batch_size 8 --data.path "$data/masked_tokens.pt" \
  --train.loss model --model.inputs input_ids,attention_mask
refused model-loss-not-scalar "takes the model's first output as its loss, a floating-point scalar; it is float32 [8, 16, 96]" \
  --model.name "$3/hf_gpt2.pt" --train.batch_size 8 --data.path "$data/masked_tokens.pt" \
  --train.loss model --model.inputs input_ids,attention_mask=labels
refused mse-on-labels "mse compares the model's output with the targets 'labels'" "${resnet[@]}" \
  --data.path "$data/classes.pt" --train.loss mse
# Documents need text or tokens; shorter sequences need a model that takes them.
refused documents-of-arrays "need text or a token file; " "${resnet[@]}" \
  --data.path "$data/classes.pt" --data.documents true
exit "$failed"
