#!/usr/bin/env bash
# Every bad input in one table (tests/integration/bad_inputs.table): each case runs under
# mpirun at 2 ranks and must
#   - exit 2, every rank gone within 10 s (mpirun returns only when its ranks have);
#   - print one clear line: "ppstage: error: " and the case's expected text, with no control
#     character and nothing that is not UTF-8 (a binary file's bytes are escaped);
#   - run no step;
#   - leave what an earlier run wrote untouched, byte for byte: its checkpoint directory and
#     metrics file (every train case resumes from the one and writes the other, unless it
#     names its own).
#
# usage: bad_inputs.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR NO_SYMBOL_PLUGIN [CASE|GROUP...]
#   CASE, GROUP: run only the cases of these names, or of these groups ("## group NAME:"
#   lines in the table); all by default. An unknown name runs no case and fails.
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
fixtures=$3
no_symbol_plugin=$4
shift 4
only=("$@")
table=$(dirname "$0")/bad_inputs.table
export CUDA_VISIBLE_DEVICES=""  # the devices group expects no GPU, on any machine
source_dir=$(cd "$(dirname "$0")/../.." && pwd)

# What the cases refer to: @W (this directory), @FIX, @DATA, @SRC, @NOSYM, @CTRL.
mkdir "$work/earlier"
tiny=(--config "$source_dir/configs/gpt-tiny.ini" --train.threads 1 --output.log_every 0)
"${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --train.steps 2 --checkpoint.every 1 \
  --checkpoint.dir "$work/earlier/ckpt" --output.metrics_json "$work/earlier/metrics.json" \
  > "$work/earlier.log" 2>&1 || { cat "$work/earlier.log"; exit 1; }
"${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --model.d_model 32 --train.steps 1 \
  --checkpoint.dir "$work/other-model" > "$work/other.log" 2>&1 || { cat "$work/other.log"; exit 1; }
# Copies of the earlier checkpoints, every one of them damaged: none left to resume from.
cp -r "$work/earlier/ckpt" "$work/damaged-1"
for step in "$work"/damaged-1/step-*; do printf '{"format": 1, "step": ' > "$step/manifest.json"; done
cp -r "$work/earlier/ckpt" "$work/damaged-2"
for file in "$work"/damaged-2/step-*/*; do  # the first byte of every file changed
  [[ $file == */manifest.json ]] && continue
  first=$(head -c 1 "$file" | od -An -tu1 | tr -d ' ')
  printf "\\x$(printf %02x $(((first + 1) % 256)))" | dd of="$file" bs=1 conv=notrunc status=none
done
: > "$work/empty.ini"
printf '[model\nname = gpt\n' > "$work/malformed.ini"
printf '[model]\nlayers = four\n' > "$work/wrong-type.ini"
printf '[model]\nno_such_key = 1\n' > "$work/unknown-key.ini"
for byte in $(seq 0 255); do printf "\\x$(printf %02x "$byte")"; done > "$work/binary.ini"
{ printf '[train]\n'; head -c $((64 << 20)) /dev/zero | tr '\0' '#'; } > "$work/huge.ini"
mkdir "$work/a-directory"
head -c 5000 "$fixtures/traced_gpt.pt" > "$work/truncated.pt"
printf 'not a model\n' > "$work/text.pt"
cp "$fixtures/data/tokens_u16.bin" "$work/not-a-plugin.so"
printf 'stage,0\n1,F0\n' > "$work/malformed.csv"
printf '0F0,0B0\n' > "$work/one-stage.csv"
printf '{"traceEvents": [{"ph": "X", "ts": ' > "$work/truncated-trace.json"
: > "$work/empty.bin"
printf 'abc' > "$work/odd.bin"
{ head -c 400 /dev/zero; printf '\x2c\x01'; head -c 400 /dev/zero; } > "$work/big-id.bin"  # id 300
printf 'not an npy file' > "$work/x.npy"
head -c 100 "$fixtures/data/tiny-images-idx3-ubyte.gz" > "$work/truncated.gz"
ctrl=$'bad\x1b[2Jname\x07.pt'

checksums() { (cd "$work" && find earlier other-model -type f -print0 | sort -z | xargs -0 sha256sum); }
# Paths are split on spaces below: the work directory and fixtures must have none.
[[ "$work$fixtures$source_dir$no_symbol_plugin" != *" "* ]] || { echo "paths with spaces"; exit 1; }
before=$(checksums)

expand() {
  local text=$1
  text=${text//@RESNET/--model.name @DATA/small_resnet.pt --train.batch_size 16}
  text=${text//@HF/--model.name @FIX/hf_gpt2.pt --train.batch_size 8 --data.path @DATA/masked_npy}
  text=${text//@W/"$work"}
  text=${text//@DATA/"$fixtures/data"}
  text=${text//@FIX/"$fixtures"}
  text=${text//@SRC/"$source_dir"}
  text=${text//@NOSYM/"$no_symbol_plugin"}
  text=${text//@CTRL/"$ctrl"}
  printf '%s' "$text"
}

cases=0
fail() { echo "FAIL $name: $*"; failed=1; }
group=
while IFS= read -r line; do
  if [[ $line =~ ^"## group "([a-z_]+): ]]; then group=${BASH_REMATCH[1]}; continue; fi
  [[ -z ${line// } || $line == \#* ]] && continue
  IFS='|' read -r name expected args <<< "$line"
  name=$(xargs <<< "$name")
  expected=$(expand "$(sed 's/^ *//; s/ *$//' <<< "$expected")")
  if ((${#only[@]})) && [[ ! " ${only[*]} " == *" $name "* && ! " ${only[*]} " == *" $group "* ]]; then
    continue
  fi
  cases=$((cases + 1))
  read -r -a argv <<< "$(expand "$args")"
  if [[ ${argv[0]} == train ]]; then
    defaults=(--train.threads 1 --comm.timeout_s 60 --train.steps 100000
              --output.metrics_json "$work/earlier/metrics.json"
              --checkpoint.dir "$work/earlier/ckpt" --checkpoint.resume true)
    for ((i = 0; i < ${#defaults[@]}; i += 2)); do
      [[ " ${argv[*]} " == *" ${defaults[i]} "* ]] || argv+=("${defaults[i]}" "${defaults[i + 1]}")
    done
  fi
  log="$work/$name.log" code=0
  SECONDS=0
  timeout 10 "${mpiexec[@]}" -np 2 "$ppstage" "${argv[@]}" < /dev/null > "$log" 2>&1 || code=$?
  errors=$(grep -a "ppstage: error: " "$log" || true)
  if [[ $code == 124 ]]; then
    fail "still running after 10 s"
  elif [[ $code != 2 ]]; then
    fail "exit $code, not 2"; tail -3 "$log"
  elif [[ -z $errors ]]; then
    fail "no 'ppstage: error: ' line"; tail -3 "$log"
  elif ! grep -qF -- "$expected" <<< "$errors"; then
    fail "no error line has '$expected':"; echo "$errors" | head -3
  elif LC_ALL=C grep -aq '[[:cntrl:]]' <<< "$errors" || ! iconv -f UTF-8 -t UTF-8 <<< "$errors" > /dev/null 2>&1; then
    fail "an error line has bytes that are not printable:"; echo "$errors" | head -3 | cat -v
  elif grep -aq "^step " "$log"; then
    fail "a step ran"
  elif [[ $(checksums) != "$before" ]]; then
    fail "what the earlier run wrote changed"; before=$(checksums)
  else
    echo "ok   $name (${SECONDS} s): $(head -1 <<< "$errors" | cut -c1-160)"
  fi
done < "$table"
echo "$cases cases"
((cases > 0)) || { echo "no case or group named ${only[*]}"; exit 1; }
exit "$failed"
